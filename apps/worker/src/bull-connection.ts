/**
 * The worker process's BullMQ connection and the options its BullMQ Workers share (every shard
 * of the tools queue, the maintenance queue; the webhooks worker takes the connection). A
 * connection that cannot be made stops the process (one line on stderr, exit 1); its errors
 * are logged and counted (`connection: 'bullmq'`).
 */
import type { WorkerOptions } from 'bullmq';
import type { Config } from '@mcp-tasks/config';
import type { Logger, WorkerMetrics } from '@mcp-tasks/observability';
import { bullPrefix, connectOrExplain, createRedis, type RedisClient } from '@mcp-tasks/jobs';

/** The connection, and the Worker options: WORKER_CONCURRENCY, lock duration and renewal, stall checks (ms). */
export interface BullConnection {
  connection: RedisClient;
  workerOpts: WorkerOptions & { connection: RedisClient; concurrency: number };
}

/** Connects the BullMQ client of this process, or exits. */
export async function connectBullOrExit(config: Config, metrics: WorkerMetrics, log: Logger): Promise<BullConnection> {
  // BullMQ duplicates this client for its blocking connection.
  const connection = createRedis(config.redis, 'worker', 'mcp-bull');
  await connectOrExplain(connection, config.redis).catch((e: Error) => {
    console.error(`worker: ${e.message}`);
    process.exit(1);
  });
  connection.on('error', (err: Error) => {
    metrics.redisErrors.inc({ connection: 'bullmq' });
    log.warn({ err: err.message }, 'redis.bull_error');
  });
  const workerOpts = {
    connection,
    prefix: bullPrefix(config.keyPrefix),
    concurrency: config.worker.concurrency,
    lockDuration: config.worker.lockDurationMs,
    // Renewed often, so an outage up to lockDuration − lockRenewTime − the 2 s reconnect
    // back-off (17 s by default) finds every lock still valid when Redis is back.
    lockRenewTime: config.worker.lockRenewMs,
    stalledInterval: config.worker.stalledIntervalMs,
    maxStalledCount: config.worker.maxStalledCount,
  };
  return { connection, workerOpts };
}
