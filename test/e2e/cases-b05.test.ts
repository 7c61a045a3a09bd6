// @needs redis
/**
 * Case B-05 (shared/cases/cases.md): tasks/update answers dropped or applied twice.
 * Real processes: three gateways (G1, G2, G3) and workers, every request on a named gateway.
 * `ask_confirm` parks in `input_required` with one key K (wire key `confirm.<step>`, T-29).
 *
 * Expected (the assertions):
 *  1. an unknown key is ignored: ack, the task is still `input_required` listing K (warning logged);
 *  2. K mapped to a bare string → -32602;
 *  3. the valid update for K sent at the same moment to G2 and G3 → both acked, the worker gets
 *     the answer exactly once, the task goes to `working`;
 *  4. the same update again once `working` → ignored, no second delivery;
 *  5. two tasks/get while `input_required` → the same K with the same payload;
 *  6. K left unanswered past the input timeout → `failed` with a clear `statusMessage`.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { sleep, startCluster, type Cluster } from '../support/cluster.js';
import { callTool, getTask, isTerminal, pollTask, updateTask } from '../support/mcp.js';

const ACCEPT_YES = { action: 'accept', content: { confirm: true } };
const ACCEPT_NO = { action: 'accept', content: { confirm: false } };

/** `step.started` log lines for (taskId, step) across every worker the cluster ever ran. */
function stepStarts(c: Cluster, taskId: string, step: number): Record<string, unknown>[] {
  return c.workers.flatMap((w) =>
    w.logs.filter((l) => l.msg === 'step.started' && l.taskId === taskId && l.step === step),
  );
}

/** A BullMQ view of the cluster's `tools` queue (read-only use). */
function toolsQueue(c: Cluster): { queue: Queue; close(): Promise<void> } {
  const connection = new Redis(c.redisUrl, { maxRetriesPerRequest: null });
  const queue = new Queue('tools', { connection, prefix: `${c.prefix}:{jobs}` });
  return {
    queue,
    async close() {
      await queue.close().catch(() => undefined);
      connection.disconnect();
    },
  };
}

/** Creates an `ask_confirm` task on `url` and waits until it is `input_required`. */
async function parkedAskConfirm(
  c: Cluster,
  url: string,
  question: string,
  afterSeconds = 0,
): Promise<{ taskId: string; parked: Record<string, any>; key: string }> {
  const create = await callTool(url, 'ask_confirm', { question, ...(afterSeconds ? { afterSeconds } : {}) });
  assert.equal(create.status, 200, JSON.stringify(create.body));
  assert.equal(create.body.result?.resultType, 'task', JSON.stringify(create.body));
  const taskId = create.body.result!.taskId as string;
  const urls = c.urls;
  let i = 0;
  const parked = await pollTask(
    () => urls[i++ % urls.length]!,
    taskId,
    (t) => t.status !== 'working',
    10_000,
    50,
  );
  assert.equal(parked.status, 'input_required', JSON.stringify(parked));
  const keys = Object.keys(parked.inputRequests ?? {});
  assert.equal(keys.length, 1, `one outstanding request expected: ${JSON.stringify(parked.inputRequests)}`);
  return { taskId, parked, key: keys[0]! };
}

describe('Case B-05: tasks/update answers dropped or applied twice', () => {
  let c: Cluster;
  let G1: string, G2: string, G3: string;
  before(async () => {
    c = await startCluster({ gateways: 3, workers: 2 });
    [G1, G2, G3] = c.urls as [string, string, string];
  });
  after(async () => c?.stop());

  it('Case B-05.5 + B-05.1 + B-05.2: repeated polls show the same K and payload; an unknown key is acked and ignored (T-31, T-21); K as a bare string is -32602', async () => {
    const { taskId, parked, key: K } = await parkedAskConfirm(c, G1, 'Ship it?');
    assert.match(K, /^confirm\.\d+$/, 'wire key = logical key + step (T-29)');
    assert.equal(parked.inputRequests[K].method, 'elicitation/create');

    // 5. Two polls while input_required, on two different gateways: same K, same payload.
    const [p1, p2] = await Promise.all([getTask(G2, taskId), getTask(G3, taskId)]);
    for (const p of [p1, p2]) {
      assert.equal(p.body.result?.status, 'input_required', JSON.stringify(p.body));
      assert.deepEqual(Object.keys(p.body.result!.inputRequests), [K]);
    }
    assert.deepEqual(p1.body.result!.inputRequests, p2.body.result!.inputRequests);
    assert.deepEqual(p1.body.result!.inputRequests, parked.inputRequests);
    // A poll is a pure read: it consumed nothing, so the request is still outstanding.
    const p3 = await getTask(G1, taskId);
    assert.deepEqual(p3.body.result!.inputRequests, parked.inputRequests);

    // 1. Unknown key: ack (T-30 shape), warning logged, task unchanged, nothing delivered.
    const upd = await updateTask(G2, taskId, { 'not-K': ACCEPT_YES });
    assert.equal(upd.status, 200);
    assert.equal(upd.body.error, undefined, JSON.stringify(upd.body));
    assert.equal(upd.body.result?.resultType, 'complete');
    assert.deepEqual(
      Object.keys(upd.body.result!).filter((k) => k !== '_meta'),
      ['resultType'],
    );
    const g2 = c.gateways[1]!;
    const warn = await g2.waitLog((l) => l.taskId === taskId && l.msg === 'task.update_unknown_keys', 3000);
    assert.equal(warn.level, 40, 'logged as a warning');
    assert.deepEqual(warn.keys, ['not-K']);
    // An unknown key is ignored whatever its value (it is not validated against anything).
    const junk = await updateTask(G3, taskId, { 'not-K-either': 'junk' });
    assert.equal(junk.body.error, undefined, JSON.stringify(junk.body));
    assert.equal(junk.body.result?.resultType, 'complete');
    await sleep(500); // give a wrongly enqueued step time to run
    const afterUnknown = await getTask(G3, taskId);
    assert.equal(afterUnknown.body.result!.status, 'input_required', JSON.stringify(afterUnknown.body));
    assert.deepEqual(
      afterUnknown.body.result!.inputRequests,
      parked.inputRequests,
      'still listing K with the same payload',
    );
    assert.equal(stepStarts(c, taskId, 2).length, 0, 'the unknown key did not resume the tool');

    // 2. K mapped to a bare string instead of an ElicitResult: -32602, nothing applied.
    const bad = await updateTask(G1, taskId, { [K]: 'yes' });
    assert.equal(bad.body.error?.code, -32602, JSON.stringify(bad.body));
    assert.equal(bad.body.result, undefined);
    // Other shapes that are not an ElicitResult either.
    for (const v of [42, null, ['yes'], {}, { action: 'maybe' }, { action: 'accept', content: 'yes' }]) {
      const r = await updateTask(G2, taskId, { [K]: v });
      assert.equal(r.body.error?.code, -32602, `${JSON.stringify(v)} → ${JSON.stringify(r.body)}`);
    }
    await sleep(300);
    const afterBad = await getTask(G2, taskId);
    assert.equal(afterBad.body.result!.status, 'input_required', JSON.stringify(afterBad.body));
    assert.deepEqual(afterBad.body.result!.inputRequests, parked.inputRequests);
    assert.equal(stepStarts(c, taskId, 2).length, 0);

    // The valid answer still works afterwards (the bad one did not consume K).
    const ok = await updateTask(G3, taskId, { [K]: ACCEPT_YES });
    assert.equal(ok.body.result?.resultType, 'complete', JSON.stringify(ok.body));
    const done = await pollTask(
      () => G1,
      taskId,
      (t) => isTerminal(t.status),
      10_000,
      50,
    );
    assert.equal(done.status, 'completed', JSON.stringify(done));
    assert.equal(done.result.content[0].text, 'confirmed: true');
  });

  it('Case B-05.3: the valid update sent at the same moment to G2 and G3 is acked twice and delivered once; the task goes to working (T-30)', async () => {
    // Several tasks at once so the race between the two replicas really happens.
    const tasks = await Promise.all(
      Array.from({ length: 6 }, (_, i) => parkedAskConfirm(c, [G1, G2, G3][i % 3]!, `race ${i}?`)),
    );
    const acks = await Promise.all(
      tasks.flatMap(({ taskId, key }) => [
        updateTask(G2, taskId, { [key]: ACCEPT_YES }),
        updateTask(G3, taskId, { [key]: ACCEPT_YES }),
      ]),
    );
    for (const a of acks) {
      assert.equal(a.status, 200);
      assert.equal(a.body.error, undefined, JSON.stringify(a.body));
      assert.equal(a.body.result?.resultType, 'complete');
    }
    for (const { taskId } of tasks) {
      // Never input_required again after the ack (read-your-writes of the ack, T-30).
      const now = await getTask(G1, taskId);
      assert.ok(['working', 'completed'].includes(now.body.result!.status), JSON.stringify(now.body));
      const done = await pollTask(
        () => G1,
        taskId,
        (t) => isTerminal(t.status),
        10_000,
        50,
      );
      assert.equal(done.status, 'completed', JSON.stringify(done));
      assert.equal(done.result.content[0].text, 'confirmed: true');
      assert.equal(done.result.structuredContent.step, 2);
    }
    await sleep(1000); // a duplicate job would have started by now
    for (const { taskId } of tasks) {
      assert.equal(stepStarts(c, taskId, 2).length, 1, `step 2 of ${taskId} ran exactly once`);
      assert.equal(stepStarts(c, taskId, 3).length, 0);
    }
  });

  it('Case B-05.3, different answers: two different updates sent at the same moment to G2 and G3 → one acked, the other -32602 "already answered"; the worker gets the acked one, once', async () => {
    // The losing answer must land while the winner's is stored in the open task. A task that
    // has ended keeps no answers, and any answer to it is acked (T-13, B-05.4 below), so with a
    // tool that ends at once a busy machine could finish the task before the loser arrives and
    // ack both. The tool keeps working AFTER_S seconds after its answer (`afterSeconds`).
    const AFTER_S = 3;
    const tasks = await Promise.all(
      Array.from({ length: 6 }, (_, i) => parkedAskConfirm(c, [G1, G2, G3][i % 3]!, `different ${i}?`, AFTER_S)),
    );
    const pairs = await Promise.all(
      tasks.map(({ taskId, key }) =>
        Promise.all([updateTask(G2, taskId, { [key]: ACCEPT_YES }), updateTask(G3, taskId, { [key]: ACCEPT_NO })]),
      ),
    );
    for (const [i, [yes, no]] of pairs.entries()) {
      const { taskId, key } = tasks[i]!;
      const acked = [yes, no].filter((r) => r.body.error === undefined);
      const refused = [yes, no].filter((r) => r.body.error !== undefined);
      assert.equal(acked.length, 1, `exactly one acked: ${JSON.stringify([yes.body, no.body])}`);
      assert.equal(refused.length, 1);
      assert.equal(refused[0]!.body.error!.code, -32602);
      assert.match(
        refused[0]!.body.error!.message,
        new RegExp(`inputResponses\\["${key.replace('.', '\\.')}"\\] was already answered`),
      );
      const winner = acked[0] === yes ? 'true' : 'false';
      const done = await pollTask(
        () => G1,
        taskId,
        (t) => isTerminal(t.status),
        10_000,
        50,
      );
      assert.equal(done.status, 'completed', JSON.stringify(done));
      assert.equal(done.result.content[0].text, `confirmed: ${winner}`, 'the worker got the acked answer');
      assert.equal(stepStarts(c, taskId, 2).length, 1, `step 2 of ${taskId} ran once`);
    }
  });

  it('Case B-05.3 + B-05.4: with no worker running, the double update leaves exactly one step-2 job and the task working; a repeat after working is ignored, a different answer refused', async () => {
    const { taskId, key: K } = await parkedAskConfirm(c, G1, 'Deploy?');
    // Stop every worker: the resumed step must wait in the queue, so `working` is observable
    // and the queue shows exactly what was delivered.
    const old = [...c.workers];
    await Promise.all(old.map((w) => w.stop('SIGTERM')));
    const q = toolsQueue(c);
    try {
      const [a, b] = await Promise.all([
        updateTask(G2, taskId, { [K]: ACCEPT_YES }),
        updateTask(G3, taskId, { [K]: ACCEPT_YES }),
      ]);
      for (const r of [a, b]) {
        assert.equal(r.body.error, undefined, JSON.stringify(r.body));
        assert.equal(r.body.result?.resultType, 'complete');
      }
      const working = await getTask(G1, taskId);
      assert.equal(working.body.result!.status, 'working', JSON.stringify(working.body));
      assert.ok(!('inputRequests' in working.body.result!));
      const step2 = await q.queue.getJob(`t.${taskId}.2`);
      assert.ok(step2, 'step 2 was enqueued');
      assert.equal(await step2.getState(), 'prioritized', 'queued (every step job carries its fair-share priority)');
      assert.equal(await q.queue.getJobState(`t.${taskId}.3`), 'unknown');

      // 4. The same update again after the task is working: acked and ignored. A different
      // answer for K: refused, K was answered already (the first answer stands).
      const again = await updateTask(G2, taskId, { [K]: ACCEPT_YES });
      assert.equal(again.body.error, undefined, JSON.stringify(again.body));
      assert.equal(again.body.result?.resultType, 'complete');
      const other = await updateTask(G3, taskId, { [K]: ACCEPT_NO });
      assert.equal(other.body.error?.code, -32602, JSON.stringify(other.body));
      assert.match(other.body.error!.message, /was already answered/);
      assert.equal((await getTask(G1, taskId)).body.result!.status, 'working');
      assert.equal(await q.queue.getJobState(`t.${taskId}.3`), 'unknown', 'no second delivery');
      const waiting = (await q.queue.getJobs(['waiting', 'active', 'delayed', 'prioritized'])).filter(
        (j) => (j.data as { taskId?: string }).taskId === taskId,
      );
      assert.deepEqual(
        waiting.map((j) => j.id),
        [`t.${taskId}.2`],
        'exactly one pending job for the task',
      );

      await c.addWorker();
      const done = await pollTask(
        () => G2,
        taskId,
        (t) => isTerminal(t.status),
        15_000,
        50,
      );
      assert.equal(done.status, 'completed', JSON.stringify(done));
      // The first answer was delivered, once; the later `confirm:false` was ignored.
      assert.equal(done.result.content[0].text, 'confirmed: true');
      await sleep(1000);
      assert.equal(stepStarts(c, taskId, 2).length, 1, 'the worker got the answer exactly once');
      assert.equal(await q.queue.getJobState(`t.${taskId}.3`), 'unknown');

      // And once more after completion: ack, the terminal task is unchanged (T-13).
      const late = await updateTask(G1, taskId, { [K]: ACCEPT_NO });
      assert.equal(late.body.error, undefined, JSON.stringify(late.body));
      const still = await getTask(G3, taskId);
      assert.equal(still.body.result!.status, 'completed');
      assert.deepEqual(still.body.result!.result, done.result);
    } finally {
      await q.close();
    }
  });

  it('Case B-05.5: a later request gets a new key; K is never reused, and answering K again is acked and ignored (T-29, T-31)', async () => {
    const create = await callTool(G1, 'ask_confirm', { question: 'twice?', rounds: 2 });
    const taskId = create.body.result!.taskId as string;
    let i = 0;
    const next = () => c.urls[i++ % c.urls.length]!;
    const round1 = await pollTask(next, taskId, (t) => t.status === 'input_required', 10_000, 50);
    const [K] = Object.keys(round1.inputRequests);
    const ack1 = await updateTask(G2, taskId, { [K!]: { action: 'accept', content: { confirm: true } } });
    assert.equal(ack1.body.result?.resultType, 'complete');
    const round2 = await pollTask(
      next,
      taskId,
      (t) => t.status === 'input_required' && !(K! in t.inputRequests),
      10_000,
      50,
    );
    const [K2] = Object.keys(round2.inputRequests);
    assert.ok(K2 && K2 !== K, `round 2 uses a new key (got ${K2}, round 1 was ${K})`);
    // Answering the old key during round 2 is acked and changes nothing.
    const stale = await updateTask(G3, taskId, { [K!]: { action: 'accept', content: { confirm: false } } });
    assert.equal(stale.body.result?.resultType, 'complete');
    const still = await getTask(G1, taskId);
    assert.equal(still.body.result!.status, 'input_required');
    assert.deepEqual(Object.keys(still.body.result!.inputRequests), [K2]);
    await updateTask(G2, taskId, { [K2!]: { action: 'accept', content: { confirm: false } } });
    const done = await pollTask(next, taskId, (t) => isTerminal(t.status), 10_000, 50);
    assert.equal(done.status, 'completed');
    assert.equal(done.result.content[0].text, 'confirmed: false');
  });
});

describe('Case B-05.6: K left unanswered past the input timeout', () => {
  const INPUT_TIMEOUT_MS = 1500;
  let c: Cluster;
  before(async () => {
    c = await startCluster({ gateways: 2, workers: 1, env: { TASK_INPUT_TIMEOUT_MS: String(INPUT_TIMEOUT_MS) } });
  });
  after(async () => c?.stop());

  it('ends failed with a clear statusMessage and an error, not stuck in input_required (T-13, T-21)', async () => {
    const [G1, G2] = c.urls as [string, string];
    const { taskId, key: K, parked } = await parkedAskConfirm(c, G1, 'Anyone there?');
    const seen = new Set<string>();
    const end = await pollTask(
      () => G2,
      taskId,
      (t) => (seen.add(t.status), t.status !== 'input_required'),
      INPUT_TIMEOUT_MS + 8000,
      100,
    );
    // On the task's own clock (its lastUpdatedAt when it parked, then when it failed): a poll that
    // sees the park late on a busy machine does not shorten the wait measured.
    const waited = Date.parse(end.lastUpdatedAt) - Date.parse(parked.lastUpdatedAt);
    assert.equal(end.status, 'failed', JSON.stringify(end));
    assert.ok(waited >= INPUT_TIMEOUT_MS - 300, `failed only after the timeout (${waited} ms)`);
    assert.ok(waited <= INPUT_TIMEOUT_MS + 6000, `failed within the timeout plus slack (${waited} ms)`);
    assert.deepEqual([...seen], ['input_required', 'failed']);
    assert.ok(end.statusMessage, 'a statusMessage explains the failure');
    assert.match(end.statusMessage, /timed out|no answer|input/i);
    assert.equal(typeof end.error?.code, 'number');
    assert.match(end.error.message, /input|answer/i);
    assert.ok(!('inputRequests' in end), 'no outstanding requests on a failed task');
    // Terminal is absorbing: a late answer is acked and changes nothing; the tool never resumes.
    const late = await updateTask(G1, taskId, { [K]: ACCEPT_YES });
    assert.equal(late.body.error, undefined, JSON.stringify(late.body));
    await sleep(500);
    const still = await getTask(G2, taskId);
    assert.equal(still.body.result!.status, 'failed');
    assert.equal(stepStarts(c, taskId, 2).length, 0);
  });
});
