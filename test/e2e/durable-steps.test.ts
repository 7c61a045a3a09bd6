// @needs redis redis-server
/**
 * Long work that survives its worker (D14, R-01..R-04), on real gateway and worker processes
 * running `checkpoint_count` and `retry_flaky` (testing tool set). Test profile (cluster.ts
 * testEnv): SHUTDOWN_GRACE_MS 3 s; WORKER_LOST_AFTER_MS is the default 2.5 s; the SIGKILL test
 * runs with production job locks (20 s) so that only the lost-worker check can resume in 5 s.
 *  - SIGKILL of the worker running checkpoint_count {24} 6 s in: another worker resumes the
 *    step within 5 s of the kill, from its checkpoint (resumedFrom ≥ 4), done ≤ 31 s after the call;
 *  - SIGTERM of the worker running checkpoint_count {16} 5 s in: resumed elsewhere within 2 s,
 *    "Moving to another worker" meanwhile, done ≤ 20 s with resumedFrom ≥ 3;
 *  - a rolling restart of every worker during checkpoint_count {60}: done ≤ 70 s;
 *  - retry_flaky: retried after its backoff, "Retrying in 1 s: …", then completed; past its
 *    attempts, failed with the message;
 *  - a worker SIGTERMed while its Redis is down exits within SHUTDOWN_GRACE_MS + 3 s.
 * Times are taken from the processes' own log lines (the event), not from the polling.
 */
import { afterEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startCluster, startRedis, waitFor, type Cluster, type Proc, type ThrowawayRedis } from '../support/cluster.js';
import { callTool, getTask, isTerminal, pollTask, roundRobin } from '../support/mcp.js';

const logTime = (l: Record<string, unknown>) => Number(l.time) || Date.parse(String(l.time));
const startedOn = (w: Proc, taskId: string, attempt = 1) =>
  w.logs.find((l) => l.msg === 'step.started' && l.taskId === taskId && Number(l.attempt) >= attempt);

async function createTask(url: string, tool: string, args: Record<string, unknown>): Promise<string> {
  const r = await callTool(url, tool, args);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.equal(r.body.result?.resultType, 'task', JSON.stringify(r.body));
  return r.body.result!.taskId as string;
}

/** The worker that started `taskId`'s step (first run). */
const runner = (c: Cluster, taskId: string) =>
  waitFor(() => c.workers.find((w) => startedOn(w, taskId)), 30_000, 20, 'a worker to start the step');

/** Waits until the task reports at least `n` counted (its statusMessage). */
const countedAtLeast = (next: () => string, taskId: string, n: number, timeoutMs = 60_000) =>
  pollTask(
    next,
    taskId,
    (t) => isTerminal(t.status) || Number(/Counted (\d+)/.exec(t.statusMessage ?? '')?.[1] ?? -1) >= n,
    timeoutMs,
    50,
  );

describe('durable steps: checkpoints, hand-over, lost workers, retries (D14)', () => {
  let c: Cluster | undefined;
  let redisServer: ThrowawayRedis | undefined;
  afterEach(async () => {
    await c?.stop();
    await redisServer?.stop();
    c = undefined;
    redisServer = undefined;
  });

  it('R-03: SIGKILL of the worker running checkpoint_count {24} 6 s in → resumed elsewhere ≤ 5 s after the kill from its checkpoint, done ≤ 31 s', async () => {
    // Job locks as in production (20 s, stall check every 5 s): with the test profile's 4 s locks
    // BullMQ's own stall check raced the lost-worker check (both ~3-6 s after the kill) and won
    // under load, so the step resumed in time but not by the mechanism under test.
    c = await startCluster({
      gateways: 2,
      workers: 2,
      env: { WORKER_LOCK_DURATION_MS: '20000', WORKER_STALLED_INTERVAL_MS: '5000' },
    });
    const next = roundRobin(c.urls);
    const t0 = Date.now();
    const taskId = await createTask(next(), 'checkpoint_count', { seconds: 24 });
    const W1 = await runner(c, taskId);
    const W2 = c.workers.find((w) => w !== W1)!;
    await countedAtLeast(next, taskId, 5);
    const wait = t0 + 6000 - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const killedAt = Date.now();
    await W1.kill();
    const resumed = await W2.waitLog((l) => l.msg === 'step.started' && l.taskId === taskId, 20_000);
    const pickupMs = logTime(resumed) - killedAt;
    console.log(`# SIGKILL → resumed elsewhere: ${pickupMs} ms`);
    assert.ok(pickupMs <= 5000, `resumed ${pickupMs} ms after the kill (bound 5 s)`);
    const done = await pollTask(next, taskId, (t) => isTerminal(t.status), 40_000, 200);
    const elapsed = Date.now() - t0;
    assert.equal(done.status, 'completed', JSON.stringify(done));
    const sc = done.result.structuredContent;
    assert.equal(sc.counted, 24);
    assert.ok(sc.resumedFrom >= 4, `resumed from ${sc.resumedFrom}`);
    assert.equal(sc.attempt, 2);
    assert.ok(elapsed <= 31_000, `done ${elapsed} ms after the call (bound 31 s)`);
    assert.ok(W2.logs.some((l) => l.msg === 'worker_lost.step_moved' && l.taskId === taskId));
  });

  it('R-02: SIGTERM of the worker running checkpoint_count {16} 5 s in → "Moving to another worker", resumed elsewhere ≤ 2 s, done ≤ 20 s from its checkpoint', async () => {
    c = await startCluster({ gateways: 2, workers: 2 });
    const next = roundRobin(c.urls);
    const t0 = Date.now();
    const taskId = await createTask(next(), 'checkpoint_count', { seconds: 16 });
    const W1 = await runner(c, taskId);
    const W2 = c.workers.find((w) => w !== W1)!;
    await countedAtLeast(next, taskId, 4);
    const wait = t0 + 5000 - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const termAt = Date.now();
    const exited = W1.stop('SIGTERM');
    const handed = await W1.waitLog((l) => l.msg === 'step.handed_over' && l.taskId === taskId, 10_000);
    const resumed = await W2.waitLog((l) => l.msg === 'step.started' && l.taskId === taskId, 10_000);
    assert.ok(logTime(handed) - termAt < 2000, 'handed over at once, not after the grace');
    const pickupMs = logTime(resumed) - termAt;
    console.log(`# SIGTERM → resumed elsewhere: ${pickupMs} ms`);
    assert.ok(pickupMs <= 2000, `resumed ${pickupMs} ms after SIGTERM (bound 2 s)`);
    assert.equal(await exited, 0);
    const done = await pollTask(next, taskId, (t) => isTerminal(t.status), 30_000, 200);
    const elapsed = Date.now() - t0;
    assert.equal(done.status, 'completed', JSON.stringify(done));
    assert.equal(done.result.structuredContent.counted, 16);
    assert.ok(done.result.structuredContent.resumedFrom >= 3, JSON.stringify(done.result.structuredContent));
    assert.ok(elapsed <= 20_000, `done ${elapsed} ms after the call (bound 20 s)`);
  });

  it('R-02: a rolling restart of every worker during checkpoint_count {60} → done ≤ 70 s, counted 60', async () => {
    c = await startCluster({ gateways: 1, workers: 2 });
    const url = c.urls[0]!;
    const t0 = Date.now();
    const taskId = await createTask(url, 'checkpoint_count', { seconds: 60 });
    await runner(c, taskId);
    const originals = [...c.workers];
    for (const [i, old] of originals.entries()) {
      await countedAtLeast(() => url, taskId, 10 + i * 15);
      await c.addWorker();
      assert.equal(await old.stop('SIGTERM'), 0);
    }
    const done = await pollTask(
      () => url,
      taskId,
      (t) => isTerminal(t.status),
      80_000,
      250,
    );
    const elapsed = Date.now() - t0;
    assert.equal(done.status, 'completed', JSON.stringify(done));
    assert.equal(done.result.structuredContent.counted, 60);
    assert.ok(elapsed <= 70_000, `done ${elapsed} ms after the call (bound 70 s)`);
  });

  it('R-04: retry_flaky fails twice, is retried after its backoff ("Retrying in 1 s: …") with its checkpoint, then completes; past 4 runs it fails with the message', async () => {
    c = await startCluster({ gateways: 1, workers: 1 });
    const url = c.urls[0]!;
    const [W] = c.workers as [Proc];
    const taskId = await createTask(url, 'retry_flaky', { failures: 2, afterMs: 1000 });
    const retrying = await pollTask(
      () => url,
      taskId,
      (t) => /^Retrying in/.test(t.statusMessage ?? '') || isTerminal(t.status),
      20_000,
      50,
    );
    // Either 1 s wait may be the one a poll sees first (a poll can take longer than the wait on a
    // busy machine); every run and its spacing is checked from the worker's log below.
    assert.match(retrying.statusMessage ?? '', /^Retrying in 1 s: flaky failure [12] of 2$/);
    const done = await pollTask(
      () => url,
      taskId,
      (t) => isTerminal(t.status),
      30_000,
      100,
    );
    assert.equal(done.status, 'completed', JSON.stringify(done));
    assert.equal(done.result.structuredContent.runs, 3, 'the checkpoint carried the count of runs');
    const starts = W.logs.filter((l) => l.msg === 'step.started' && l.taskId === taskId).map(logTime);
    assert.equal(starts.length, 3);
    assert.ok(starts[1]! - starts[0]! >= 1000 && starts[2]! - starts[1]! >= 1000, `runs 1 s apart at least: ${starts}`);

    const failing = await createTask(url, 'retry_flaky', { failures: 10, afterMs: 100 });
    const failed = await pollTask(
      () => url,
      failing,
      (t) => isTerminal(t.status),
      30_000,
      100,
    );
    assert.equal(failed.status, 'failed', JSON.stringify(failed));
    assert.match(failed.error.message, /failed after 4 attempts: flaky failure 4 of 10/);
  });

  it('R-02: a worker SIGTERMed while its Redis is down exits within SHUTDOWN_GRACE_MS + 3 s', async () => {
    redisServer = await startRedis();
    c = await startCluster({ gateways: 0, workers: 1, redisUrl: redisServer.url });
    const [W] = c.workers as [Proc];
    await redisServer.stop();
    await W.waitLog((l) => /redis\.(bull_)?error|redis\.sub_error/.test(String(l.msg)), 10_000).catch(() => undefined);
    const t = Date.now();
    const code = await W.stop('SIGTERM');
    const took = Date.now() - t;
    assert.equal(code, 0);
    assert.ok(took <= 3000 + 3000 + 1500, `exited ${took} ms after SIGTERM (grace 3 s + margin 3 s)`);
  });

  it('R-02: tasks/get says "Moving to another worker" while a drained step waits for a worker', async () => {
    c = await startCluster({ gateways: 1, workers: 1 });
    const url = c.urls[0]!;
    const [W] = c.workers as [Proc];
    const taskId = await createTask(url, 'checkpoint_count', { seconds: 30 });
    await countedAtLeast(() => url, taskId, 2);
    assert.equal(await W.stop('SIGTERM'), 0);
    const r = await getTask(url, taskId);
    assert.equal(r.body.result!.status, 'working');
    assert.equal(r.body.result!.statusMessage, 'Moving to another worker');
    const W2 = await c.addWorker();
    const done = await pollTask(
      () => url,
      taskId,
      (t) => isTerminal(t.status),
      90_000,
      200,
    );
    assert.equal(done.status, 'completed', JSON.stringify(done));
    assert.ok(done.result.structuredContent.resumedFrom >= 2, JSON.stringify(done.result.structuredContent));
    assert.ok(W2.logs.some((l) => l.msg === 'step.started' && l.taskId === taskId));
  });
});
