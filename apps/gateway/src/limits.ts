/**
 * Per-principal rate limits (design D9; issue "Safe to expose" §4; case N-08), counted by
 * `@fastify/rate-limit`:
 *  - requests: every authenticated `POST /mcp` that is neither a poll nor a call that starts
 *    work (RATE_LIMIT_REQUESTS_PER_MIN, default 3600/min), counted in Redis (its Redis store) so
 *    the limit holds across every replica (a principal gets about the limit, not the limit ×
 *    replicas);
 *  - polls (`tasks/get`): the same RATE_LIMIT_REQUESTS_PER_MIN, counted in the process (the
 *    plugin's in-memory LRU store, one counter per principal and window), so a poll costs one
 *    `HGETALL` and nothing else on Redis (N-08: "polls stay one Redis read each"). This limit is
 *    per gateway: behind N gateways a principal may poll up to N × the limit per minute, and
 *    every gateway must be configured with the same value for the limit to mean the same;
 *  - task creations: every `tools/call` that starts work on a worker, as a task or as a
 *    synchronous call (RATE_LIMIT_TASK_CREATIONS_PER_MIN, default 120/min), counted in Redis; such
 *    a call counts against this rate instead of the request rate (one counter per creation). A
 *    retry that carries a `requestState` continues earlier work and counts as a request.
 *  - failed authentications: every 401 counted against the client address (`req.ip`, the
 *    real client behind a trusted proxy, TRUST_PROXY), RATE_LIMIT_AUTH_FAILURES_PER_MIN (default
 *    60/min), counted in Redis; past it a failure is answered 429 instead of 401. An
 *    unauthenticated `server/discover` counts against the request rate of its client address.
 * A refusal is HTTP 429 with `Retry-After` (seconds) and a JSON-RPC error body carrying the
 * request's id: code `-31429` (an application code, outside the range JSON-RPC and MCP reserve),
 * `data: { limit, max, retryAfterS }`. Nothing else is written for a refused request.
 *
 * Keys (requests, creations, failed authentications): `<prefix>:rl:<kind>:<SHA-256>` with kind
 * `req`, `new`, `auth` (rate-limit-store.ts), one counter per principal (or client address) and window,
 * with the window's PEXPIRE. When Redis does not answer, requests are let through (`skipOnError`): the
 * methods that need Redis answer 503 themselves.
 */
import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { RedisClient } from '@mcp-tasks/jobs';
import type { Config } from '@mcp-tasks/config';
import { principalTag } from '@mcp-tasks/task-store';
import { redisStoreWithoutRoute } from './rate-limit-store.js';
import { ErrorCode, jsonRpcErrorBody } from './errors.js';

/** Which limit refused a request (`error.data.limit`). */
export type LimitName =
  | 'requests_per_minute'
  | 'task_creations_per_minute'
  | 'outstanding_tasks'
  | 'listen_streams'
  | 'auth_failures_per_minute';

/** A refused request: what to tell the client. */
export interface LimitRefusal {
  limit: LimitName;
  max: number;
  retryAfterS: number;
}

export interface Limits {
  /** Counts a request of `principal` (in Redis); a refusal when over the per-minute limit. */
  request: (req: FastifyRequest, principal: string) => Promise<LimitRefusal | undefined>;
  /** Counts a `tasks/get` of `principal` in this process against the request limit; a refusal when over it. */
  poll: (req: FastifyRequest, principal: string) => Promise<LimitRefusal | undefined>;
  /** Counts a task creation of `principal`; a refusal when over the per-minute limit. */
  creation: (req: FastifyRequest, principal: string) => Promise<LimitRefusal | undefined>;
  /** Counts a failed authentication from `clientAddress` (in Redis); a refusal when over the per-minute limit. */
  authFailure: (req: FastifyRequest, clientAddress: string) => Promise<LimitRefusal | undefined>;
}

const WINDOW_MS = 60_000;
const LIMIT_KEY = Symbol('limitKey');
/** Principals whose poll counters the in-memory store keeps (LRU; a principal pushed out starts a new window). */
const LOCAL_PRINCIPALS = 10_000;

type Limiter = ReturnType<FastifyInstance['createRateLimit']>;

/**
 * Registers `@fastify/rate-limit` twice (no global hook), each in its own encapsulated context
 * so each has its own store — Redis for requests and creations, in memory for polls — and
 * builds the three limiters.
 */
export async function registerLimits(app: FastifyInstance, redis: RedisClient, config: Config): Promise<Limits> {
  const keyOf = (req: FastifyRequest) => (req as unknown as Record<symbol, string>)[LIMIT_KEY]!;
  const limiters = async (store: Record<string, unknown>, maxes: number[]): Promise<Limiter[]> => {
    let made: Limiter[] = [];
    await app.register(async (scope) => {
      await scope.register(rateLimit, { global: false, skipOnError: true, ...store });
      made = maxes.map((max) => scope.createRateLimit({ max, timeWindow: WINDOW_MS, keyGenerator: keyOf }));
    });
    return made;
  };
  const [requests, creations, authFailures] = await limiters(
    { store: redisStoreWithoutRoute(redis, `${config.keyPrefix}:rl:`) },
    [config.limits.requestsPerMin, config.limits.taskCreationsPerMin, config.limits.authFailuresPerMin],
  );
  const [polls] = await limiters({ cache: LOCAL_PRINCIPALS }, [config.limits.requestsPerMin]);
  const check = async (limiter: Limiter, key: string, limit: LimitName, max: number, req: FastifyRequest) => {
    (req as unknown as Record<symbol, string>)[LIMIT_KEY] = key;
    // `isAllowed` only means "in the allow list"; `isExceeded` says the limit was passed.
    const r = await limiter(req);
    if (r.isAllowed || !r.isExceeded) return undefined;
    return { limit, max, retryAfterS: Math.max(1, r.ttlInSeconds) };
  };
  return {
    request: (req, principal) =>
      check(requests!, `req:${principalTag(principal)}`, 'requests_per_minute', config.limits.requestsPerMin, req),
    // In memory only: the principal itself is the key (nothing leaves the process).
    poll: (req, principal) => check(polls!, principal, 'requests_per_minute', config.limits.requestsPerMin, req),
    creation: (req, principal) =>
      check(
        creations!,
        `new:${principalTag(principal)}`,
        'task_creations_per_minute',
        config.limits.taskCreationsPerMin,
        req,
      ),
    authFailure: (req, clientAddress) =>
      check(
        authFailures!,
        `auth:${principalTag(`ip:${clientAddress}`)}`,
        'auth_failures_per_minute',
        config.limits.authFailuresPerMin,
        req,
      ),
  };
}

const DESCRIBE: Record<LimitName, string> = {
  requests_per_minute: 'requests per minute',
  task_creations_per_minute: 'new tasks per minute',
  outstanding_tasks: 'unfinished tasks at a time',
  listen_streams: 'open task listen streams',
  auth_failures_per_minute: 'failed authentications per minute',
};

/** Writes the 429 answer for a refusal (HTTP `Retry-After` + JSON-RPC error with the request id). */
export function sendRefusal(reply: FastifyReply, id: unknown, r: LimitRefusal): FastifyReply {
  return reply
    .code(429)
    .header('retry-after', String(r.retryAfterS))
    .send(
      jsonRpcErrorBody(
        id,
        ErrorCode.LimitExceeded,
        `Limit exceeded: at most ${r.max} ${DESCRIBE[r.limit]} per ${r.limit === 'auth_failures_per_minute' ? 'client address' : 'principal'}; retry after ${r.retryAfterS} s`,
        {
          limit: r.limit,
          max: r.max,
          retryAfterS: r.retryAfterS,
        },
      ),
    );
}
