// @needs redis
/**
 * A principal's share of the workers (MAX_RUNNING_STEPS_PER_PRINCIPAL, design D9, case N-08;
 * docs/architecture.md "A principal's share of the workers"), on real gateway and worker
 * processes and the real Redis:
 *  - with the shipped limits (MAX_OUTSTANDING_TASKS 100, MAX_RUNNING_STEPS_PER_PRINCIPAL 10,
 *    WORKER_CONCURRENCY 50 × 2 workers), alice holding as many `slow_compute(60)` tasks as she
 *    may does not delay bob: his `countdown(1)` completes within 8 s. Before the share, her 100
 *    steps held all 100 slots and bob waited for the first of them to end (88 s measured);
 *  - a SIGKILLed worker's leases lapse, so alice's waiting steps start although the steps that
 *    held her shares never ended; and a step re-run elsewhere counts once.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { PrincipalShares, TaskStore } from '@mcp-tasks/task-store';
import { sleep, startCluster, waitFor, type Cluster } from '../support/cluster.js';
import { callTool, getTask, isTerminal, pollTask, roundRobin } from '../support/mcp.js';

const ALICE = 'alice-share-key-0123456789abcdef';
const BOB = 'bob-share-key-0123456789abcdef00';
const AUTH = { AUTH_API_KEYS: `alice:${ALICE},bob:${BOB}` };

/** Runs `fn` `n` times with at most `limit` in flight. */
async function times<R>(n: number, limit: number, fn: (i: number) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(n);
  let next = 0;
  await Promise.all(
    Array.from({ length: limit }, async () => {
      while (next < n) {
        const i = next++;
        out[i] = await fn(i);
      }
    }),
  );
  return out;
}

/** How many of `ids` a worker has claimed (started), and how many say they wait for the share. */
async function states(c: Cluster, ids: string[]): Promise<{ started: number; queued: number }> {
  const rows = await Promise.all(
    ids.map((id) => c.redis.hmget(`${c.prefix}:{t:${id}}:task`, 'claimedStep', 'statusMessage')),
  );
  return {
    started: rows.filter(([claimed]) => claimed === '1').length,
    queued: rows.filter(([claimed, msg]) => claimed !== '1' && /^Queued: /.test(msg ?? '')).length,
  };
}

describe('shipped limits: one principal at her limits does not delay another (N-08)', () => {
  let c: Cluster;
  before(async () => {
    // Empty values = the shipped defaults (the test profile raises both limits for other tests).
    c = await startCluster({
      gateways: 2,
      workers: 2,
      env: { ...AUTH, MAX_OUTSTANDING_TASKS: '', MAX_RUNNING_STEPS_PER_PRINCIPAL: '', WORKER_CONCURRENCY: '' },
    });
  });
  after(async () => c?.stop());

  it("alice holds 100 slow_compute(60) tasks (her limit); bob's countdown(1) completes within 8 s; only 10 of hers run, the other 90 wait holding no slot", async (t) => {
    const next = roundRobin(c.urls);
    const created = await times(110, 20, async () => {
      const r = await callTool(next(), 'slow_compute', { seconds: 60 }, { token: ALICE });
      return r.body.result?.resultType === 'task' ? (r.body.result.taskId as string) : r.body.error?.data?.limit;
    });
    const ids = created.filter((x) => x !== 'outstanding_tasks') as string[];
    assert.equal(ids.length, 100, 'alice holds MAX_OUTSTANDING_TASKS (100) tasks');
    assert.equal(created.length - ids.length, 10, 'the others were refused at her outstanding limit');

    const sent = Date.now();
    const bob = await callTool(next(), 'countdown', { seconds: 1 }, { token: BOB });
    assert.equal(bob.body.result?.resultType, 'task', JSON.stringify(bob.body));
    const done = await pollTask(next, bob.body.result!.taskId, (x) => isTerminal(x.status), 30_000, 100, {
      token: BOB,
    });
    const tookMs = Date.now() - sent;
    t.diagnostic(`bob's countdown(1) completed ${tookMs} ms after his tools/call was sent`);
    assert.equal(done.status, 'completed');
    assert.ok(tookMs < 8000, `bob's countdown(1) took ${tookMs} ms`);

    // The mechanism: 10 of alice's steps run, the 90 others were handed back and say why they wait.
    const shares = new PrincipalShares(new TaskStore(c.redis, c.prefix), 10, 20_000);
    let last = { started: 0, queued: 0 };
    const settled = await waitFor(
      async () => {
        last = await states(c, ids);
        return last.started === 10 && last.queued === 90 ? last : undefined;
      },
      30_000,
      200,
      () => `10 started and 90 queued (last seen ${JSON.stringify(last)})`,
    );
    assert.deepEqual(settled, { started: 10, queued: 90 });
    assert.equal(await shares.running('key:alice'), 10);
    assert.equal((await shares.waiting('key:alice')).length, 90);
    // tasks/get tells a waiting task's client why it waits.
    const claimed = await Promise.all(ids.map((id) => c.redis.hget(`${c.prefix}:{t:${id}}:task`, 'claimedStep')));
    const waitingId = ids.find((_, i) => claimed[i] !== '1')!;
    const waiting = (await getTask(c.urls[0]!, waitingId, { token: ALICE })).body.result!;
    assert.equal(waiting.status, 'working');
    assert.match(waiting.statusMessage, /^Queued: 10 of your tasks are already running, the most that run at once; /);
    // A waiting step asks again by itself every 5 to 30 s: none of those re-checks admits an 11th.
    await sleep(6000);
    assert.equal((await states(c, ids)).started, 10, 'still exactly 10 of alice steps started');
  });
});

describe("a SIGKILLed worker holding alice's shares does not starve her other steps (leases lapse; a re-run counts once)", () => {
  /**
   * One gateway and worker w1; alice (MAX_RUNNING_STEPS_PER_PRINCIPAL 2) starts two long steps on
   * w1, then worker w2 starts and her two short tasks wait for her share; w1 is SIGKILLed.
   */
  async function scenario(c: Cluster, longSeconds: number) {
    const url = c.urls[0]!;
    const w1 = await c.addWorker();
    const create = async (seconds: number) =>
      (await callTool(url, 'slow_echo', { seconds, quiet: true }, { token: ALICE })).body.result!.taskId as string;
    const long = [await create(longSeconds), await create(longSeconds)];
    await waitFor(async () => (await states(c, long)).started === 2, 20_000, 50, 'both long steps started on w1');
    const short = [await create(1), await create(1)];
    await waitFor(async () => (await states(c, short)).queued === 2, 20_000, 50, 'both short tasks wait for the share');
    // w1 dies while its long steps run; only then does the other worker start (started before,
    // its start-up on a busy machine could outlast a long step, which then simply completes).
    await w1.kill();
    await c.addWorker();
    const killedAt = Date.now(); // the kill, and another worker ready to take over
    return { long, short, killedAt };
  }

  it('WORKER_MAX_STALLED_COUNT=0 (the killed steps are never re-run): her waiting tasks complete once the dead leases lapse', async (t) => {
    const c = await startCluster({
      gateways: 1,
      workers: 0,
      env: { ...AUTH, MAX_RUNNING_STEPS_PER_PRINCIPAL: '2', WORKER_MAX_STALLED_COUNT: '0' },
    });
    try {
      const { long, short, killedAt } = await scenario(c, 600);
      for (const id of short) {
        const r = await pollTask(
          () => c.urls[0]!,
          id,
          (x) => isTerminal(x.status),
          60_000,
          100,
          { token: ALICE },
        );
        assert.equal(r.status, 'completed', JSON.stringify(r));
      }
      const afterMs = Date.now() - killedAt;
      t.diagnostic(`alice's waiting tasks completed ${afterMs} ms after the kill (lease 4 s + re-check ≤ 5 s + 1 s)`);
      // The lease is one job lock (4 s in the test profile); a waiting step re-asks within 5 s.
      assert.ok(afterMs < 20_000, `completed ${afterMs} ms after the kill`);
      for (const id of long) {
        const r = await pollTask(
          () => c.urls[0]!,
          id,
          (x) => isTerminal(x.status),
          30_000,
          200,
          { token: ALICE },
        );
        assert.equal(r.status, 'failed', 'the stalled steps failed (not re-run)');
        assert.equal(r.error?.code, -32603, JSON.stringify(r));
        assert.equal(r.error?.data?.reason, 'worker_lost', JSON.stringify(r));
        assert.match(r.error?.message ?? '', /^The task failed: the worker running it stopped unexpectedly/);
        assert.equal(r.statusMessage, r.error?.message);
      }
      const shares = new PrincipalShares(new TaskStore(c.redis, c.prefix), 2, 4000);
      await waitFor(async () => (await shares.running('key:alice')) === 0, 10_000, 100, 'no share held');
    } finally {
      await c.stop();
    }
  });

  it('the killed steps are re-run on the other worker, each taking over its own lease: all four tasks complete, never more than 2 at once', async (t) => {
    const c = await startCluster({ gateways: 1, workers: 0, env: { ...AUTH, MAX_RUNNING_STEPS_PER_PRINCIPAL: '2' } });
    const shares = new PrincipalShares(new TaskStore(c.redis, c.prefix), 2, 4000);
    let peak = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        peak = Math.max(peak, await shares.running('key:alice').catch(() => 0));
        await sleep(50);
      }
    })();
    try {
      const { long, short, killedAt } = await scenario(c, 3);
      const results = [];
      for (const id of [...long, ...short]) {
        results.push(
          await pollTask(
            () => c.urls[0]!,
            id,
            (x) => isTerminal(x.status),
            60_000,
            100,
            { token: ALICE },
          ),
        );
      }
      t.diagnostic(`all four completed ${Date.now() - killedAt} ms after the kill; peak leases ${peak}`);
      for (const r of results) assert.equal(r.status, 'completed', JSON.stringify(r));
      // slow_echo reports the run's attempt: the long ones were re-run once, the short ones ran once.
      const attempts = results.map((r) => r.result?.structuredContent?.attempt);
      assert.deepEqual(attempts, [2, 2, 1, 1]);
      assert.ok(peak <= 2, `alice held ${peak} leases at once`);
      await waitFor(async () => (await shares.running('key:alice')) === 0, 10_000, 100, 'no share held');
    } finally {
      sampling = false;
      await sampler;
      await c.stop();
    }
  });
});
