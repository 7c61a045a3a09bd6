// @needs redis redis-server
/**
 * Case B-16 (shared/cases/cases.md): status driven by lossy queue events. The task record is
 * the truth (D3, D5): every task must reach a terminal state through `tasks/get` whatever
 * happens to gateways, pub/sub connections or BullMQ jobs.
 *
 * Expected (the assertions):
 *  (a, b, d) every task shows a terminal state via tasks/get, 0 stuck `working`;
 *  (c) a task whose job was removed becomes `failed` ("job lost") within the documented
 *      reconcile interval (RECONCILE_AFTER_MS + RECONCILE_INTERVAL_MS), not `working` until TTL;
 *  gateway memory stays flat: no per-task in-memory waiters (no per-task subscription left).
 */
import { after, afterEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { sleep, startCluster, startRedis, type Cluster, type Proc, type ThrowawayRedis } from '../support/cluster.js';
import { callTool, getTask, isTerminal, pollTask, type RpcResponse } from '../support/mcp.js';

const RECONCILE_AFTER_MS = 3000; // testEnv
const RECONCILE_INTERVAL_MS = 1000; // testEnv

/** Resident set size of a process, in MB (Linux /proc). */
function rssMb(p: Proc): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${p.proc.pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
}

/** Runs `fn` over `items` with at most `limit` in flight. */
async function mapLimit<T, R>(items: T[], limit: number, fn: (t: T, i: number) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await fn(items[i]!, i);
      }
    }),
  );
  return out;
}

/**
 * Polls every task through tasks/get (on the live gateways) until all are terminal or the
 * deadline passes. Returns the last status seen per task.
 */
async function finalStatuses(
  ids: string[],
  live: () => string,
  deadlineMs: number,
): Promise<Map<string, Record<string, any>>> {
  const last = new Map<string, Record<string, any>>();
  const end = Date.now() + deadlineMs;
  let pending = ids;
  while (pending.length) {
    await mapLimit(pending, 32, async (id) => {
      const r = await getTask(live(), id);
      last.set(id, r.body.result ?? { status: `error ${JSON.stringify(r.body.error ?? r.status)}` });
    });
    pending = pending.filter((id) => !isTerminal(last.get(id)!.status));
    if (!pending.length || Date.now() > end) break;
    await sleep(250);
  }
  return last;
}

/** Channels `<prefix>:task:*` with a subscriber: what gateways hold per task in memory. */
async function perTaskSubscriptions(redis: Redis, prefix: string): Promise<string[]> {
  return (await redis.pubsub('CHANNELS', `${prefix}:task:*`)) as string[];
}

/** Every task record under the cluster's prefix that is still `working` (orphans included). */
async function workingRecords(c: Cluster): Promise<string[]> {
  const keys = (await c.keys()).filter((k) => k.endsWith('}:task'));
  const out: string[] = [];
  for (let i = 0; i < keys.length; i += 500) {
    const batch = keys.slice(i, i + 500);
    const pipe = c.redis.pipeline();
    for (const k of batch) pipe.hget(k, 'status');
    const res = (await pipe.exec()) ?? [];
    res.forEach(([, st], j) => st === 'working' && out.push(batch[j]!));
  }
  return out;
}

describe('Case B-16: status driven by lossy queue events', () => {
  let c: Cluster | undefined;
  let throwaway: ThrowawayRedis | undefined;
  afterEach(async () => {
    await c?.stop();
    c = undefined;
    await throwaway?.stop();
    throwaway = undefined;
  });
  after(async () => {
    await c?.stop();
    await throwaway?.stop();
  });

  it('Case B-16a + B-16b: 2,000 tasks of 10 ms at ~200/s while every gateway replica is restarted → all terminal via tasks/get, 0 stuck working (T-13, T-21)', async () => {
    c = await startCluster({ gateways: 2, workers: 2 });
    const cluster = c;
    const live = [...c.urls];
    let rr = 0;
    const pick = () => live[rr++ % live.length]!;
    const original = [...c.gateways];

    const N = 2000;
    const RATE = 200;
    const ids: string[] = [];
    const textOf = new Map<string, string>();
    const createFailures: string[] = [];
    const create = async (i: number) => {
      let r: RpcResponse;
      try {
        r = await callTool(pick(), 'slow_echo', { seconds: 0.01, text: `n${i}` });
      } catch (e) {
        createFailures.push(`#${i}: ${(e as Error).message} ${(e as Error & { cause?: Error }).cause?.message ?? ''}`);
        return;
      }
      if (r.body.result?.resultType === 'task') {
        ids.push(r.body.result.taskId);
        textOf.set(r.body.result.taskId, `echo: n${i}`);
      } else createFailures.push(`#${i}: HTTP ${r.status} ${JSON.stringify(r.body).slice(0, 200)}`);
    };

    // (b) Replace every gateway during the run, the way the documented rollout does it
    // (k8s/README.md "Shutdown and rollouts"): start the new replica, take the old one out of
    // the balancer, let the preStop pause pass (requests already sent to it are answered),
    // then SIGTERM it (it drains what is still open).
    const PRESTOP_MS = 2000;
    const t0 = Date.now();
    const restartAt = async (at: number, old: Proc) => {
      await sleep(Math.max(0, t0 + at - Date.now()));
      const fresh = await cluster.addGateway();
      live.push(fresh.url!);
      live.splice(live.indexOf(old.url!), 1);
      await sleep(PRESTOP_MS);
      const code = await old.stop('SIGTERM');
      assert.equal(code, 0, 'old gateway drained and exited cleanly');
    };
    const restarts = Promise.all([restartAt(2000, original[0]!), restartAt(5000, original[1]!)]).then(
      () => undefined,
      (e: unknown) => e,
    );

    // (a) 2,000 tools/call at ~200/s, open loop (not waiting for answers).
    const inflight: Promise<void>[] = [];
    for (let i = 0; i < N; i++) {
      const wait = t0 + (i * 1000) / RATE - Date.now();
      if (wait > 0) await sleep(wait);
      inflight.push(create(i));
    }
    const sentMs = Date.now() - t0;
    await Promise.all(inflight);
    const sendSeconds = (Date.now() - t0) / 1000;
    const restartError = await restarts;
    if (restartError) throw restartError;
    console.log(
      `case B-16a: ${N} calls sent in ${(sentMs / 1000).toFixed(1)} s, all answered after ${sendSeconds.toFixed(1)} s`,
    );
    // What makes this the case: both restarts (at 2 s and 5 s) happened while calls were still
    // being sent. How fast a loaded machine answers them is not the point (it only shifts the end).
    assert.ok(
      sentMs > 5000 + PRESTOP_MS,
      `calls were still being sent when the second replica stopped (sending took ${sentMs} ms)`,
    );
    assert.ok(
      original.every((g) => g.proc.exitCode !== null),
      'every original gateway replica was restarted',
    );

    assert.deepEqual(
      createFailures.slice(0, 10),
      [],
      `${createFailures.length} tools/call failed during the gateway restarts`,
    );
    assert.equal(ids.length, N);
    assert.equal(new Set(ids).size, N);

    const final = await finalStatuses(ids, pick, 30_000);
    const byStatus: Record<string, number> = {};
    for (const t of final.values()) byStatus[t.status] = (byStatus[t.status] ?? 0) + 1;
    assert.equal(byStatus.working ?? 0, 0, `stuck working: ${JSON.stringify(byStatus)}`);
    const notCompleted = [...final].filter(([, t]) => t.status !== 'completed');
    assert.deepEqual(
      byStatus,
      { completed: N },
      `every task terminal (completed) via tasks/get; not: ${JSON.stringify(notCompleted.slice(0, 3)).slice(0, 1500)}`,
    );
    // Each result belongs to its own task.
    const mismatched = ids.filter((id) => final.get(id)!.result?.content?.[0]?.text !== textOf.get(id));
    assert.deepEqual(mismatched.slice(0, 5), [], `${mismatched.length} tasks carry another task's result`);
    // Nothing is stuck working in Redis either, including tasks no client holds a handle to.
    assert.deepEqual(await workingRecords(c), [], 'no task record left working');
    // No gateway holds anything per task (task-mode calls never wait on pub/sub).
    assert.deepEqual(await perTaskSubscriptions(c.redis, c.prefix), []);
  });

  it('Case B-16c: a waiting task whose BullMQ job is removed becomes failed ("job lost") within RECONCILE_AFTER_MS + RECONCILE_INTERVAL_MS (T-14, T-21)', async () => {
    c = await startCluster({ gateways: 1, workers: 1 });
    const url = c.urls[0]!;
    // No worker: the step job stays queued (`prioritized`: every step job has a priority).
    await c.workers[0]!.stop('SIGTERM');
    const r = await callTool(url, 'slow_echo', { seconds: 1, text: 'orphan' });
    assert.equal(r.body.result?.resultType, 'task', JSON.stringify(r.body));
    const taskId = r.body.result!.taskId as string;
    // A control task whose job is left alone: it must complete, not be failed by the reconciler.
    const ctl = await callTool(url, 'slow_echo', { seconds: 0.1, text: 'control' });
    const controlId = ctl.body.result!.taskId as string;

    const connection = new Redis(c.redisUrl, { maxRetriesPerRequest: null });
    const queue = new Queue('tools', { connection, prefix: `${c.prefix}:{jobs}` });
    try {
      const jobId = `t.${taskId}.1`;
      assert.equal(
        await queue.getJobState(jobId),
        'prioritized',
        'queued (every step job carries its fair-share priority)',
      );
      await queue.remove(jobId);
      assert.equal(await queue.getJobState(jobId), 'unknown', 'the job is gone');
      const removedAt = Date.now();
      assert.equal((await getTask(url, taskId)).body.result!.status, 'working');

      const W = await c.addWorker();
      const readyAt = Date.parse(String(W.logs.find((l) => l.msg === 'worker.ready')!.time));
      const end = await pollTask(
        () => url,
        taskId,
        (t) => t.status !== 'working',
        RECONCILE_AFTER_MS + RECONCILE_INTERVAL_MS + 10_000,
        100,
      );
      const failedAt = Date.parse(end.lastUpdatedAt);
      assert.equal(end.status, 'failed', JSON.stringify(end));
      assert.match(end.statusMessage ?? '', /lost/i, 'statusMessage says the job was lost');
      assert.equal(end.error?.data?.reason, 'job_lost', JSON.stringify(end.error));
      assert.equal(typeof end.error?.code, 'number');
      const bound = RECONCILE_AFTER_MS + RECONCILE_INTERVAL_MS + 3000;
      // The reconciler runs on workers: measured from the later of the removal and the first worker.
      const since = Math.max(removedAt, readyAt);
      assert.ok(failedAt - since <= bound, `failed ${failedAt - since} ms after the job was lost (bound ${bound} ms)`);
      assert.equal(
        W.logs.filter((l) => l.msg === 'step.started' && l.taskId === taskId).length,
        0,
        'the lost step never ran',
      );

      const control = await pollTask(
        () => url,
        controlId,
        (t) => isTerminal(t.status),
        10_000,
        100,
      );
      assert.equal(control.status, 'completed', JSON.stringify(control));
      // Terminal is absorbing: the failed task stays failed.
      await sleep(RECONCILE_INTERVAL_MS * 2);
      assert.equal((await getTask(url, taskId)).body.result!.status, 'failed');
    } finally {
      await queue.close().catch(() => undefined);
      connection.disconnect();
    }
  });

  it("Case B-16d: the gateways' event-subscription connections are cut again and again for 8 s or more → every task and every held synchronous call still ends; no per-task waiters remain (T-21, D5)", async () => {
    // A throwaway Redis, so killing pub/sub clients touches nobody else.
    throwaway = await startRedis();
    c = await startCluster({ gateways: 2, workers: 2, redisUrl: throwaway.url });
    const urls = c.urls;
    let rr = 0;
    const pick = () => urls[rr++ % urls.length]!;
    const admin = new Redis(throwaway.url, { maxRetriesPerRequest: 1, connectionName: 'b16-admin' });
    admin.on('error', () => undefined);
    let kills = 0;
    try {
      // Warm up, then the memory baseline.
      await Promise.all(
        Array.from({ length: 40 }, (_, i) =>
          callTool(pick(), 'slow_echo', { seconds: 0.05, text: `warm${i}` }, { tasks: false }),
        ),
      );
      const rssBefore = c.gateways.map(rssMb);

      // The cutter: every 150 ms, kill each gateway subscriber connection (`mcp-gateway-sub`).
      let cutting = true;
      const cutter = (async () => {
        await admin.call('CLIENT', 'KILL', 'TYPE', 'pubsub'); // the blunt version first, once
        kills++;
        while (cutting) {
          const list = (await admin.call('CLIENT', 'LIST')) as string;
          for (const line of list.split('\n')) {
            if (!/\bname=mcp-gateway-sub\b/.test(line)) continue;
            const id = /\bid=(\d+)/.exec(line)![1]!;
            await admin.call('CLIENT', 'KILL', 'ID', id).then(
              () => kills++,
              () => undefined,
            );
          }
          await sleep(150);
        }
      })();
      // At least 8 s of cuts, and at least 50 tasks created while they go on (a loaded machine
      // creates fewer per second: the cuts then last longer, not the test's load less).
      const CUT_MS = 8000;
      const MIN_TASKS = 50;
      let loadSent!: () => void;
      const loadDone = new Promise<void>((resolve) => (loadSent = resolve));
      const stopCutting = Promise.all([sleep(CUT_MS), loadDone.then(() => sleep(2000))]).then(async () => {
        cutting = false;
        await cutter;
      });

      // Load during the cut: task-mode calls (polled) and synchronous calls (held by a gateway
      // waiting on the task's pub/sub channel, with the record re-read as the backstop, D5).
      const taskIds: string[] = [];
      const syncCalls: Promise<{ i: number; ms: number; r: RpcResponse }>[] = [];
      const t0 = Date.now();
      try {
        for (let i = 0; Date.now() - t0 < CUT_MS - 2000 || taskIds.length < MIN_TASKS; i++) {
          const tr = await callTool(pick(), 'slow_echo', { seconds: 0.3, text: `task${i}` });
          assert.equal(tr.body.result?.resultType, 'task', JSON.stringify(tr.body));
          taskIds.push(tr.body.result!.taskId);
          if (i % 2 === 0) {
            const s = Date.now();
            // Bounded, so a hung waiter fails the test instead of stalling it.
            syncCalls.push(
              callTool(
                pick(),
                'slow_echo',
                { seconds: 1, text: `sync${i}` },
                { tasks: false, signal: AbortSignal.timeout(15_000) },
              ).then(
                (r) => ({ i, ms: Date.now() - s, r }),
                (e: Error) => ({
                  i,
                  ms: Date.now() - s,
                  r: {
                    status: 0,
                    body: { error: { code: 0, message: `no answer: ${e.message}` } },
                  } as unknown as RpcResponse,
                }),
              ),
            );
          }
          await sleep(40);
        }
      } finally {
        loadSent();
      }
      const syncResults = await Promise.all(syncCalls);
      await stopCutting;
      assert.ok(kills >= 20, `the subscriber connections were really cut (${kills} kills)`);

      for (const { i, ms, r } of syncResults) {
        assert.equal(r.body.error, undefined, `sync call ${i}: ${JSON.stringify(r.body)}`);
        assert.equal(r.body.result?.content?.[0]?.text, `echo: sync${i}`, `sync call ${i}: ${JSON.stringify(r.body)}`);
        assert.ok(
          ms < 1000 + 4000,
          `sync call ${i} answered ${ms} ms after it was sent (no waiter hangs on a lost message)`,
        );
      }
      const final = await finalStatuses(taskIds, pick, 20_000);
      const notDone = [...final.values()].filter((t) => t.status !== 'completed');
      assert.deepEqual(
        notDone.map((t) => `${t.taskId}: ${t.status}`),
        [],
        'every task terminal (completed), 0 stuck working',
      );

      // Memory stays flat: no per-task subscription (waiter) is left on any gateway once the
      // calls have ended, and the resident size did not grow with the number of tasks.
      await sleep(1000);
      assert.deepEqual(await perTaskSubscriptions(admin, c.prefix), [], 'no per-task waiters remain');
      const rssAfter = c.gateways.map(rssMb);
      rssAfter.forEach((mb, g) =>
        assert.ok(mb - rssBefore[g]! < 60, `gateway ${g} RSS ${rssBefore[g]!.toFixed(0)} → ${mb.toFixed(0)} MB`),
      );
    } finally {
      admin.disconnect();
    }
  });
});
