/**
 * Seconds a client or load balancer is told to wait (`Retry-After`) on a 503: the task store
 * (Redis) unavailable, a gateway's or worker's `/readyz` failing. One value for every process.
 */
export const RETRY_AFTER_S = 5;
