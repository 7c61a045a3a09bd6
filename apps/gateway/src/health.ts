/**
 * Health endpoints (no credentials needed):
 *  - `GET /healthz`: liveness; 200 while the process runs (no I/O);
 *  - `GET /readyz`: readiness; 200 only while Redis (every master of a Cluster) is connected and answers PING in time, its
 *    eviction policy is `noeviction` (or cannot be read: managed Redis often refuses CONFIG; case B-15),
 *    and the gateway is not draining on SIGTERM; else 503 + `Retry-After` with the reason.
 *    The body says how many workers are alive (`workers`). With none, the gateway stays ready
 *    (it still serves tasks/get, tasks/cancel, server/discover and gateway tools, and tasks
 *    it creates wait for a worker, saying so in their statusMessage) and the body carries
 *    `degraded: "no worker is running"`: alert on `mcp_workers_alive == 0`, not on readiness.
 */
import type { FastifyInstance } from 'fastify';
import { RETRY_AFTER_S } from '@mcp-tasks/errors';
import type { RedisClient } from '@mcp-tasks/jobs';
import { pingAll, type EvictionGuard, type RedisHealth } from '@mcp-tasks/jobs';

export interface HealthOptions {
  redis: RedisClient;
  redisHealth: RedisHealth;
  /** True once the gateway started draining (SIGTERM). */
  draining: () => boolean;
  /** Refuses an evicting Redis policy (case B-15). */
  eviction?: EvictionGuard;
  /** Live workers (undefined when unknown). */
  workersAlive?: () => Promise<number | undefined>;
}

export function registerHealth(
  app: FastifyInstance,
  { redis, redisHealth, draining, eviction, workersAlive }: HealthOptions,
): void {
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_req, reply) => {
    try {
      if (draining()) throw new Error('draining');
      if (!redisHealth.ok) throw new Error(`redis ${redis.status === 'ready' ? 'not answering' : redis.status}`);
      // every master of a Cluster (case N-10); Redis' own error text ("Connection is closed." …)
      // stays in the logs.
      await pingAll(redis).catch(() => {
        throw new Error('redis not answering');
      });
      const evicting = await eviction?.check();
      if (evicting) throw new Error(evicting);
      const workers = workersAlive ? await workersAlive().catch(() => undefined) : undefined;
      return {
        status: 'ready',
        ...(workers === undefined ? {} : { workers }),
        ...(workers === 0 ? { degraded: 'no worker is running: tasks wait until one starts' } : {}),
      };
    } catch (e) {
      return reply
        .code(503)
        .header('retry-after', String(RETRY_AFTER_S))
        .send({ status: 'unavailable', reason: (e as Error).message });
    }
  });
}
