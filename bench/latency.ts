/**
 * Latency figures of the worker side (issue 8 §5), each from the client's point of view:
 *  - dispatch: task handle received → the tool's code running on the worker, against BullMQ's
 *    own add → processor called (bench/bullmq-baseline.ts), alternating in rounds;
 *  - cancel-to-terminal: `tasks/cancel` sent → the task's status is `cancelled` (the Lua
 *    transition's PUBLISH), for a running job created on another gateway than the one that
 *    cancels, the job on the worker process;
 *  - progress relay: the tool's `ctx.progress` on the worker → the client reads the
 *    `notifications/progress` event off the gateway's SSE response (synchronous calls);
 *  - result after the completion: the task's `completed` announcement → the result frame of a
 *    synchronous call whose last progress came right before it.
 * Clocks: `side_effect` and the baseline worker stamp `performance.timeOrigin +
 * performance.now()` (sub-ms, the same clock as `wallMs` here); `progress_sync` stamps
 * `Date.now()` (whole ms; the target is 50 ms).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { createRedis, fairPriority, jobRetention } from '@mcp-tasks/jobs';
import { sleep, waitFor } from '../test/support/cluster.js';
import { callTool, cancelTask, getTask } from '../test/support/mcp.js';
import { sseCall } from '../test/support/sse.js';
import { PREFIX, type BenchProcesses } from './processes.js';
import { percentiles, wallMs, type Percentiles } from './stats.js';

let markers = 0;

/** Calls `side_effect(marker, delaySeconds)` as a task on `url`; returns the handle's arrival time and the task id. */
async function startSideEffect(
  b: BenchProcesses,
  url: string,
  delaySeconds: number,
): Promise<{ marker: string; taskId: string; handleAt: number }> {
  const marker = `m${++markers}`;
  const r = await callTool(url, 'side_effect', { marker, delaySeconds }, { token: b.apiKey });
  const handleAt = wallMs();
  if (r.body.result?.resultType !== 'task')
    throw new Error(`side_effect: no task handle: ${JSON.stringify(r.body).slice(0, 300)}`);
  return { marker, taskId: r.body.result.taskId as string, handleAt };
}

/** Waits for `<dir>/<name>` and returns its content as a number (a unix ms stamp). */
async function stampOf(b: BenchProcesses, name: string): Promise<number> {
  const file = join(b.sideEffectDir, name);
  await waitFor(() => existsSync(file), 10_000, 1, name);
  return Number(readFileSync(file, 'utf8'));
}

export interface DispatchFigure {
  ours: Percentiles;
  /** BullMQ: from calling `add()` to the processor running (the ratio's reference). */
  bullmq: Percentiles;
  /** BullMQ: from `add()` resolving to the processor running. */
  bullmqFromResolved: Percentiles;
}

/** Dispatch, `rounds` rounds of `perRound` sequential jobs each side, alternating. */
export async function dispatch(b: BenchProcesses, rounds: number, perRound: number): Promise<DispatchFigure> {
  const connection = createRedis({ mode: 'single', url: b.redis.url, tls: false }, 'request', 'bench-baseline-add');
  await connection.connect();
  const queue = new Queue('baseline', { connection, prefix: b.baselinePrefix, streams: { events: { maxLen: 1000 } } });
  const retention = jobRetention(86_400_000);
  const waiting = new Map<number, (at: number) => void>();
  b.onBaseline = (m) => waiting.get(m.i)?.(m.at);
  let i = 0;
  const baselineOnce = async () => {
    const n = ++i;
    const started = new Promise<number>((resolve) => waiting.set(n, resolve));
    const t0 = wallMs();
    await queue.add('step', { i: n }, { jobId: `b.${n}`, attempts: 1, priority: fairPriority(1), ...retention });
    const t1 = wallMs();
    const at = await Promise.race([
      started,
      sleep(10_000).then(() => Promise.reject(new Error('baseline job never ran'))),
    ]);
    waiting.delete(n);
    return { fromCall: at - t0, fromResolved: at - t1 };
  };
  const oursOnce = async () => {
    const s = await startSideEffect(b, b.hot.url!, 0);
    const at = await stampOf(b, `${s.marker}.started`);
    await stampOf(b, s.marker); // done: the next sample starts on an idle worker
    return at - s.handleAt;
  };
  const ours: number[] = [];
  const call: number[] = [];
  const resolved: number[] = [];
  try {
    for (let k = 0; k < 5; k++) {
      await oursOnce();
      await baselineOnce();
    }
    for (let r = 0; r < rounds; r++) {
      const sides = [
        async () => {
          for (let k = 0; k < perRound; k++) {
            ours.push(await oursOnce());
            await sleep(2);
          }
        },
        async () => {
          for (let k = 0; k < perRound; k++) {
            const x = await baselineOnce();
            call.push(x.fromCall);
            resolved.push(x.fromResolved);
            await sleep(2);
          }
        },
      ];
      for (const side of r % 2 ? sides.reverse() : sides) await side();
    }
  } finally {
    await queue.close();
    connection.disconnect();
  }
  return { ours: percentiles(ours), bullmq: percentiles(call), bullmqFromResolved: percentiles(resolved) };
}

export interface CancelFigure {
  toTerminal: Percentiles;
  /** `tasks/cancel` sent → its answer received. */
  ack: Percentiles;
}

/** Cancel-to-terminal for `n` running `side_effect` tasks: created on the `sdk` gateway, cancelled on the `hot` one. */
export async function cancelToTerminal(b: BenchProcesses, n: number): Promise<CancelFigure> {
  const sub = new Redis(b.redis.url, { connectionName: 'bench-own' });
  const waiting = new Map<string, (at: number) => void>();
  sub.on('pmessage', (_p: string, channel: string, msg: string) => {
    if (msg === 'cancelled') waiting.get(channel)?.(wallMs());
  });
  await sub.psubscribe(`${PREFIX}:task:*`);
  const toTerminal: number[] = [];
  const ack: number[] = [];
  try {
    for (let k = 0; k < n; k++) {
      const s = await startSideEffect(b, b.sdk.url!, 30);
      await stampOf(b, `${s.marker}.started`);
      const channel = `${PREFIX}:task:${s.taskId}`;
      const terminal = new Promise<number>((resolve) => waiting.set(channel, resolve));
      const t0 = wallMs();
      const c = await cancelTask(b.hot.url!, s.taskId, { token: b.apiKey });
      ack.push(wallMs() - t0);
      if (c.body.error) throw new Error(`tasks/cancel failed: ${JSON.stringify(c.body.error)}`);
      const at = await Promise.race([
        terminal,
        sleep(10_000).then(() => Promise.reject(new Error(`task ${s.taskId} never reached cancelled`))),
      ]);
      waiting.delete(channel);
      toTerminal.push(at - t0);
      const g = await getTask(b.hot.url!, s.taskId, { token: b.apiKey });
      if (g.body.result?.status !== 'cancelled')
        throw new Error(`not cancelled: ${JSON.stringify(g.body).slice(0, 300)}`);
    }
  } finally {
    sub.disconnect();
  }
  return { toTerminal: percentiles(toTerminal), ack: percentiles(ack) };
}

/**
 * Progress relay: `calls` concurrent synchronous `progress_sync(steps, intervalSeconds)` calls
 * (interval above PROGRESS_MIN_INTERVAL_MS, so no event is held back by the rate cap).
 */
export async function progressRelay(
  b: BenchProcesses,
  calls: number,
  steps: number,
  intervalSeconds: number,
): Promise<Percentiles> {
  const ks = Array.from({ length: calls }, (_, i) =>
    sseCall(
      b.hot.url!,
      'tools/call',
      { name: 'progress_sync', arguments: { steps, intervalSeconds, stamp: true } },
      { tasks: false, token: b.apiKey, meta: { progressToken: `bench-${i}` } },
    ),
  );
  await Promise.all(ks.map((k) => k.done));
  const lat: number[] = [];
  for (const k of ks) {
    if (!k.final()?.result) throw new Error(`progress_sync failed: ${k.raw().slice(0, 300)}`);
    for (const p of k.progress()) {
      const m = /@(\d+)$/.exec(String(p.message));
      if (m) lat.push(p.at - Number(m[1]));
    }
  }
  if (lat.length < calls * steps * 0.9)
    throw new Error(`progress relay: only ${lat.length} of ${calls * steps} events arrived`);
  return percentiles(lat);
}

/**
 * Result after the completion: `calls` sequential synchronous `progress_sync` calls whose last
 * progress is published right before the completion (half 1 step at once, half 2 steps 200 ms
 * apart), from the completion's announcement on the task's channel (as this process receives
 * it) to the result frame on the SSE response (ms). The gateway, woken by that last progress,
 * must see the completion at once: a lost status message would show here as up to 1 s, the
 * synchronous call's backstop re-read (case B-12e).
 */
export async function resultAfterCompletion(b: BenchProcesses, calls: number): Promise<Percentiles> {
  const sub = new Redis(b.redis.url, { connectionName: 'bench-own' });
  let announcedAt: number | undefined;
  sub.on('pmessage', (_p: string, _channel: string, msg: string) => {
    if (msg === 'completed') announcedAt ??= Date.now(); // the SSE frames' clock
  });
  await sub.psubscribe(`${PREFIX}:task:*`);
  const delays: number[] = [];
  try {
    for (let i = 0; i < calls; i++) {
      announcedAt = undefined;
      const [steps, intervalSeconds] = i % 2 ? [2, 0.2] : [1, 0];
      const k = sseCall(
        b.hot.url!,
        'tools/call',
        { name: 'progress_sync', arguments: { steps, intervalSeconds } },
        { tasks: false, token: b.apiKey, meta: { progressToken: `bench-done-${i}` } },
      );
      await k.done;
      if (!k.final()?.result || k.progress().length !== steps)
        throw new Error(`progress_sync: no result or not every progress: ${k.raw().slice(0, 300)}`);
      const at = await waitFor(() => announcedAt, 10_000, 1, 'the completion announced');
      delays.push(k.frames.at(-1)!.at - at);
    }
  } finally {
    sub.disconnect();
  }
  return percentiles(delays);
}
