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
 *  - operations per task: `INFO commandstats` deltas over the same batch (commands executed,
 *    those inside Lua scripts included), less the idle background measured just before;
 *    and, with MONITOR over a few tasks, the round trips each process makes (a script call is
 *    one round trip) and the commands run inside scripts.
 */
import { Redis } from 'ioredis';
import { stepJobId } from '@mcp-tasks/task-store';
import { sleep } from '../test/support/cluster.js';
import { callTool, getTask } from '../test/support/mcp.js';
import { PREFIX, type BenchProcesses } from './processes.js';
import { round } from './stats.js';
import { cpuSeconds } from './throughput.js';

/** Calls per command from `INFO commandstats`. */
async function commandstats(r: Redis): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const m of (await r.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) out[m[1]!] = Number(m[2]);
  return out;
}

const usedMemory = async (r: Redis) => Number(/^used_memory:(\d+)/m.exec(await r.info('memory'))![1]);

/** `after - before` per command, without the benchmark's own INFO / MEMORY / MONITOR calls. */
function delta(before: Record<string, number>, after: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(after)) {
    if (/^(info|memory|monitor|client\|list|psubscribe|punsubscribe)/.test(k)) continue;
    const d = v - (before[k] ?? 0);
    if (d) out[k] = d;
  }
  return out;
}

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
  /** Commands executed per task (inside scripts included), by command, background removed. */
  commandsPerTask: Record<string, number>;
  commandsPerTaskTotal: number;
  /** redis-server CPU time over the batch per task (µs): create, run, complete, no polls. */
  redisUsPerTask?: number;
  /** BullMQ's finished step jobs kept by count (a fixed amount, not per task): how many, and their bytes (MEMORY USAGE of one × count). */
  retainedJobs: { count: number; bytes: number };
}

/** Runs `n` `big_result(resultBytes)` tasks, `concurrency` at a time, to completion; measures what they left in Redis. */
export async function bytesPerTask(b: BenchProcesses, n: number, concurrency: number, resultBytes = 1024): Promise<RedisCost> {
  const r = b.client;
  const sub = new Redis(b.redis.url, { connectionName: 'bench-own' });
  const done = new Set<string>();
  let onDone = () => undefined as void;
  sub.on('pmessage', (_p: string, channel: string, msg: string) => {
    if (msg === 'completed' || msg === 'failed') {
      done.add(channel.slice(`${PREFIX}:task:`.length));
      onDone();
    }
  });
  await sub.psubscribe(`${PREFIX}:task:*`);
  try {
    // Background rate (reconciler, BullMQ housekeeping) over one idle second.
    const idle0 = await commandstats(r);
    const idleStart = Date.now();
    await sleep(1000);
    const idle = delta(idle0, await commandstats(r));
    const idleS = (Date.now() - idleStart) / 1000;

    /** Runs `n` tasks, `concurrency` at a time, and waits until every one finished; returns their ids. */
    const batch = async (): Promise<string[]> => {
      const ids: string[] = [];
      let next = 0;
      await Promise.all(
        Array.from({ length: concurrency }, async () => {
          while (next < n) {
            next++;
            const res = await callTool(b.hot.url!, 'big_result', { bytes: resultBytes }, { token: b.apiKey });
            if (res.body.result?.resultType !== 'task') throw new Error(`big_result: no task handle: ${JSON.stringify(res.body).slice(0, 300)}`);
            ids.push(res.body.result.taskId as string);
          }
        }),
      );
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`only ${ids.filter((id) => done.has(id)).length} of ${n} tasks finished`)), 60_000);
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

    const mem0 = await usedMemory(r);
    const cs0 = await commandstats(r);
    const cpu0 = cpuSeconds(b.redis.proc.pid!);
    const t0 = Date.now();
    const ids = await batch();
    const elapsedS = (Date.now() - t0) / 1000;
    const cpu1 = cpuSeconds(b.redis.proc.pid!);
    await sleep(300);
    const cs1 = await commandstats(r);
    await reconciled(ids);
    const mem1 = await usedMemory(r);

    const sample = ids[0]!;
    const g = await getTask(b.hot.url!, sample, { token: b.apiKey });
    if (g.body.result?.status !== 'completed') throw new Error(`big_result task not completed: ${JSON.stringify(g.body).slice(0, 300)}`);
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
    const jobBytes = keys['step job (BullMQ)'] ?? ((await r.call('MEMORY', 'USAGE', `${PREFIX}:{jobs}:tools:${stepJobId(ids[ids.length - 1]!, 1)}`, 'SAMPLES', '0')) as number | null) ?? 0;
    const retained = await r.zcard(`${PREFIX}:{jobs}:tools:completed`);

    const ops = delta(cs0, cs1);
    const perTask: Record<string, number> = {};
    for (const [k, v] of Object.entries(ops)) {
      const net = v - ((idle[k] ?? 0) * elapsedS) / idleS;
      if (net / n >= 0.05) perTask[k] = round(net / n, 2);
    }
    const bytes = (mem1 - mem0) / n;
    return {
      tasks: n,
      resultBytes,
      bytesPerTask: Math.round(bytes),
      overheadBytes: Math.round(bytes - resultBytes),
      keys,
      encodings,
      commandsPerTask: Object.fromEntries(Object.entries(perTask).sort((a, b2) => b2[1] - a[1])),
      commandsPerTaskTotal: round(Object.values(perTask).reduce((a, x) => a + x, 0), 1),
      ...(cpu0 !== undefined && cpu1 !== undefined ? { redisUsPerTask: Math.round(((cpu1 - cpu0) / n) * 1e6) } : {}),
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
  perPoll: { gateway: number; insideScripts: number };
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
    const mon = await r.monitor();
    mon.on('monitor', (_time: string, args: string[], source: string) => lines.push({ source, cmd: String(args[0]).toLowerCase() }));
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
    const per = (x: number) => round(x / n, 2);
    return {
      perTask: { gateway: per(life.c.gateway), worker: per(life.c.worker), other: per(life.c.other), insideScripts: per(life.c.insideScripts) },
      perPoll: { gateway: per(poll.c.gateway), insideScripts: per(poll.c.insideScripts) },
      byCommand: Object.fromEntries(Object.entries(life.byCommand).map(([k, v]) => [k, per(v)]).sort((a, b2) => (b2[1] as number) - (a[1] as number))),
      byConnection: Object.fromEntries(Object.entries(life.byConnection).map(([k, v]) => [k, per(v)])),
    };
  } finally {
    sub.disconnect();
  }
}
