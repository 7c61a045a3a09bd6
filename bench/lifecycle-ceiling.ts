/**
 * The Redis ceiling of one task lifecycle (docs/performance.md): what bare BullMQ costs Redis
 * for add → a no-op processor → completed, with the step job's options and retention
 * (`jobRetention`, `fairPriority`, one attempt, the same `{…}` prefix scheme), on the benchmark's
 * own throwaway Redis and BullMQ worker (bench/bullmq-baseline.ts, concurrency 50), `n` jobs
 * with `concurrency` in flight, as ours are run: each of `concurrency` lanes adds its next job
 * once its last one completed.
 *
 * Measured like ours (redis-cost.ts `bytesPerTask`): a warm-up batch fills BullMQ's retention
 * of completed jobs to its count first; then over the measured batch, from the first `add` to
 * the last `completed` (the worker reports each), `INFO commandstats` deltas (commands executed,
 * those inside Lua scripts included) and `INFO cpu` `used_cpu_sys + used_cpu_user` deltas
 * (Redis CPU, µs resolution), each less the idle background of the same processes measured just
 * before (the service's gateways and worker keep running, idle).
 */
import { Queue } from 'bullmq';
import { createRedis, fairPriority, jobRetention } from '@mcp-tasks/jobs';
import { sleep } from '../test/support/cluster.js';
import type { BenchProcesses } from './processes.js';
import {
  commandUsec,
  commandstats,
  delta,
  idleRate,
  perUnit,
  redisCpuS,
  slowlogProfile,
  startSlowlog,
  usecPerUnit,
} from './redis-stats.js';

export interface LifecycleCeiling {
  jobs: number;
  /** Commands executed per job (inside scripts included), idle background removed. */
  commandsPerJob: number;
  byCommand: Record<string, number>;
  /** Redis CPU per job (µs), idle background removed. */
  redisUsPerJob: number;
  /** Redis µs per job by command (`INFO commandstats` usec; a script's include its commands'). */
  usecPerJobByCommand: Record<string, number>;
  /** With BENCH_SLOWLOG=1: the SLOWLOG profile per job (redis-stats.ts `slowlogProfile`). */
  slowlogPerJob?: string[];
}

/** Bare BullMQ add → no-op processor → completed, `n` jobs `concurrency` at a time (see the module docstring). */
export async function bullmqLifecycle(b: BenchProcesses, n: number, concurrency: number): Promise<LifecycleCeiling> {
  const r = b.client;
  const connection = createRedis({ mode: 'single', url: b.redis.url, tls: false }, 'request', 'bench-lifecycle-add');
  await connection.connect();
  const queue = new Queue('baseline', { connection, prefix: b.baselinePrefix, streams: { events: { maxLen: 200 } } });
  const retention = jobRetention(86_400_000);
  let base = 10_000_000 + Math.floor(Math.random() * 1e6) * 1000;
  const batch = async () => {
    const first = base;
    base += n;
    const done = new Set<number>();
    let finished = () => undefined as void;
    const all = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`only ${done.size} of ${n} baseline jobs completed`)), 60_000);
      finished = () => {
        if (done.size === n) {
          clearTimeout(timer);
          resolve();
        }
      };
    });
    const waiters = new Map<number, () => void>();
    b.onBaselineDone = (i) => {
      if (i >= first && i < first + n) done.add(i);
      waiters.get(i)?.();
      finished();
    };
    let next = 0;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next < n) {
          const i = first + next++;
          await queue.add(
            'step',
            { i, tool: 'big_result' },
            { jobId: `l.${i}`, attempts: 1, priority: fairPriority(1), ...retention },
          );
          // In flight, as ours are: the lane's next job once this one completed (a lane that adds
          // without waiting keeps the queue deep, and BullMQ then fetches every next job inside
          // the completion's script, a cheaper lifecycle than a task's).
          if (!done.has(i)) await new Promise<void>((resolve) => waiters.set(i, resolve));
          waiters.delete(i);
        }
      }),
    );
    await all;
  };
  try {
    await batch(); // warm-up: the retention of completed jobs filled to its count
    const idle = await idleRate(r);
    if (process.env.BENCH_SLOWLOG) await startSlowlog(r);
    const cs0 = await commandstats(r);
    const us0 = await commandUsec(r);
    const cpu0 = await redisCpuS(r);
    const t0 = Date.now();
    await batch();
    const cpu1 = await redisCpuS(r);
    const cs1 = await commandstats(r);
    const us1 = await commandUsec(r);
    const u = perUnit(delta(cs0, cs1), cpu1 - cpu0, (Date.now() - t0) / 1000, idle, n);
    const scripts = process.env.BENCH_SLOWLOG ? await slowlogProfile(r, n) : undefined;
    return {
      jobs: n,
      commandsPerJob: u.total,
      byCommand: u.byCommand,
      redisUsPerJob: u.us,
      usecPerJobByCommand: usecPerUnit(us0, us1, n),
      ...(scripts ? { slowlogPerJob: scripts } : {}),
    };
  } finally {
    b.onBaselineDone = () => undefined;
    await queue.close();
    connection.disconnect();
  }
}
