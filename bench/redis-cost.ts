/**
 * What a task costs Redis (issue 8 §5), on the benchmark's own throwaway Redis:
 *  - bytes per finished task: `INFO memory` used_memory before and after `n` tasks of
 *    `big_result(1024)` (1 KB result) ran to completion and left the reconciler's index (what a
 *    finished task leaves behind until its TTL), divided by `n`. BullMQ's share is in it: before
 *    the measured batch a warm-up batch of `n` tasks fills BullMQ's retention of finished jobs
 *    up to its count (KEEP_COMPLETED_JOBS, packages/jobs), as on any service that ran a while, so the measured
 *    batch pays what each further task costs: its own keys, the events stream, the churn of
 *    retained jobs. The retained jobs themselves are a fixed amount, reported apart
 *    (`retainedJobs`). Plus `MEMORY USAGE` of one finished task's own keys for the breakdown;
 *  - operations per task: `INFO commandstats` and `INFO cpu` deltas over the same batch, from
 *    the first call until the reconciler dropped the last task from its index (commands
 *    executed, those inside Lua scripts included; Redis CPU µs), less the idle background
 *    measured just before, split at the last completion (what follows is the reconciler's);
 *    its ceiling is bare BullMQ's lifecycle (lifecycle-ceiling.ts);
 *    and, with MONITOR over a few tasks, the round trips each process makes (a script call is
 *    one round trip) and the commands run inside scripts.
 */
import { Redis } from 'ioredis';
import { stepJobId } from '@mcp-tasks/task-store';
import { sleep } from '../test/support/cluster.js';
import { callTool, cancelTask, getTask } from '../test/support/mcp.js';
import { PREFIX, type BenchProcesses } from './processes.js';
import { round } from './stats.js';
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

const usedMemory = async (r: Redis) => Number(/^used_memory:(\d+)/m.exec(await r.info('memory'))![1]);

export interface RedisCost {
  tasks: number;
  resultBytes: number;
  /** used_memory delta / tasks (bytes). */
  bytesPerTask: number;
  /** bytesPerTask - resultBytes. */
  overheadBytes: number;
  /** MEMORY USAGE of one finished task's keys (bytes). */
  keys: Record<string, number>;
  /** OBJECT ENCODING of the same keys (a hash with a value over hash-max-listpack-value, 64 B, is a `hashtable`). */
  encodings: Record<string, string>;
  /**
   * Commands executed per task (inside scripts included), by command, idle background removed:
   * created, run, completed and dropped from the reconciler's index (no polls).
   */
  commandsPerTask: Record<string, number>;
  commandsPerTaskTotal: number;
  /** Redis µs per task by command (`INFO commandstats` usec; a script's include its commands'). */
  usecPerTaskByCommand: Record<string, number>;
  /** With BENCH_SLOWLOG=1: the SLOWLOG profile per task (redis-stats.ts `slowlogProfile`). */
  slowlogPerTask?: string[];
  /** Redis CPU per task (µs; `INFO cpu` deltas, idle background removed), the same window. */
  redisUsPerTask: number;
  /** The part after the last completion: the reconciler's visits (commands, µs per task). */
  reconciler: { commandsPerTask: number; redisUsPerTask: number };
  /** The part until the last completion (created, run, completed). */
  untilCompleted: { commandsPerTask: number; redisUsPerTask: number };
  /** BullMQ's finished step jobs kept by count (a fixed amount, not per task): how many, and their bytes (MEMORY USAGE of one × count). */
  retainedJobs: { count: number; bytes: number };
}

/** Runs `n` `big_result(resultBytes)` tasks, `concurrency` at a time, to completion; measures what they left in Redis. */
export async function bytesPerTask(
  b: BenchProcesses,
  n: number,
  concurrency: number,
  resultBytes = 1024,
): Promise<RedisCost> {
  const r = b.client;
  const sub = new Redis(b.redis.url, { connectionName: 'bench-own' });
  const done = new Set<string>();
  const waiters = new Map<string, () => void>();
  let onDone = () => undefined as void;
  sub.on('pmessage', (_p: string, channel: string, msg: string) => {
    if (msg === 'completed' || msg === 'failed') {
      const id = channel.slice(`${PREFIX}:task:`.length);
      done.add(id);
      waiters.get(id)?.();
      onDone();
    }
  });
  await sub.psubscribe(`${PREFIX}:task:*`);
  try {
    /**
     * Runs `n` tasks, `concurrency` in flight (each lane creates its next task once its last one
     * finished, as the ceiling's lanes do with their jobs), and waits until every one finished;
     * returns their ids.
     */
    const batch = async (): Promise<string[]> => {
      const ids: string[] = [];
      let next = 0;
      await Promise.all(
        Array.from({ length: concurrency }, async () => {
          while (next < n) {
            next++;
            const res = await callTool(b.hot.url!, 'big_result', { bytes: resultBytes }, { token: b.apiKey });
            if (res.body.result?.resultType !== 'task')
              throw new Error(`big_result: no task handle: ${JSON.stringify(res.body).slice(0, 300)}`);
            const id = res.body.result.taskId as string;
            ids.push(id);
            if (!done.has(id)) await new Promise<void>((resolve) => waiters.set(id, resolve));
            waiters.delete(id);
          }
        }),
      );
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`only ${ids.filter((id) => done.has(id)).length} of ${n} tasks finished`)),
          60_000,
        );
        onDone = () => {
          if (ids.length === n && ids.every((id) => done.has(id))) {
            clearTimeout(timer);
            resolve();
          }
        };
        onDone();
      });
      return ids;
    };
    /** Waits (at most 40 s) until the reconciler dropped `ids` from its index (RECONCILE_AFTER_MS after they were created). */
    const reconciled = async (ids: string[]) => {
      for (let k = 0; k < 80; k++) {
        const scores = (await r.call('ZMSCORE', `${PREFIX}:tasks:reconcile`, ...ids)) as (string | null)[];
        if (scores.every((x) => x === null)) return;
        await sleep(500);
      }
      throw new Error('the reconciler did not drop the finished tasks from its index within 40 s');
    };
    // Warm-up: BullMQ's retention of finished jobs filled to its count, the reconciler's index emptied.
    await reconciled(await batch());

    // Background rate (reconciler passes over an empty index, BullMQ housekeeping, health pings).
    const idle = await idleRate(r);
    const mem0 = await usedMemory(r);
    if (process.env.BENCH_SLOWLOG) await startSlowlog(r);
    const cs0 = await commandstats(r);
    const us0 = await commandUsec(r);
    const cpu0 = await redisCpuS(r);
    const t0 = Date.now();
    const ids = await batch();
    await sleep(300); // BullMQ's own completion of the last step jobs lands after the task's
    const cpu1 = await redisCpuS(r);
    const cs1 = await commandstats(r);
    const t1 = Date.now();
    await reconciled(ids);
    const cpu2 = await redisCpuS(r);
    const cs2 = await commandstats(r);
    const us2 = await commandUsec(r);
    const t2 = Date.now();
    const scripts = process.env.BENCH_SLOWLOG ? await slowlogProfile(r, n) : undefined;
    const mem1 = await usedMemory(r);
    const run = perUnit(delta(cs0, cs1), cpu1 - cpu0, (t1 - t0) / 1000, idle, n);
    const rec = perUnit(delta(cs1, cs2), cpu2 - cpu1, (t2 - t1) / 1000, idle, n);
    const all = perUnit(delta(cs0, cs2), cpu2 - cpu0, (t2 - t0) / 1000, idle, n);

    const sample = ids[0]!;
    const g = await getTask(b.hot.url!, sample, { token: b.apiKey });
    if (g.body.result?.status !== 'completed')
      throw new Error(`big_result task not completed: ${JSON.stringify(g.body).slice(0, 300)}`);
    const keys: Record<string, number> = {};
    const encodings: Record<string, string> = {};
    for (const [label, key] of [
      ['task record', `${PREFIX}:{t:${sample}}:task`],
      ['result key', `${PREFIX}:{t:${sample}}:result`],
      ['progress stream', `${PREFIX}:{t:${sample}}:progress`],
      ['step job (BullMQ)', `${PREFIX}:{jobs}:tools:${stepJobId(sample, 1)}`],
    ] as const) {
      const bytes = (await r.call('MEMORY', 'USAGE', key, 'SAMPLES', '0')) as number | null;
      if (bytes === null) continue;
      keys[label] = bytes;
      encodings[label] = String(await r.call('OBJECT', 'ENCODING', key));
    }
    const jobBytes =
      keys['step job (BullMQ)'] ??
      ((await r.call(
        'MEMORY',
        'USAGE',
        `${PREFIX}:{jobs}:tools:${stepJobId(ids[ids.length - 1]!, 1)}`,
        'SAMPLES',
        '0',
      )) as number | null) ??
      0;
    const retained = await r.zcard(`${PREFIX}:{jobs}:tools:completed`);

    const bytes = (mem1 - mem0) / n;
    return {
      tasks: n,
      resultBytes,
      bytesPerTask: Math.round(bytes),
      overheadBytes: Math.round(bytes - resultBytes),
      keys,
      encodings,
      commandsPerTask: all.byCommand,
      commandsPerTaskTotal: all.total,
      usecPerTaskByCommand: usecPerUnit(us0, us2, n),
      ...(scripts ? { slowlogPerTask: scripts } : {}),
      redisUsPerTask: all.us,
      reconciler: { commandsPerTask: rec.total, redisUsPerTask: rec.us },
      untilCompleted: { commandsPerTask: run.total, redisUsPerTask: run.us },
      retainedJobs: { count: retained, bytes: retained * jobBytes },
    };
  } finally {
    sub.disconnect();
  }
}

export interface RoundTrips {
  /**
   * Per task (created, run, completed; then dropped from the reconciler's index about
   * RECONCILE_AFTER_MS later, which this window waits for) or per poll: commands sent by each
   * process (a script call is one), and commands run inside scripts.
   */
  perTask: { gateway: number; worker: number; other: number; insideScripts: number };
  /** Per poll of a finished task (its record, then its result key). */
  perPoll: { gateway: number; insideScripts: number };
  /** Per poll of a working task (its record only). */
  perPollWorking: { gateway: number; insideScripts: number };
  /** Round trips per task by command (gateway and worker). */
  byCommand: Record<string, number>;
  /** Round trips per task by connection name (CLIENT SETNAME), `?` for unnamed ones. */
  byConnection: Record<string, number>;
}

/**
 * MONITOR over `n` sequential tasks (`big_result(1024)`, created, run and completed) and then
 * `n` polls: who sends what. Connections are told apart by CLIENT LIST names (the gateway's
 * `mcp-gateway*`; the worker's `mcp-worker*`, `mcp-bull` and the blocking connections BullMQ's
 * Workers name after their queue).
 */
export async function roundTrips(b: BenchProcesses, n: number): Promise<RoundTrips> {
  const r = b.client;
  const names = async () => {
    const m = new Map<string, string>();
    for (const line of ((await r.call('CLIENT', 'LIST')) as string).split('\n')) {
      const addr = /addr=(\S+)/.exec(line)?.[1];
      const name = /name=(\S*)/.exec(line)?.[1] ?? '';
      if (addr) m.set(addr, name);
    }
    return m;
  };
  type Line = { source: string; cmd: string };
  const record = async (fn: () => Promise<void>) => {
    const lines: Line[] = [];
    // ioredis marks the connection as monitoring one microtask after MONITOR's OK: lines that
    // arrive in the same read as that OK are taken for replies ("Command queue state error",
    // emitted as an error). They come before `fn` starts (the 50 ms below), so none is counted.
    // The listener goes on before the connection opens: `r.monitor()` rejected with the first
    // such error (its own `once('error')`) when the worker was busy enough to send one then.
    const mon = r.duplicate({ monitor: true, lazyConnect: false });
    mon.on('error', (e: Error) => {
      if (!/Command queue state error/.test(e.message)) throw e;
    });
    await new Promise((resolve) => mon.once('monitoring', resolve));
    mon.on('monitor', (_time: string, args: string[], source: string) =>
      lines.push({ source, cmd: String(args[0]).toLowerCase() }),
    );
    await sleep(50);
    try {
      await fn();
      await sleep(200);
    } finally {
      mon.disconnect();
    }
    return lines;
  };
  const sub = new Redis(b.redis.url, { connectionName: 'bench-own' });
  const waiting = new Map<string, () => void>();
  sub.on('pmessage', (_p: string, channel: string, msg: string) => {
    if (msg === 'completed') waiting.get(channel.slice(`${PREFIX}:task:`.length))?.();
  });
  await sub.psubscribe(`${PREFIX}:task:*`);
  const ids: string[] = [];
  try {
    const lifecycle = await record(async () => {
      for (let k = 0; k < n; k++) {
        const res = await callTool(b.hot.url!, 'big_result', { bytes: 1024 }, { token: b.apiKey });
        const id = res.body.result!.taskId as string;
        ids.push(id);
        await new Promise<void>((resolve) => {
          waiting.set(id, resolve);
          setTimeout(resolve, 5000);
        });
      }
      // The reconciler drops each finished task from its index once it is due (after
      // RECONCILE_AFTER_MS, default 10 s): part of what a task costs, so wait for it.
      const reconcileKey = `${PREFIX}:tasks:reconcile`;
      for (let k = 0; k < 60; k++) {
        const scores = (await r.call('ZMSCORE', reconcileKey, ...ids)) as (string | null)[];
        if (scores.every((x) => x === null)) break;
        await sleep(500);
      }
    });
    const polls = await record(async () => {
      for (const id of ids) await getTask(b.hot.url!, id, { token: b.apiKey });
    });
    // A task still working (the polls a client makes while it waits).
    // slow_echo (testing set, up to 3600 s): countdown allows at most 10 s, and a refused call
    // would leave no task, so every poll would be an error answered without Redis (0 commands).
    const long = await callTool(b.hot.url!, 'slow_echo', { seconds: 600, quiet: true }, { token: b.apiKey });
    const longId = long.body.result?.taskId as string | undefined;
    if (typeof longId !== 'string')
      throw new Error(`bench: the long task was not created: ${JSON.stringify(long.body)}`);
    const workingPolls = await record(async () => {
      for (let k = 0; k < n; k++) await getTask(b.hot.url!, longId, { token: b.apiKey });
    });
    await cancelTask(b.hot.url!, longId, { token: b.apiKey });
    const who = await names();
    const classify = (l: Line) => {
      if (l.source === 'lua') return 'insideScripts';
      const name = who.get(l.source) ?? '';
      if (name.startsWith('mcp-gateway')) return 'gateway';
      // The worker's own clients, its BullMQ connection and the blocking clients BullMQ's
      // Workers open (named after the queue: `<prefix>:{jobs}:<base64 of the queue name>`).
      if (name.startsWith('mcp-worker') || name === 'mcp-bull' || name.startsWith(`${PREFIX}:{jobs}:`)) return 'worker';
      return 'other';
    };
    const own = new Set([...who.entries()].filter(([, name]) => name === 'bench-own').map(([addr]) => addr));
    const count = (lines: Line[]) => {
      const c = { gateway: 0, worker: 0, other: 0, insideScripts: 0 };
      const byCommand: Record<string, number> = {};
      const byConnection: Record<string, number> = {};
      for (const l of lines) {
        // Ours, and the gateways' health pings (once a second whatever the load, not per task).
        if (l.cmd === 'psubscribe' || l.cmd === 'ping' || own.has(l.source)) continue;
        const k = classify(l);
        c[k as keyof typeof c]++;
        if (k === 'gateway' || k === 'worker') byCommand[`${k}: ${l.cmd}`] = (byCommand[`${k}: ${l.cmd}`] ?? 0) + 1;
        if (l.source !== 'lua') {
          const name = who.get(l.source) || '?';
          byConnection[name] = (byConnection[name] ?? 0) + 1;
        }
      }
      return { c, byCommand, byConnection };
    };
    const life = count(lifecycle);
    const poll = count(polls);
    const pollWorking = count(workingPolls);
    const per = (x: number) => round(x / n, 2);
    return {
      perTask: {
        gateway: per(life.c.gateway),
        worker: per(life.c.worker),
        other: per(life.c.other),
        insideScripts: per(life.c.insideScripts),
      },
      perPoll: { gateway: per(poll.c.gateway), insideScripts: per(poll.c.insideScripts) },
      perPollWorking: { gateway: per(pollWorking.c.gateway), insideScripts: per(pollWorking.c.insideScripts) },
      byCommand: Object.fromEntries(
        Object.entries(life.byCommand)
          .map(([k, v]) => [k, per(v)])
          .sort((a, b2) => (b2[1] as number) - (a[1] as number)),
      ),
      byConnection: Object.fromEntries(Object.entries(life.byConnection).map(([k, v]) => [k, per(v)])),
    };
  } finally {
    sub.disconnect();
  }
}
