/**
 * Health endpoints (no credentials needed):
 *  - `GET /healthz`: liveness; 200 while the process runs (no I/O);
 *  - `GET /readyz`: readiness; 200 only while Redis is connected and answers PING in time, and
 *    not while the gateway drains on SIGTERM (503 + `Retry-After`).
 */
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import type { RedisHealth } from '@mcp-tasks/jobs';

export interface HealthOptions {
  redis: Redis;
  redisHealth: RedisHealth;
  /** True once the gateway started draining (SIGTERM). */
  draining: () => boolean;
}

export function registerHealth(app: FastifyInstance, { redis, redisHealth, draining }: HealthOptions): void {
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_req, reply) => {
    try {
      if (draining()) throw new Error('draining');
      if (!redisHealth.ok) throw new Error(`redis ${redis.status === 'ready' ? 'not answering' : redis.status}`);
      await redis.ping();
      return { status: 'ready' };
    } catch (e) {
      return reply.code(503).header('retry-after', '5').send({ status: 'unavailable', reason: (e as Error).message });
    }
  });
}
