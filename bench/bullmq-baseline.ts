/**
 * BullMQ's own add → process, the dispatch ceiling of the benchmark (issue 8 §5): a BullMQ
 * Worker in its own process, made like the service's worker (`createRedis(config.redis, 'worker')`,
 * the same prefix scheme and concurrency), whose processor only reports when it was called.
 * A child process of bench/run.ts: sends `{ ready: true }` over IPC once the worker is
 * connected, then `{ i, at }` for each job (`at`: unix ms, sub-ms resolution) when its processor
 * is called, and `{ done: i }` once BullMQ moved it to completed (the lifecycle ceiling,
 * bench/lifecycle-ceiling.ts).
 *
 * Environment: REDIS_URL, BASELINE_PREFIX (BullMQ prefix), BASELINE_CONCURRENCY (default 50).
 */
import { Worker } from 'bullmq';
import { createRedis } from '@mcp-tasks/jobs';
import { wallMs } from './stats.js';

const connection = createRedis({ mode: 'single', url: process.env.REDIS_URL!, tls: false }, 'worker', 'bench-baseline');
await connection.connect();
const worker = new Worker(
  'baseline',
  async (job) => {
    process.send!({ i: (job.data as { i: number }).i, at: wallMs() });
  },
  { connection, prefix: process.env.BASELINE_PREFIX!, concurrency: Number(process.env.BASELINE_CONCURRENCY ?? 50) },
);
worker.on('completed', (job) => process.send!({ done: (job.data as { i: number }).i }));
await worker.waitUntilReady();
process.send!({ ready: true });
process.on('disconnect', () => {
  void worker.close().finally(() => process.exit(0));
});
