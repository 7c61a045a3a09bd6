/**
 * `npm run bench`: latency figures of the task service, measured on real processes
 * (1 gateway + 1 worker by default; BENCH_GATEWAYS / BENCH_WORKERS to change) against the
 * Redis at TEST_REDIS_URL (default redis://127.0.0.1:6379, own key prefix).
 *
 *  1. tools/call → CreateTaskResult (handle), 100 sequential calls (issue 2 target: p99 ≤ 2 s, B-09a)
 *  2. tasks/cancel → task `cancelled` for a running countdown, 30 tasks, measured from just
 *     before the cancel request is sent to the Lua transition's PUBLISH of `cancelled`
 *  3. tasks/get latency, 1000 sequential polls
 * Prints one JSON line per figure (ms).
 */
import { Redis } from 'ioredis';
import { startCluster, sleep } from '../test/support/cluster.js';
import { callTool, cancelTask, getTask, roundRobin } from '../test/support/mcp.js';

const stats = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p: number) => s[Math.min(s.length - 1, Math.floor(p * s.length))]!;
  const r = (v: number) => Math.round(v * 100) / 100;
  return { n: s.length, min: r(s[0]!), median: r(q(0.5)), p90: r(q(0.9)), p99: r(q(0.99)), max: r(s[s.length - 1]!) };
};

const c = await startCluster({
  gateways: Number(process.env.BENCH_GATEWAYS ?? 1),
  workers: Number(process.env.BENCH_WORKERS ?? 1),
  env: { TASK_POLL_INTERVAL_MS: '2000' },
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
} finally {
  await c.stop();
}
