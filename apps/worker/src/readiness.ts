/**
 * The worker's readiness (`GET /readyz` on its operations port): ready once the start-up is over
 * (the first heartbeat written), while not shutting down, with every tools worker running, Redis
 * connected and answering within 1 s with `maxmemory-policy noeviction` (case B-15), and a
 * heartbeat written within its lifetime. The operations port is bound before the start-up ends,
 * so "starting" is a verdict too. A reason is a short sentence for operators (no key names).
 */
import { evictionGuard, pingAll, type Heartbeat, type RedisClient } from '@mcp-tasks/jobs';
import type { Readiness } from '@mcp-tasks/observability';

export interface WorkerReadinessDeps {
  redis: RedisClient;
  workerId: string;
  isShuttingDown: () => boolean;
  /** The heartbeat loop; `undefined` until the start-up is over. */
  heartbeat: () => Heartbeat | undefined;
  /** Whether every BullMQ tools worker of this process is running. */
  toolsRunning: () => boolean;
}

/** Returns the `/readyz` check (200 with the worker id, or 503 with the reason). */
export function workerReadiness(d: WorkerReadinessDeps): () => Promise<Readiness> {
  const eviction = evictionGuard(d.redis);
  return async () => {
    const heartbeat = d.heartbeat();
    const reason = d.isShuttingDown()
      ? 'shutting down'
      : !heartbeat
        ? 'starting'
        : !d.toolsRunning()
          ? 'worker not running'
          : d.redis.status !== 'ready'
            ? `redis ${d.redis.status}`
            : Date.now() - heartbeat.lastOk > heartbeat.ttlMs
              ? 'heartbeat not written (Redis?)'
              : await Promise.race([
                  pingAll(d.redis).then(() => eviction.check()),
                  new Promise<string>((r) => setTimeout(() => r('redis not answering'), 1000).unref()),
                ]);
    return reason
      ? { ready: false, body: { status: 'unavailable', reason } }
      : { ready: true, body: { status: 'ready', workerId: d.workerId } };
  };
}
