/**
 * `npm run bench`: latency figures of the task service, measured on real processes
 * (1 gateway + 1 worker by default; BENCH_GATEWAYS / BENCH_WORKERS to change) against the
 * Redis at TEST_REDIS_URL (default redis://127.0.0.1:6379, own key prefix).
 *
 *  1. tools/call → CreateTaskResult (handle), 100 sequential calls (issue 2 target: p99 ≤ 2 s, case B-09a)
 *  2. tasks/cancel → task `cancelled` for a running countdown, 30 tasks, measured from just
 *     before the cancel request is sent to the Lua transition's PUBLISH of `cancelled`
 *  3. tasks/get latency, 1000 sequential polls
 *  4. progress latency of a synchronous call: from the tool's `ctx.progress` (on the worker
 *     process) to the client reading the `notifications/progress` event off the gateway's SSE
 *     response; 1,000 events (10 concurrent `progress_sync(100 steps, 250 ms)` calls)
 *  5. client disconnect → the tool's AbortSignal fires on the worker (C-01), 30 calls of
 *     `side_effect` closed 300 ms after the tool started
 * Prints one JSON line per figure (ms). Both processes run on this machine, so their clocks
 * (Date.now) are the same clock.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { startCluster, sleep, waitFor } from '../test/support/cluster.js';
import { callTool, cancelTask, getTask, roundRobin } from '../test/support/mcp.js';
import { sseCall } from '../test/support/sse.js';

const stats = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p: number) => s[Math.min(s.length - 1, Math.floor(p * s.length))]!;
  const r = (v: number) => Math.round(v * 100) / 100;
  return { n: s.length, min: r(s[0]!), median: r(q(0.5)), p90: r(q(0.9)), p99: r(q(0.99)), max: r(s[s.length - 1]!) };
};

const sideEffectDir = mkdtempSync(join(tmpdir(), 'mcp-bench-'));
const c = await startCluster({
  gateways: Number(process.env.BENCH_GATEWAYS ?? 1),
  workers: Number(process.env.BENCH_WORKERS ?? 1),
  env: { TASK_POLL_INTERVAL_MS: '2000', TESTING_SIDE_EFFECT_DIR: sideEffectDir },
});
try {
  const next = roundRobin(c.urls);
  // warm-up
  for (let i = 0; i < 10; i++) await callTool(next(), 'add', { a: 1, b: i }, { tasks: false });

  const handle: number[] = [];
  const ids: string[] = [];
  for (let i = 0; i < 100; i++) {
    const t0 = performance.now();
    const r = await callTool(next(), 'countdown', { seconds: 1 });
    handle.push(performance.now() - t0);
    if (r.body.result?.resultType !== 'task') throw new Error(`no handle: ${JSON.stringify(r.body)}`);
    ids.push(r.body.result.taskId);
  }
  console.log(JSON.stringify({ figure: 'tools/call → CreateTaskResult (ms)', ...stats(handle) }));

  const get: number[] = [];
  for (let i = 0; i < 1000; i++) {
    const t0 = performance.now();
    await getTask(next(), ids[i % ids.length]!);
    get.push(performance.now() - t0);
  }
  console.log(JSON.stringify({ figure: 'tasks/get (ms)', ...stats(get) }));

  const sub = new Redis(c.redisUrl);
  const cancel: number[] = [];
  for (let i = 0; i < 30; i++) {
    const r = await callTool(next(), 'countdown', { seconds: 10 });
    const taskId = r.body.result!.taskId as string;
    // Wait until a worker runs it (first progress), so the cancel hits a running job.
    for (let k = 0; k < 200; k++) {
      const g = await getTask(next(), taskId);
      if (g.body.result?.statusMessage?.startsWith('1/')) break;
      await sleep(20);
    }
    const channel = `${c.prefix}:task:${taskId}`;
    await sub.subscribe(channel);
    const cancelled = new Promise<number>((resolve) => {
      const on = (ch: string, msg: string) => {
        if (ch === channel && msg === 'cancelled') {
          sub.off('message', on);
          resolve(performance.now());
        }
      };
      sub.on('message', on);
    });
    const t0 = performance.now();
    await cancelTask(next(), taskId);
    cancel.push((await cancelled) - t0);
    await sub.unsubscribe(channel);
    const g = await getTask(next(), taskId);
    if (g.body.result?.status !== 'cancelled') throw new Error(`not cancelled: ${JSON.stringify(g.body)}`);
  }
  sub.disconnect();
  console.log(JSON.stringify({ figure: 'tasks/cancel → cancelled, running task (ms)', ...stats(cancel) }));

  // 4. Progress latency, worker ctx.progress → client (the message carries the emission time).
  const progressLatency: number[] = [];
  const calls = Array.from({ length: 10 }, (_, i) =>
    sseCall(next(), 'tools/call', { name: 'progress_sync', arguments: { steps: 100, intervalSeconds: 0.25, stamp: true } }, { tasks: false, meta: { progressToken: `bench-${i}` } }),
  );
  await Promise.all(calls.map((k) => k.done));
  for (const k of calls) {
    if (!k.final()?.result) throw new Error(`progress_sync failed: ${k.raw().slice(0, 300)}`);
    for (const p of k.progress()) {
      const m = /@(\d+)$/.exec(String(p.message));
      if (m) progressLatency.push(p.at - Number(m[1]));
    }
  }
  if (progressLatency.length !== 1000) throw new Error(`expected 1000 progress events, got ${progressLatency.length}`);
  console.log(JSON.stringify({ figure: 'progress: ctx.progress on the worker → event read by the client (ms)', ...stats(progressLatency) }));

  // 5. Disconnect → AbortSignal on the worker.
  const abortLatency: number[] = [];
  for (let i = 0; i < 30; i++) {
    const marker = `bench-${i}`;
    const k = sseCall(next(), 'tools/call', { name: 'side_effect', arguments: { marker, delaySeconds: 30 } }, { tasks: false });
    await waitFor(() => existsSync(join(sideEffectDir, `${marker}.started`)), 10_000, 5, 'tool start');
    await sleep(300);
    const closedAt = Date.now();
    k.close();
    const abortedAt = await waitFor(() => existsSync(join(sideEffectDir, `${marker}.aborted`)) && Number(readFileSync(join(sideEffectDir, `${marker}.aborted`), 'utf8')), 10_000, 5, 'abort');
    abortLatency.push(abortedAt - closedAt);
  }
  console.log(JSON.stringify({ figure: 'client closes the stream → AbortSignal fires on the worker (ms)', ...stats(abortLatency) }));
} finally {
  await c.stop();
  rmSync(sideEffectDir, { recursive: true, force: true });
}
