// @needs redis
/**
 * Integration tests of the task record (design D3, D4): every Lua transition of
 * `packages/task-store` and its guards, against the real shared Redis (TEST_REDIS_URL, default
 * redis://127.0.0.1:6379). Every key this file writes starts with its own random prefix
 * (`unit-<hex>`), and only those keys are deleted at the end (never FLUSHALL / FLUSHDB).
 *
 * Pub/sub assertions use a second connection. To check what a script published (and what it did
 * NOT publish), `drain()` publishes a marker on the channel and waits for it: Redis delivers
 * messages to one subscriber in execution order, so everything before the marker is everything
 * the awaited scripts published.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import {
  capStatusMessage,
  STATUS_MESSAGE_MAX_CHARS,
  TaskStore,
  TaskIdTakenError,
  isWellFormedTaskId,
  parseStepJobId,
  stepJobId,
  toCreateTaskResult,
  toDetailedTask,
  type CreateTaskInput,
  type TaskRecord,
  type TaskStatus,
} from '@mcp-tasks/task-store';
import { deleteKeysUnder } from '../support/redis-keys.js';

const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const PREFIX = `unit-${randomBytes(8).toString('hex')}`;
const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const TTL_MS = 120_000;

let redis: Redis;
let sub: Redis;
let store: TaskStore;
/** Extra connections for the concurrency tests. */
const extra: Redis[] = [];

/** Messages received by the subscriber, in order. */
const received: { channel: string; message: string }[] = [];
let markerSeq = 0;

/** Raw script access (for `createTask` on an existing key). */
type ScriptFn = (...args: string[]) => Promise<unknown>;
const scripts = () => (store as unknown as { scripts: Record<string, ScriptFn> }).scripts;

/**
 * Returns every message published on `channel` since the last drain of that channel (markers
 * excluded), after making sure all of them have arrived.
 */
async function drain(channel: string): Promise<string[]> {
  const marker = `__marker_${++markerSeq}`;
  await redis.publish(channel, marker);
  const deadline = Date.now() + 5000;
  for (;;) {
    const idx = received.findIndex((m) => m.channel === channel && m.message === marker);
    if (idx >= 0) {
      const out: string[] = [];
      for (let i = 0; i <= idx;) {
        const m = received[i]!;
        if (m.channel === channel) {
          received.splice(i, 1);
          if (m.message === marker) break;
          if (!m.message.startsWith('__marker_')) out.push(m.message);
          continue;
        }
        i++;
      }
      return out;
    }
    if (Date.now() > deadline) throw new Error(`marker ${marker} not received on ${channel}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

function input(over: Partial<CreateTaskInput> = {}): CreateTaskInput {
  return {
    owner: 'alice',
    tool: 'deep_research',
    args: { topic: 'tidal energy' },
    mode: 'task',
    ttlMs: TTL_MS,
    pollIntervalMs: 2000,
    statusMessage: 'Queued',
    clientCapabilities: { elicitation: { form: {} } },
    ...over,
  };
}

async function newTask(over: Partial<CreateTaskInput> = {}): Promise<TaskRecord> {
  const rec = await store.create(input(over));
  await drain(store.channel(rec.taskId)); // start each task with a clean channel log
  return rec;
}

/** Claims `step` and returns the fence (asserting the claim succeeded). */
async function claim(taskId: string, step = 1, token = 'job-token'): Promise<string> {
  const c = await store.claimStep(taskId, step, token);
  assert.equal(c.code, 'ok', `claim of step ${step}: ${JSON.stringify(c)}`);
  return (c as { fence: string }).fence;
}

async function mustGet(taskId: string): Promise<TaskRecord> {
  const rec = await store.get(taskId);
  assert.ok(rec, `task ${taskId} must exist`);
  return rec;
}

/** Full raw snapshot of a task: every hash field and the absolute expiry. */
async function snapshot(taskId: string): Promise<{ hash: Record<string, string>; expireAt: number }> {
  const hash = await redis.hgetall(store.key(taskId));
  const expireAt = Number(await redis.call('PEXPIRETIME', store.key(taskId)));
  return { hash, expireAt };
}

const ELICIT_A = {
  method: 'elicitation/create',
  params: { mode: 'form', message: 'A?', requestedSchema: { type: 'object', properties: {} } },
};
const ELICIT_B = {
  method: 'elicitation/create',
  params: { mode: 'form', message: 'B?', requestedSchema: { type: 'object', properties: {} } },
};
const ELICIT_C = { method: 'roots/list' };

/** Drives a fresh task to `status` through the real scripts. */
async function taskIn(status: TaskStatus): Promise<{ rec: TaskRecord; fence: string }> {
  const rec = await newTask();
  if (status === 'working') return { rec, fence: await claim(rec.taskId) };
  const fence = await claim(rec.taskId);
  let r;
  switch (status) {
    case 'input_required':
      r = await store.parkForInput(rec.taskId, fence, { 'q-1': ELICIT_A }, { topic: 'x' }, 'Waiting');
      break;
    case 'completed':
      r = await store.complete(rec.taskId, fence, { content: [{ type: 'text', text: 'done' }] }, 'Done');
      break;
    case 'failed':
      r = await store.fail(rec.taskId, { fence }, { code: -32603, message: 'boom' }, 'Failed: boom');
      break;
    case 'cancelled':
      r = await store.markCancelled(rec.taskId, fence, 'Cancelled by client request');
      break;
  }
  assert.deepEqual(r, { code: 'ok' });
  await drain(store.channel(rec.taskId));
  return { rec: await mustGet(rec.taskId), fence };
}

before(async () => {
  redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
  sub = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
  store = new TaskStore(redis, PREFIX);
  sub.on('pmessage', (_p: string, channel: string, message: string) => received.push({ channel, message }));
  sub.on('message', (channel: string, message: string) => received.push({ channel, message }));
  await sub.psubscribe(`${PREFIX}:task:*`);
  await sub.subscribe(store.cancelChannel);
});

after(async () => {
  await deleteKeysUnder(redis, PREFIX); // only this file's keys
  await Promise.all([redis, sub, ...extra].map((c) => c.quit()));
});

describe('createTask', () => {
  it('T-15: a created task is durable and readable at once; the record is working, step 1, unclaimed', async () => {
    const now = Date.now();
    const rec = await store.create(input(), undefined, now);
    const read = await store.get(rec.taskId);
    assert.deepEqual(read, rec);
    assert.equal(rec.status, 'working');
    assert.equal(rec.owner, 'alice');
    assert.equal(rec.tool, 'deep_research');
    assert.deepEqual(JSON.parse(rec.argsJson), { topic: 'tidal energy' });
    assert.equal(rec.mode, 'task');
    assert.equal(rec.createdAt, now);
    assert.equal(rec.lastUpdatedAt, now);
    assert.equal(rec.ttlMs, TTL_MS);
    assert.equal(rec.pollIntervalMs, 2000);
    assert.equal(rec.step, 1);
    assert.equal(rec.claimedStep, null);
    assert.equal(rec.cancelRequested, false);
    assert.equal(rec.statusMessage, 'Queued');
    assert.deepEqual(rec.inputRequests, {});
    assert.deepEqual(rec.inputResponses, {});
    assert.ok(!('result' in rec) && !('error' in rec));
    // Readable from another connection (another replica) at once.
    const other = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
    extra.push(other);
    assert.deepEqual(await new TaskStore(other, PREFIX).get(rec.taskId), rec);
  });

  it('T-24: the record expires at createdAt + ttlMs (PEXPIREAT), not at now + ttlMs', async () => {
    const now = Date.now();
    const rec = await store.create(input({ ttlMs: 60_000 }), undefined, now);
    const pttl = await redis.pttl(store.key(rec.taskId));
    assert.ok(pttl > 60_000 - 2000 && pttl <= 60_000, `PTTL ${pttl} must be ≈ 60000`);
    assert.equal(Number(await redis.call('PEXPIRETIME', store.key(rec.taskId))), now + 60_000);

    // Created "10 s ago": 10 s of its lifetime are already gone.
    const past = Date.now() - 10_000;
    const old = await store.create(input({ ttlMs: 60_000 }), undefined, past);
    const pttlOld = await redis.pttl(store.key(old.taskId));
    assert.ok(pttlOld > 50_000 - 2000 && pttlOld <= 50_000, `PTTL ${pttlOld} must be ≈ 50000`);
    assert.equal(Number(await redis.call('PEXPIRETIME', store.key(old.taskId))), past + 60_000);
  });

  it('T-45: task ids are UUIDv4 (122 random bits), distinct, and well formed', async () => {
    const ids = new Set<string>();
    for (let i = 0; i < 25; i++) {
      const rec = await store.create(input());
      assert.match(rec.taskId, UUID_V4);
      assert.ok(isWellFormedTaskId(rec.taskId));
      ids.add(rec.taskId);
    }
    assert.equal(ids.size, 25);
    assert.equal(isWellFormedTaskId('tsk_123'), false);
    assert.equal(isWellFormedTaskId('00000000-0000-1000-8000-000000000000'), false); // v1, not v4
  });

  it('D4: createTask never overwrites an existing record (returns 0, record and expiry untouched)', async () => {
    const { rec } = await taskIn('completed');
    const before = await snapshot(rec.taskId);
    const r = await scripts().createTask!(
      store.key(rec.taskId),
      String(Date.now() + 5000),
      'status',
      'working',
      'owner',
      'mallory',
      'step',
      '1',
      'fence',
      '0',
    );
    assert.equal(r, 0);
    assert.deepEqual(await snapshot(rec.taskId), before);
    // Through the store: a taken id is a TaskIdTakenError (the gateway then leaves the record alone).
    await assert.rejects(store.create(input({ owner: 'mallory' }), rec.taskId), TaskIdTakenError);
    assert.deepEqual(await snapshot(rec.taskId), before);
  });

  it('stepJobId / parseStepJobId: job ids are t.<taskId>.<step> (D5)', async () => {
    const rec = await newTask();
    assert.equal(stepJobId(rec.taskId, 3), `t.${rec.taskId}.3`);
    assert.deepEqual(parseStepJobId(`t.${rec.taskId}.3`), { taskId: rec.taskId, step: 3 });
    assert.equal(parseStepJobId('t.nope.3'), null);
  });
});

describe('claimStep', () => {
  it('D3: every claim takes a strictly increasing fence; re-claims of the same step count reruns', async () => {
    const rec = await newTask({ mode: 'sync', args: { seconds: 3 }, tool: 'countdown' });
    const fences: number[] = [];
    for (let i = 0; i < 3; i++) {
      const c = await store.claimStep(rec.taskId, 1, `tok-${i}`);
      assert.equal(c.code, 'ok');
      if (c.code !== 'ok') return;
      fences.push(Number(c.fence));
      assert.equal(c.tool, 'countdown');
      assert.deepEqual(c.args, { seconds: 3 });
      assert.equal(c.mode, 'sync');
      assert.deepEqual(c.clientCapabilities, { elicitation: { form: {} } });
      assert.deepEqual(c.inputResponses, {});
      assert.equal(c.state, undefined);
      assert.equal(c.reruns, i);
      assert.equal(c.attempt, i + 1, 'issue 9 §6: ctx.attempt counts the runs of the step');
      const seen = await mustGet(rec.taskId);
      if (i === 0) assert.doesNotMatch(seen.statusMessage ?? '', /Restarted/, 'a first run says nothing of restarts');
      else
        assert.equal(
          seen.statusMessage,
          `Restarted after its worker stopped (attempt ${i + 1})`,
          'issue 9 §6: the client sees the re-run',
        );
    }
    for (let i = 1; i < fences.length; i++) assert.ok(fences[i]! > fences[i - 1]!, `fences ${fences} must increase`);
    assert.ok(fences[0]! > 0, 'the first fence is not the initial 0');
    const after = await mustGet(rec.taskId);
    assert.equal(after.claimedStep, 1);
    assert.equal(after.status, 'working');
    assert.deepEqual(await drain(store.channel(rec.taskId)), [], 'a claim changes no status: nothing published');
  });

  it('D3: claimStep refuses a step other than the current one (stale) and an unknown task (gone)', async () => {
    const rec = await newTask();
    assert.deepEqual(await store.claimStep(rec.taskId, 2, 't'), { code: 'stale', status: 'working' });
    assert.deepEqual(await store.claimStep(rec.taskId, 0, 't'), { code: 'stale', status: 'working' });
    const fence = await claim(rec.taskId, 1);
    assert.deepEqual(await store.parkForInput(rec.taskId, fence, { k: ELICIT_A }, null, 'Waiting'), { code: 'ok' });
    // Parked: neither the old step nor the next one may be claimed until the answers arrive.
    assert.deepEqual(await store.claimStep(rec.taskId, 1, 't'), { code: 'stale', status: 'input_required' });
    assert.deepEqual(await store.claimStep(rec.taskId, 2, 't'), { code: 'stale', status: 'input_required' });
    assert.equal((await mustGet(rec.taskId)).status, 'input_required');
    assert.deepEqual(await store.claimStep('00000000-0000-4000-8000-000000000000', 1, 't'), { code: 'gone' });
  });

  it('T-13: claimStep refuses completed, failed and cancelled tasks and leaves them unchanged', async () => {
    for (const status of ['completed', 'failed', 'cancelled'] as const) {
      const { rec } = await taskIn(status);
      const before = await snapshot(rec.taskId);
      assert.deepEqual(await store.claimStep(rec.taskId, 1, 't'), { code: 'terminal', status, owner: 'alice' });
      assert.deepEqual(await store.claimStep(rec.taskId, 2, 't'), { code: 'terminal', status, owner: 'alice' });
      assert.deepEqual(await snapshot(rec.taskId), before);
    }
  });

  it('T-36: claimStep returns cancelled when cancelRequested was set before the claim, and ends the task cancelled', async () => {
    const rec = await newTask();
    await claim(rec.taskId, 1);
    const r = await store.requestCancel(rec.taskId);
    assert.deepEqual(r, { code: 'requested', jobId: `t.${rec.taskId}.1` });
    // The worker died before it saw the abort; the retried job claims again.
    assert.deepEqual(await store.claimStep(rec.taskId, 1, 'retry'), { code: 'cancelled', owner: 'alice' });
    const after = await mustGet(rec.taskId);
    assert.equal(after.status, 'cancelled');
    assert.ok(after.lastUpdatedAt >= rec.lastUpdatedAt);
    assert.deepEqual(await drain(store.channel(rec.taskId)), ['cancelled']);
  });

  it('D2: the claim of the resumed step hands the worker the answers and the parked state', async () => {
    const rec = await newTask();
    const f1 = await claim(rec.taskId, 1);
    await store.parkForInput(rec.taskId, f1, { 'audience-1': ELICIT_A }, { topic: 'tidal energy', n: 1 }, 'Waiting');
    const answer = { action: 'accept', content: { audience: 'team' } };
    assert.deepEqual(await store.applyInputResponses(rec.taskId, { 'audience-1': answer }), {
      code: 'resumed',
      step: 2,
      applied: 1,
    });
    const c = await store.claimStep(rec.taskId, 2, 'tok');
    assert.equal(c.code, 'ok');
    if (c.code !== 'ok') return;
    assert.ok(Number(c.fence) > Number(f1));
    assert.deepEqual(c.state, { topic: 'tidal energy', n: 1 });
    assert.deepEqual(c.inputResponses, { 'audience-1': answer });
    assert.equal(c.reruns, 0, 'claiming a new step is not a rerun');
    assert.equal(c.attempt, 1, 'the first run of step 2');
  });

  it('D2: a record grown into a hashtable (long args, 120 answers) hands every answer over, and the next park clears them', async () => {
    // claimStep finds the answers with HSCAN MATCH, which on a hashtable (not a listpack) takes
    // several cursor pages: every answer must come back, none twice.
    const rec = await newTask({ args: { topic: 'x'.repeat(200) } });
    const f1 = await claim(rec.taskId, 1);
    const keys = Array.from({ length: 120 }, (_, i) => `k-${i}`);
    await store.parkForInput(rec.taskId, f1, Object.fromEntries(keys.map((k) => [k, ELICIT_A])), { n: 1 }, 'Waiting');
    const answers = Object.fromEntries(keys.map((k, i) => [k, { action: 'accept', content: { i } }]));
    assert.deepEqual(await store.applyInputResponses(rec.taskId, answers), { code: 'resumed', step: 2, applied: 120 });
    assert.equal(await redis.call('OBJECT', 'ENCODING', store.key(rec.taskId)), 'hashtable');
    const c = await store.claimStep(rec.taskId, 2, 'tok');
    assert.equal(c.code, 'ok');
    if (c.code !== 'ok') return;
    assert.deepEqual(c.inputResponses, answers);
    assert.deepEqual(c.args, { topic: 'x'.repeat(200) });
    // Parking again drops the answers of the last round (the record keeps only what is asked now).
    await store.parkForInput(rec.taskId, c.fence, { again: ELICIT_B }, { n: 2 }, 'Waiting again');
    const fields = Object.keys(await redis.hgetall(store.key(rec.taskId)));
    assert.deepEqual(
      fields.filter((f) => f.startsWith('resp:')),
      [],
    );
    assert.ok(fields.includes('req:again'));
  });
});

describe('fencing: a stale attempt cannot write (D3)', () => {
  it('after a re-claim, the old fence is refused for progress, park, complete, fail and markCancelled', async () => {
    const rec = await newTask();
    const f1 = await claim(rec.taskId, 1, 'first');
    const f2 = await claim(rec.taskId, 1, 'second');
    assert.notEqual(f1, f2);
    const before = await snapshot(rec.taskId);
    const fenced = { code: 'fenced', status: 'working' };
    assert.deepEqual(
      await store.reportProgress(rec.taskId, f1, { statusMessage: 'late', progress: { progress: 9, total: 10 } }),
      fenced,
    );
    assert.deepEqual(await store.parkForInput(rec.taskId, f1, { late: ELICIT_A }, null, 'late'), fenced);
    assert.deepEqual(await store.complete(rec.taskId, f1, { content: [] }, 'late'), fenced);
    assert.deepEqual(await store.fail(rec.taskId, { fence: f1 }, { code: -32603, message: 'late' }, 'late'), fenced);
    assert.deepEqual(await store.markCancelled(rec.taskId, f1, 'late'), fenced);
    assert.deepEqual(await snapshot(rec.taskId), before, 'refused writes change nothing');
    assert.deepEqual(await drain(store.channel(rec.taskId)), []);
    // The current fence still writes.
    const ok = await store.reportProgress(rec.taskId, f2, {
      statusMessage: '3/10',
      progress: { progress: 3, total: 10 },
    });
    assert.deepEqual(ok, { code: 'ok', cancelRequested: false });
    const after = await mustGet(rec.taskId);
    assert.equal(after.statusMessage, '3/10');
    assert.deepEqual(after.progress, { progress: 3, total: 10 });
    assert.deepEqual(await store.complete(rec.taskId, f2, { content: [{ type: 'text', text: 'ok' }] }, 'Done'), {
      code: 'ok',
    });
  });

  it('a write with a fence that was never handed out (no claim yet, fence "0" or "") is refused', async () => {
    const rec = await newTask();
    const before = await snapshot(rec.taskId);
    for (const fence of ['', '0', '1']) {
      const r = await store.complete(rec.taskId, fence, { content: [] }, 'forged');
      assert.notEqual(
        r.code,
        'ok',
        `complete with fence ${JSON.stringify(fence)} before any claim must be refused, got ${JSON.stringify(r)}`,
      );
      const p = await store.reportProgress(rec.taskId, fence, { statusMessage: 'forged' });
      assert.notEqual(
        p.code,
        'ok',
        `reportProgress with fence ${JSON.stringify(fence)} before any claim must be refused`,
      );
    }
    assert.deepEqual(await snapshot(rec.taskId), before);
  });

  it('the fence of a step that parked is refused while parked (stale) and after the task resumed to the next step', async () => {
    const rec = await newTask();
    const f1 = await claim(rec.taskId, 1);
    assert.deepEqual(await store.parkForInput(rec.taskId, f1, { k1: ELICIT_A }, null, 'Waiting'), { code: 'ok' });
    const stale = { code: 'stale', status: 'input_required' };
    assert.deepEqual(await store.reportProgress(rec.taskId, f1, { statusMessage: 'late' }), stale);
    assert.deepEqual(await store.complete(rec.taskId, f1, { content: [] }), stale);
    assert.deepEqual(await store.markCancelled(rec.taskId, f1, 'late'), stale);
    assert.deepEqual(await store.fail(rec.taskId, { fence: f1 }, { code: -32603, message: 'late' }, 'late'), stale);
    assert.deepEqual(await store.parkForInput(rec.taskId, f1, { k2: ELICIT_B }, null, 'late'), stale);
    assert.equal((await mustGet(rec.taskId)).status, 'input_required');

    assert.equal(
      (await store.applyInputResponses(rec.taskId, { k1: { action: 'accept', content: {} } })).code,
      'resumed',
    );
    // Step 2 is working but nobody has claimed it yet: the step-1 attempt must not write into it.
    const before = await snapshot(rec.taskId);
    const late = await store.complete(rec.taskId, f1, { content: [{ type: 'text', text: 'from step 1' }] }, 'late');
    assert.notEqual(late.code, 'ok', `step-1 fence completed step 2 before its claim: ${JSON.stringify(late)}`);
    assert.deepEqual(await snapshot(rec.taskId), before);
    // And after step 2 is claimed, the old fence is fenced.
    const f2 = await claim(rec.taskId, 2);
    assert.notEqual(f2, f1);
    assert.deepEqual(await store.reportProgress(rec.taskId, f1, { statusMessage: 'late' }), {
      code: 'fenced',
      status: 'working',
    });
    assert.deepEqual(await store.complete(rec.taskId, f1, { content: [] }), { code: 'fenced', status: 'working' });
    assert.deepEqual(await store.complete(rec.taskId, f2, { content: [] }), { code: 'ok' });
  });
});

describe('T-13: terminal states are absorbing', () => {
  for (const status of ['completed', 'failed', 'cancelled'] as const) {
    it(`T-13: no script changes a ${status} task (record, expiry and channel untouched)`, async () => {
      const { rec, fence } = await taskIn(status);
      assert.equal(rec.status, status);
      await drain(store.cancelChannel); // forget what earlier tests published there
      const before = await snapshot(rec.taskId);
      assert.ok(before.expireAt > Date.now(), 'a terminal record keeps its expiry (D3: every key expires)');
      const terminal = { code: 'terminal', status };
      const id = rec.taskId;
      assert.deepEqual(await store.claimStep(id, 1, 't'), { ...terminal, owner: 'alice' });
      assert.deepEqual(await store.claimStep(id, 2, 't'), { ...terminal, owner: 'alice' });
      assert.deepEqual(
        await store.reportProgress(id, fence, { statusMessage: 'x', progress: { progress: 1 } }),
        terminal,
      );
      assert.deepEqual(await store.parkForInput(id, fence, { zz: ELICIT_A }, null, 'x'), terminal);
      assert.deepEqual(await store.applyInputResponses(id, { 'q-1': { action: 'accept' } }), {
        code: 'ignored',
        status,
      });
      assert.deepEqual(await store.complete(id, fence, { content: [] }, 'x'), terminal);
      assert.deepEqual(await store.fail(id, { fence }, { code: -32603, message: 'x' }, 'x'), terminal);
      assert.deepEqual(await store.fail(id, {}, { code: -32603, message: 'x' }, 'x'), terminal);
      assert.deepEqual(await store.fail(id, { expectStatus: status }, { code: -32603, message: 'x' }, 'x'), terminal);
      assert.deepEqual(await store.markCancelled(id, fence, 'x'), terminal);
      assert.deepEqual(await store.requestCancel(id), terminal);
      assert.equal(await scripts().createTask!(store.key(id), String(Date.now() + 1000), 'status', 'working'), 0);
      assert.deepEqual(await snapshot(id), before);
      assert.deepEqual(await drain(store.channel(id)), [], 'refused writes publish nothing');
      assert.deepEqual(await drain(store.cancelChannel), []);
    });
  }

  it('T-13: a task failed by the system while input_required stays failed; its input bookkeeping is cleared', async () => {
    const { rec, fence } = await taskIn('input_required');
    const r = await store.fail(
      rec.taskId,
      { expectStatus: 'input_required', expectStep: 1 },
      { code: -32603, message: 'timeout' },
      'Timed out',
    );
    assert.deepEqual(r, { code: 'ok' });
    assert.deepEqual(await store.applyInputResponses(rec.taskId, { 'q-1': { action: 'accept' } }), {
      code: 'ignored',
      status: 'failed',
    });
    assert.deepEqual(await store.claimStep(rec.taskId, 2, 't'), { code: 'terminal', status: 'failed', owner: 'alice' });
    assert.deepEqual(await store.complete(rec.taskId, fence, { content: [] }), { code: 'terminal', status: 'failed' });
    const after = await mustGet(rec.taskId);
    assert.equal(after.status, 'failed');
    assert.deepEqual(after.inputRequests, {});
    assert.deepEqual(after.inputResponses, {});
  });
});

describe('a script that fails writes nothing', () => {
  it('a record without createdAt cannot be ended: markCancelled and requestCancel fail and leave it as it was, expiry included', async () => {
    // finish() works the expiry out before its DEL + HSET: a script error after those would
    // leave a terminal record with no expiry at all.
    const { rec, fence } = await taskIn('working');
    await redis.hdel(store.key(rec.taskId), 'createdAt');
    const before = await snapshot(rec.taskId);
    await assert.rejects(store.markCancelled(rec.taskId, fence, 'Cancelled'));
    assert.deepEqual(await snapshot(rec.taskId), before);
    const parked = await taskIn('input_required');
    await redis.hdel(store.key(parked.rec.taskId), 'createdAt');
    const parkedBefore = await snapshot(parked.rec.taskId);
    await assert.rejects(store.requestCancel(parked.rec.taskId));
    assert.deepEqual(await snapshot(parked.rec.taskId), parkedBefore);
  });
});

describe('parkForInput', () => {
  it('T-21: parks working → input_required with all keys at once, the state and the message; publishes input_required', async () => {
    const rec = await newTask();
    const fence = await claim(rec.taskId);
    const t0 = Date.now();
    const r = await store.parkForInput(
      rec.taskId,
      fence,
      { a: ELICIT_A, b: ELICIT_B, c: ELICIT_C },
      { phase: 1 },
      'Need answers',
      t0,
    );
    assert.deepEqual(r, { code: 'ok' });
    const after = await mustGet(rec.taskId);
    assert.equal(after.status, 'input_required');
    assert.equal(after.statusMessage, 'Need answers');
    assert.equal(after.lastUpdatedAt, t0);
    assert.deepEqual(after.inputRequests, { a: ELICIT_A, b: ELICIT_B, c: ELICIT_C });
    assert.deepEqual(after.inputResponses, {});
    assert.equal(await redis.hget(store.key(rec.taskId), 'state'), JSON.stringify({ phase: 1 }));
    assert.deepEqual(toDetailedTask(after).inputRequests, { a: ELICIT_A, b: ELICIT_B, c: ELICIT_C });
    assert.deepEqual(await drain(store.channel(rec.taskId)), ['input_required']);
  });

  it("T-29: a key is unique for the task's whole life: a reused key is refused and nothing is written", async () => {
    const rec = await newTask();
    const f1 = await claim(rec.taskId, 1);
    assert.deepEqual(await store.parkForInput(rec.taskId, f1, { k1: ELICIT_A }, null, 'Waiting'), { code: 'ok' });
    assert.equal(
      (await store.applyInputResponses(rec.taskId, { k1: { action: 'accept', content: {} } })).code,
      'resumed',
    );
    const f2 = await claim(rec.taskId, 2);
    await drain(store.channel(rec.taskId));
    const before = await snapshot(rec.taskId);
    // The answered key again, alone or next to a new key: refused as a whole.
    assert.deepEqual(await store.parkForInput(rec.taskId, f2, { k1: ELICIT_B }, null, 'again'), {
      code: 'key_reused',
      key: 'k1',
    });
    assert.deepEqual(await store.parkForInput(rec.taskId, f2, { k2: ELICIT_B, k1: ELICIT_A }, null, 'again'), {
      code: 'key_reused',
      key: 'k1',
    });
    assert.deepEqual(await snapshot(rec.taskId), before, 'no partial park: no req:k2, status still working');
    assert.deepEqual(await drain(store.channel(rec.taskId)), []);
    // A fresh key is fine.
    assert.deepEqual(await store.parkForInput(rec.taskId, f2, { k2: ELICIT_B }, null, 'Waiting 2'), { code: 'ok' });
    assert.deepEqual((await mustGet(rec.taskId)).inputRequests, { k2: ELICIT_B });
    // The round-1 answers are no longer carried (a new round starts empty).
    assert.deepEqual((await mustGet(rec.taskId)).inputResponses, {});
    assert.equal((await store.applyInputResponses(rec.taskId, { k2: { action: 'decline' } })).code, 'resumed');
    const f3 = await claim(rec.taskId, 3);
    // k1 and k2 are both used for good.
    assert.deepEqual(await store.parkForInput(rec.taskId, f3, { k2: ELICIT_A }, null, 'x'), {
      code: 'key_reused',
      key: 'k2',
    });
    assert.deepEqual(await store.parkForInput(rec.taskId, f3, { k1: ELICIT_A }, null, 'x'), {
      code: 'key_reused',
      key: 'k1',
    });
  });

  it('T-36: parking a task whose cancellation was requested ends it cancelled instead', async () => {
    const rec = await newTask();
    const fence = await claim(rec.taskId);
    assert.equal((await store.requestCancel(rec.taskId)).code, 'requested');
    assert.deepEqual(await store.parkForInput(rec.taskId, fence, { k: ELICIT_A }, null, 'Waiting'), {
      code: 'cancelled',
    });
    const after = await mustGet(rec.taskId);
    assert.equal(after.status, 'cancelled');
    assert.deepEqual(after.inputRequests, {});
    assert.deepEqual(await drain(store.channel(rec.taskId)), ['cancelled']);
  });
});

describe('applyInputResponses (tasks/update)', () => {
  async function parked(keys: string[]): Promise<TaskRecord> {
    const rec = await newTask();
    const fence = await claim(rec.taskId);
    const reqs = Object.fromEntries(
      keys.map((k) => [k, { ...ELICIT_A, params: { ...ELICIT_A.params, message: `${k}?` } }]),
    );
    assert.deepEqual(await store.parkForInput(rec.taskId, fence, reqs, { s: 1 }, 'Waiting', Date.now() - 1000), {
      code: 'ok',
    });
    await drain(store.channel(rec.taskId));
    return mustGet(rec.taskId);
  }

  it('T-31: responses for keys that are not outstanding are ignored and not stored', async () => {
    const rec = await parked(['a', 'b']);
    const before = await snapshot(rec.taskId);
    assert.deepEqual(await store.applyInputResponses(rec.taskId, { nope: { action: 'accept' } }), {
      code: 'ignored',
      status: 'input_required',
    });
    assert.deepEqual(await snapshot(rec.taskId), before, 'an ignored update changes nothing (not even lastUpdatedAt)');
    // Mixed with a real key: only the real one counts.
    assert.deepEqual(
      await store.applyInputResponses(rec.taskId, {
        a: { action: 'accept', content: { x: 1 } },
        nope: { action: 'accept' },
      }),
      {
        code: 'partial',
        applied: 1,
      },
    );
    const after = await mustGet(rec.taskId);
    assert.deepEqual(Object.keys(after.inputResponses), ['a']);
    assert.equal(await redis.hexists(store.key(rec.taskId), 'resp:nope'), 0);
    // Already answered: the same answer again is ignored; a different one is refused (case B-05:
    // of two different answers, the first applied wins and the other is told so); the first stays.
    assert.deepEqual(await store.applyInputResponses(rec.taskId, { a: { action: 'accept', content: { x: 1 } } }), {
      code: 'ignored',
      status: 'input_required',
    });
    assert.deepEqual(await store.applyInputResponses(rec.taskId, { a: { action: 'decline' } }), {
      code: 'conflict',
      key: 'a',
    });
    assert.deepEqual((await mustGet(rec.taskId)).inputResponses, { a: { action: 'accept', content: { x: 1 } } });
    assert.deepEqual(await drain(store.channel(rec.taskId)), []);
  });

  it('T-32: a partial set is accepted and the task stays input_required with the rest outstanding; the last key resumes at step + 1', async () => {
    const rec = await parked(['a', 'b', 'c']);
    const t1 = Date.now();
    assert.deepEqual(
      await store.applyInputResponses(rec.taskId, { a: { action: 'accept', content: { v: 'A' } } }, {}, t1),
      { code: 'partial', applied: 1 },
    );
    let cur = await mustGet(rec.taskId);
    assert.equal(cur.status, 'input_required');
    assert.equal(cur.lastUpdatedAt, t1);
    assert.deepEqual(Object.keys(cur.inputRequests).sort(), ['b', 'c']);
    assert.deepEqual(
      Object.keys(toDetailedTask(cur).inputRequests as object).sort(),
      ['b', 'c'],
      'T-21: all outstanding, none answered',
    );
    assert.deepEqual(await drain(store.channel(rec.taskId)), [], 'no status change, nothing published');

    assert.deepEqual(
      await store.applyInputResponses(rec.taskId, { b: { action: 'decline' }, c: { action: 'cancel' } }),
      {
        code: 'resumed',
        step: 2,
        applied: 2,
      },
    );
    cur = await mustGet(rec.taskId);
    assert.equal(cur.status, 'working');
    assert.equal(cur.step, 2);
    assert.deepEqual(cur.inputRequests, {});
    assert.deepEqual(cur.inputResponses, {
      a: { action: 'accept', content: { v: 'A' } },
      b: { action: 'decline' },
      c: { action: 'cancel' },
    });
    assert.deepEqual(await drain(store.channel(rec.taskId)), ['working']);
    // Once resumed, the same answers again are ignored; a different one is refused as answered.
    assert.deepEqual(await store.applyInputResponses(rec.taskId, { a: { action: 'accept', content: { v: 'A' } } }), {
      code: 'ignored',
      status: 'working',
    });
    assert.deepEqual(await store.applyInputResponses(rec.taskId, { a: { action: 'accept' } }), {
      code: 'conflict',
      key: 'a',
    });
  });

  for (const variant of ['the same answer', 'different answers'] as const) {
    it(`T-30: ${variant} sent 10 times in parallel: applied at most once (exactly one resumed)`, async () => {
      const rec = await parked(['only']);
      const conns = Array.from({ length: 5 }, () => new Redis(REDIS_URL, { maxRetriesPerRequest: 1 }));
      extra.push(...conns);
      const stores = conns.map((c) => new TaskStore(c, PREFIX));
      const answer = (i: number) => ({ action: 'accept', content: { i: variant === 'the same answer' ? 0 : i } });
      const results = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          stores[i % stores.length]!.applyInputResponses(rec.taskId, { only: answer(i) }),
        ),
      );
      const resumed = results.filter((r) => r.code === 'resumed');
      assert.equal(resumed.length, 1, JSON.stringify(results));
      assert.deepEqual(resumed[0], { code: 'resumed', step: 2, applied: 1 });
      // The same answer is acked (ignored: applied once); a different one is refused (case B-05).
      const others =
        variant === 'the same answer' ? { code: 'ignored', status: 'working' } : { code: 'conflict', key: 'only' };
      for (const r of results) if (r.code !== 'resumed') assert.deepEqual(r, others);
      const cur = await mustGet(rec.taskId);
      assert.equal(cur.step, 2);
      assert.equal(cur.status, 'working');
      assert.equal(Object.keys(cur.inputResponses).length, 1);
      assert.deepEqual(await drain(store.channel(rec.taskId)), ['working'], 'one resume, one notification');
    });
  }

  it('T-32: 10 different keys answered in parallel: 9 partial, exactly 1 resumed, step advanced once', async () => {
    const keys = Array.from({ length: 10 }, (_, i) => `k${i}`);
    const rec = await parked(keys);
    const results = await Promise.all(
      keys.map((k) => store.applyInputResponses(rec.taskId, { [k]: { action: 'accept', content: { k } } })),
    );
    assert.equal(results.filter((r) => r.code === 'resumed').length, 1, JSON.stringify(results));
    assert.equal(results.filter((r) => r.code === 'partial').length, 9);
    const cur = await mustGet(rec.taskId);
    assert.equal(cur.step, 2);
    assert.equal(Object.keys(cur.inputResponses).length, 10);
  });

  it('T-31: updates to a working task are ignored; an unknown task is gone', async () => {
    const rec = await newTask();
    assert.deepEqual(await store.applyInputResponses(rec.taskId, { a: { action: 'accept' } }), {
      code: 'ignored',
      status: 'working',
    });
    assert.deepEqual(await store.applyInputResponses('00000000-0000-4000-8000-000000000000', { a: {} }), {
      code: 'gone',
    });
  });
});

describe('requestCancel (tasks/cancel)', () => {
  it('T-36: input_required → cancelled at once (no job to abort)', async () => {
    const { rec } = await taskIn('input_required');
    await drain(store.cancelChannel); // forget what earlier tests published there
    const t = Date.now();
    assert.deepEqual(await store.requestCancel(rec.taskId, 'Cancelled by client request', {}, t), {
      code: 'cancelled',
    });
    const after = await mustGet(rec.taskId);
    assert.equal(after.status, 'cancelled');
    assert.equal(after.statusMessage, 'Cancelled by client request');
    assert.equal(after.lastUpdatedAt, t);
    assert.deepEqual(after.inputRequests, {});
    assert.deepEqual(await drain(store.channel(rec.taskId)), ['cancelled']);
    assert.deepEqual(await drain(store.cancelChannel), []);
  });

  it('T-36: working with its step not claimed yet → cancelled at once (fresh task, and a resumed step)', async () => {
    await drain(store.cancelChannel);
    const fresh = await newTask();
    assert.deepEqual(await store.requestCancel(fresh.taskId), { code: 'cancelled' });
    assert.equal((await mustGet(fresh.taskId)).status, 'cancelled');
    assert.deepEqual(await drain(store.channel(fresh.taskId)), ['cancelled']);

    const { rec } = await taskIn('input_required');
    assert.equal((await store.applyInputResponses(rec.taskId, { 'q-1': { action: 'accept' } })).code, 'resumed');
    await drain(store.channel(rec.taskId));
    assert.deepEqual(await store.requestCancel(rec.taskId), { code: 'cancelled' });
    assert.equal((await mustGet(rec.taskId)).status, 'cancelled');
    assert.deepEqual(await drain(store.channel(rec.taskId)), ['cancelled']);
    assert.deepEqual(await drain(store.cancelChannel), []);
    // The step-2 job that was already enqueued finds it cancelled.
    assert.deepEqual(await store.claimStep(rec.taskId, 2, 't'), {
      code: 'terminal',
      status: 'cancelled',
      owner: 'alice',
    });
  });

  it('T-36 / D5: working and claimed → cancelRequested, PUBLISH t.<id>.<step> on <prefix>:cancel; the worker then records cancelled', async () => {
    const rec = await newTask();
    const fence = await claim(rec.taskId, 1);
    await drain(store.cancelChannel);
    const r = await store.requestCancel(rec.taskId);
    assert.deepEqual(r, { code: 'requested', jobId: `t.${rec.taskId}.1` });
    assert.deepEqual(await drain(store.cancelChannel), [`t.${rec.taskId}.1`]);
    assert.deepEqual(await drain(store.channel(rec.taskId)), [], 'still working: no status published');
    const cur = await mustGet(rec.taskId);
    assert.equal(cur.status, 'working', 'cancellation is cooperative');
    assert.equal(cur.cancelRequested, true);
    assert.equal(await store.isCancelRequested(rec.taskId), true);
    // The worker's next progress write learns about it (backstop for a lost message).
    assert.deepEqual(await store.reportProgress(rec.taskId, fence, { statusMessage: '2/10' }), {
      code: 'ok',
      cancelRequested: true,
    });
    assert.deepEqual(await store.markCancelled(rec.taskId, fence, 'Cancelled by client request'), { code: 'ok' });
    assert.equal((await mustGet(rec.taskId)).status, 'cancelled');
    assert.deepEqual(await drain(store.channel(rec.taskId)), ['cancelled']);
  });

  it('T-36: the job id published names the step that is running (step 2 after a resume)', async () => {
    const { rec } = await taskIn('input_required');
    await store.applyInputResponses(rec.taskId, { 'q-1': { action: 'accept' } });
    await claim(rec.taskId, 2);
    await drain(store.cancelChannel);
    assert.deepEqual(await store.requestCancel(rec.taskId), { code: 'requested', jobId: `t.${rec.taskId}.2` });
    assert.deepEqual(await drain(store.cancelChannel), [`t.${rec.taskId}.2`]);
  });

  it('T-13: cancelling a terminal task acks and leaves it unchanged; an unknown task is gone', async () => {
    await drain(store.cancelChannel);
    for (const status of ['completed', 'failed', 'cancelled'] as const) {
      const { rec } = await taskIn(status);
      const before = await snapshot(rec.taskId);
      assert.deepEqual(await store.requestCancel(rec.taskId), { code: 'terminal', status });
      assert.deepEqual(await snapshot(rec.taskId), before);
      assert.deepEqual(await drain(store.channel(rec.taskId)), []);
    }
    assert.deepEqual(await drain(store.cancelChannel), []);
    assert.deepEqual(await store.requestCancel('00000000-0000-4000-8000-000000000000'), { code: 'gone' });
  });
});

describe('failTask', () => {
  it('T-14: the running step fails the task with its JSON-RPC error (fenced); publishes failed', async () => {
    const { rec, fence } = await taskIn('working');
    const err = { code: -32602, message: 'bad args', data: { field: 'topic' } };
    assert.deepEqual(await store.fail(rec.taskId, { fence }, err, 'Failed: bad args'), { code: 'ok' });
    const after = await mustGet(rec.taskId);
    assert.equal(after.status, 'failed');
    assert.deepEqual(after.error, err);
    assert.equal(after.statusMessage, 'Failed: bad args');
    assert.deepEqual(await drain(store.channel(rec.taskId)), ['failed']);
  });

  it('system mode respects the expected status and step (stale otherwise) and refuses terminal tasks', async () => {
    const err = { code: -32603, message: 'job lost' };
    const { rec } = await taskIn('working'); // working, step 1
    const before = await snapshot(rec.taskId);
    assert.deepEqual(await store.fail(rec.taskId, { expectStatus: 'input_required' }, err, 'x'), {
      code: 'stale',
      status: 'working',
    });
    assert.deepEqual(await store.fail(rec.taskId, { expectStep: 2 }, err, 'x'), { code: 'stale', status: 'working' });
    assert.deepEqual(await store.fail(rec.taskId, { expectStatus: 'working', expectStep: 2 }, err, 'x'), {
      code: 'stale',
      status: 'working',
    });
    assert.deepEqual(await store.fail(rec.taskId, { expectStatus: 'input_required', expectStep: 1 }, err, 'x'), {
      code: 'stale',
      status: 'working',
    });
    assert.deepEqual(await snapshot(rec.taskId), before);
    assert.deepEqual(await drain(store.channel(rec.taskId)), []);
    assert.deepEqual(
      await store.fail(rec.taskId, { expectStatus: 'working', expectStep: 1 }, err, 'Failed: job lost'),
      { code: 'ok' },
    );
    assert.equal((await mustGet(rec.taskId)).status, 'failed');
    assert.deepEqual(await drain(store.channel(rec.taskId)), ['failed']);

    // input_required, step 1: the input timeout.
    const p = await taskIn('input_required');
    assert.deepEqual(await store.fail(p.rec.taskId, { expectStatus: 'working', expectStep: 1 }, err, 'x'), {
      code: 'stale',
      status: 'input_required',
    });
    assert.deepEqual(await store.fail(p.rec.taskId, { expectStatus: 'input_required', expectStep: 7 }, err, 'x'), {
      code: 'stale',
      status: 'input_required',
    });
    assert.deepEqual(
      await store.fail(p.rec.taskId, { expectStatus: 'input_required', expectStep: 1 }, err, 'Timed out'),
      { code: 'ok' },
    );
    assert.equal((await mustGet(p.rec.taskId)).status, 'failed');

    // No expectation: any non-terminal task; unknown: gone.
    const w = await newTask();
    assert.deepEqual(await store.fail(w.taskId, {}, err, 'x'), { code: 'ok' });
    assert.deepEqual(await store.fail('00000000-0000-4000-8000-000000000000', {}, err, 'x'), { code: 'gone' });
  });
});

describe('notifications: every status change is PUBLISHed on <prefix>:task:<id>', () => {
  it('working → input_required → working → completed publishes exactly input_required, working, completed', async () => {
    const rec = await newTask();
    const ch = store.channel(rec.taskId);
    assert.equal(ch, `${PREFIX}:task:${rec.taskId}`);
    const f1 = await claim(rec.taskId, 1);
    await store.reportProgress(rec.taskId, f1, { statusMessage: '50%' });
    await store.parkForInput(rec.taskId, f1, { x: ELICIT_A, y: ELICIT_B }, null, 'Waiting');
    await store.applyInputResponses(rec.taskId, { x: { action: 'accept' } });
    await store.applyInputResponses(rec.taskId, { y: { action: 'accept' } });
    const f2 = await claim(rec.taskId, 2);
    await store.reportProgress(rec.taskId, f2, { statusMessage: '90%' });
    await store.complete(rec.taskId, f2, { content: [] }, 'Done');
    assert.deepEqual(await drain(ch), ['input_required', 'working', 'completed']);
  });

  it('each path into a terminal state publishes its status once', async () => {
    const cases: [string, () => Promise<string>][] = [
      [
        'complete',
        async () => {
          const { rec, fence } = await taskIn('working');
          await store.complete(rec.taskId, fence, { content: [] });
          return rec.taskId;
        },
      ],
      [
        'fail (fenced)',
        async () => {
          const { rec, fence } = await taskIn('working');
          await store.fail(rec.taskId, { fence }, { code: 1, message: 'm' }, 'm');
          return rec.taskId;
        },
      ],
      [
        'fail (system)',
        async () => {
          const { rec } = await taskIn('input_required');
          await store.fail(rec.taskId, {}, { code: 1, message: 'm' }, 'm');
          return rec.taskId;
        },
      ],
      [
        'markCancelled',
        async () => {
          const { rec, fence } = await taskIn('working');
          await store.markCancelled(rec.taskId, fence, 'm');
          return rec.taskId;
        },
      ],
      [
        'requestCancel (unclaimed)',
        async () => {
          const rec = await newTask();
          await store.requestCancel(rec.taskId);
          return rec.taskId;
        },
      ],
      [
        'claimStep after cancel request',
        async () => {
          const { rec } = await taskIn('working');
          await store.requestCancel(rec.taskId);
          await store.claimStep(rec.taskId, 1, 'r');
          return rec.taskId;
        },
      ],
    ];
    const expected: Record<string, string> = {
      complete: 'completed',
      'fail (fenced)': 'failed',
      'fail (system)': 'failed',
    };
    for (const [name, run] of cases) {
      const id = await run();
      assert.deepEqual(await drain(store.channel(id)), [expected[name] ?? 'cancelled'], name);
      assert.equal((await mustGet(id)).status, expected[name] ?? 'cancelled', name);
    }
    await drain(store.cancelChannel);
  });
});

describe('progress stream of synchronous calls (D5, case B-12)', () => {
  it("a sync task's progress events go to a capped stream with the record's expiry, and are announced; a task-mode task writes none", async () => {
    const sync = await newTask({ mode: 'sync' });
    const f = await claim(sync.taskId);
    for (let i = 1; i <= 3; i++) {
      const r = await store.reportProgress(sync.taskId, f, {
        statusMessage: `${i}/3`,
        progress: { progress: i, total: 3 },
        event: { progress: i, total: 3, message: `${i}/3` },
      });
      assert.deepEqual(r, { code: 'ok', cancelRequested: false });
    }
    const rows = await store.readProgress(sync.taskId);
    assert.deepEqual(
      rows.map((r) => r.event),
      [1, 2, 3].map((i) => ({ progress: i, total: 3, message: `${i}/3` })),
    );
    assert.deepEqual(
      (await store.readProgress(sync.taskId, rows[0]!.id)).map((r) => r.event.progress),
      [2, 3],
      'reads after the given id, exclusive',
    );
    assert.equal(await store.lastProgressId(sync.taskId), rows[2]!.id);
    const recordExpiry = Number(await redis.call('PEXPIRETIME', store.key(sync.taskId)));
    assert.equal(
      Number(await redis.call('PEXPIRETIME', store.progressKey(sync.taskId))),
      recordExpiry,
      'the stream never outlives its record (TTL 120 s < PROGRESS_STREAM_KEEP_MS 300 s)',
    );
    assert.deepEqual(await drain(store.channel(sync.taskId)), ['progress', 'progress', 'progress']);

    const task = await newTask({ mode: 'task' });
    const ft = await claim(task.taskId);
    await store.reportProgress(task.taskId, ft, {
      statusMessage: 'x',
      progress: { progress: 1 },
      event: { progress: 1 },
    });
    assert.equal(await redis.exists(store.progressKey(task.taskId)), 0, 'tasks get no progress events (T-41)');
    assert.deepEqual(await drain(store.channel(task.taskId)), []);
    assert.equal((await mustGet(task.taskId)).statusMessage, 'x');
  });

  it('the stream is capped (~64 entries) and a stale fence writes no event', async () => {
    const sync = await newTask({ mode: 'sync' });
    const f = await claim(sync.taskId);
    for (let i = 1; i <= 300; i++) await store.reportProgress(sync.taskId, f, { event: { progress: i } });
    const len = await redis.xlen(store.progressKey(sync.taskId));
    assert.ok(len >= 64 && len < 200, `capped near 64, got ${len}`);
    await store.requestCancel(sync.taskId);
    await store.markCancelled(sync.taskId, f, 'gone');
    const before = await redis.xlen(store.progressKey(sync.taskId));
    assert.deepEqual(await store.reportProgress(sync.taskId, f, { event: { progress: 999 } }), {
      code: 'terminal',
      status: 'cancelled',
    });
    assert.equal(await redis.xlen(store.progressKey(sync.taskId)), before);
    await drain(store.channel(sync.taskId));
    await drain(store.cancelChannel);
  });

  it('PROGRESS_STREAM_KEEP_MS: the stream expires that long after its last event when that is before the task expires', async () => {
    const short = new TaskStore(redis, PREFIX, undefined, { progressStreamKeepMs: 5000 });
    const sync = await short.create(input({ mode: 'sync' }));
    const f = await claim(sync.taskId);
    const t0 = Date.now();
    await short.reportProgress(sync.taskId, f, { event: { progress: 1 } }, t0);
    assert.equal(
      Number(await redis.call('PEXPIRETIME', short.progressKey(sync.taskId))),
      t0 + 5000,
      'last event + 5 s',
    );
    await short.reportProgress(sync.taskId, f, { event: { progress: 2 } }, t0 + 1000);
    assert.equal(
      Number(await redis.call('PEXPIRETIME', short.progressKey(sync.taskId))),
      t0 + 6000,
      'renewed by each event',
    );
    await drain(store.channel(sync.taskId));
  });

  it('readProgress of a task without events is empty; lastProgressId is "0"', async () => {
    const rec = await newTask({ mode: 'sync' });
    assert.deepEqual(await store.readProgress(rec.taskId), []);
    assert.equal(await store.lastProgressId(rec.taskId), '0');
  });
});

describe("a finished task's record is compact and its outcome has its own key (case B-15, issue 8)", () => {
  const KEPT = [
    'status',
    'owner',
    'tool',
    'mode',
    'createdAt',
    'lastUpdatedAt',
    'ttlMs',
    'pollIntervalMs',
    'step',
    'reruns',
    'statusMessage',
    'traceparent',
  ];
  const TRACEPARENT = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

  /** A working task whose record is a hashtable (100 KB of args, a long tracestate, an answered round). */
  async function bulkyWorking(mode: 'task' | 'sync' = 'task') {
    const rec = await newTask({
      mode,
      args: { text: 'a'.repeat(100_000) },
      trace: { traceparent: TRACEPARENT, tracestate: `v=${'b'.repeat(300)}` },
    });
    const f = await claim(rec.taskId);
    await store.reportProgress(rec.taskId, f, { statusMessage: 'half way', progress: { progress: 1, total: 2 } });
    assert.equal(
      await redis.call('OBJECT', 'ENCODING', store.key(rec.taskId)),
      'hashtable',
      'the working record is a hashtable',
    );
    return { rec, fence: f };
  }

  it('completed: the record keeps only what a finished task is read for, as a listpack; the result is in <prefix>:{t:<id>}:result with the same expiry', async () => {
    const { rec, fence } = await bulkyWorking();
    const result = { content: [{ type: 'text', text: 'x'.repeat(1024) }] };
    assert.deepEqual(await store.complete(rec.taskId, fence, result, 'Done'), { code: 'ok' });
    const hash = await redis.hgetall(store.key(rec.taskId));
    assert.deepEqual(Object.keys(hash).sort(), [...KEPT].sort());
    assert.equal(hash.status, 'completed');
    assert.equal(hash.statusMessage, 'Done');
    assert.equal(await redis.call('OBJECT', 'ENCODING', store.key(rec.taskId)), 'listpack');
    assert.ok(
      ((await redis.call('MEMORY', 'USAGE', store.key(rec.taskId), 'SAMPLES', '0')) as number) < 512,
      'a few hundred bytes (the working record was over 100 KB)',
    );
    assert.equal(await redis.get(store.resultKey(rec.taskId)), JSON.stringify(result));
    const expireAt = rec.createdAt + rec.ttlMs;
    assert.equal(
      Number(await redis.call('PEXPIRETIME', store.key(rec.taskId))),
      expireAt,
      'record expiry unchanged (T-24)',
    );
    assert.equal(
      Number(await redis.call('PEXPIRETIME', store.resultKey(rec.taskId))),
      expireAt,
      'result key: the same expiry',
    );
    const got = await mustGet(rec.taskId);
    assert.deepEqual(got.result, result);
    assert.deepEqual(toDetailedTask(got).result, { resultType: 'complete', ...result });
    assert.equal(got.owner, 'alice');
    assert.deepEqual(got.trace, { traceparent: TRACEPARENT });
    await store.remove(rec.taskId);
    assert.equal(await redis.exists(store.key(rec.taskId), store.resultKey(rec.taskId)), 0, 'remove deletes both keys');
    await drain(store.channel(rec.taskId));
  });

  it('failed: the error is in the result key (same expiry), the record is a listpack; a system failure too', async () => {
    const { rec, fence } = await bulkyWorking();
    const error = {
      code: -32603,
      message: `Tool deep_research failed unexpectedly (error id ${'e'.repeat(40)})`,
      data: { errorId: 'e'.repeat(40) },
    };
    assert.deepEqual(await store.fail(rec.taskId, { fence }, error, 'Failed'), { code: 'ok' });
    assert.equal(await redis.call('OBJECT', 'ENCODING', store.key(rec.taskId)), 'listpack');
    assert.equal(await redis.hget(store.key(rec.taskId), 'error'), null);
    assert.equal(await redis.get(store.resultKey(rec.taskId)), JSON.stringify(error));
    assert.equal(Number(await redis.call('PEXPIRETIME', store.resultKey(rec.taskId))), rec.createdAt + rec.ttlMs);
    assert.deepEqual((await mustGet(rec.taskId)).error, error);

    const parked = await taskIn('input_required');
    assert.deepEqual(await store.fail(parked.rec.taskId, { expectStatus: 'input_required' }, error, 'Timed out'), {
      code: 'ok',
    });
    assert.equal(await redis.call('OBJECT', 'ENCODING', store.key(parked.rec.taskId)), 'listpack');
    assert.deepEqual((await mustGet(parked.rec.taskId)).error, error);
    assert.deepEqual(
      JSON.parse((await mustGet(parked.rec.taskId)).argsJson),
      { topic: 'tidal energy' },
      'short arguments (≤ 64 B) are kept',
    );
    await drain(store.channel(rec.taskId));
    await drain(store.channel(parked.rec.taskId));
  });

  it('cancelled (by the worker, at once, at the claim): a listpack record, no result key, the reason kept', async () => {
    const a = await bulkyWorking();
    await store.requestCancel(a.rec.taskId, 'Cancelled by client request');
    assert.deepEqual(await store.markCancelled(a.rec.taskId, a.fence, 'worker saw it'), { code: 'ok' });
    const b = await newTask({ args: { text: 'a'.repeat(10_000) } });
    assert.deepEqual(await store.requestCancel(b.taskId, 'Cancelled before it ran'), { code: 'cancelled' });
    for (const id of [a.rec.taskId, b.taskId]) {
      assert.equal(await redis.call('OBJECT', 'ENCODING', store.key(id)), 'listpack', id);
      assert.equal(await redis.exists(store.resultKey(id)), 0);
      assert.equal(Number(await redis.call('PEXPIRETIME', store.key(id))), (await mustGet(id)).createdAt + TTL_MS);
    }
    assert.equal((await mustGet(a.rec.taskId)).statusMessage, 'Cancelled by client request');
    assert.equal((await mustGet(b.taskId)).statusMessage, 'Cancelled before it ran');
    await drain(store.channel(a.rec.taskId));
    await drain(store.channel(b.taskId));
    await drain(store.cancelChannel);
  });

  it('a record finished before the result key existed (result in the hash) still reads its result', async () => {
    const rec = await newTask();
    await redis.hset(
      store.key(rec.taskId),
      'status',
      'completed',
      'result',
      JSON.stringify({ content: [{ type: 'text', text: 'old' }] }),
    );
    assert.deepEqual((await mustGet(rec.taskId)).result, { content: [{ type: 'text', text: 'old' }] });
  });
});

describe('detachSync (budget hand-off, D1)', () => {
  it('a working sync task becomes a task-mode task of the same owner, holders dropped; its record otherwise unchanged', async () => {
    const rec = await newTask({ mode: 'sync' });
    const f = await claim(rec.taskId);
    assert.equal(await store.renewHolder(rec.taskId, 1), 1);
    await store.reportProgress(rec.taskId, f, { statusMessage: '2/8 s' });
    const before = await snapshot(rec.taskId);
    assert.deepEqual(
      await store.detachSync(rec.taskId),
      { code: 'ok', status: 'working', statusMessage: '2/8 s' },
      'with the latest progress, for the hand-off',
    );
    const after = await snapshot(rec.taskId);
    assert.equal(after.hash.mode, 'task');
    assert.equal(after.hash.owner, before.hash.owner);
    assert.equal(after.hash.holders, undefined);
    assert.equal(after.hash.holderAt, undefined);
    assert.equal(after.expireAt, before.expireAt, 'same expiry');
    assert.equal(await store.renewHolder(rec.taskId, 0), -1, 'no longer a synchronous call');
    assert.deepEqual(
      await store.reportProgress(rec.taskId, f, { event: { progress: 1 } }),
      { code: 'ok', cancelRequested: false },
      'the running step keeps its fence',
    );
    assert.equal(await store.lastProgressId(rec.taskId), '0', 'no more progress events once detached');
    assert.deepEqual(await drain(store.channel(rec.taskId)), [], 'no status change announced');
  });

  it('an input_required sync task detaches too; terminal, task-mode and missing tasks are reported, not changed', async () => {
    const parked = await newTask({ mode: 'sync' });
    const f = await claim(parked.taskId);
    await store.parkForInput(parked.taskId, f, { 'q.1': ELICIT_A }, null, 'Waiting');
    assert.deepEqual(
      await store.detachSync(parked.taskId),
      { code: 'ok', status: 'input_required', statusMessage: 'Waiting' },
      'with the state the hand-off reports',
    );

    const { rec: done } = await taskIn('completed');
    assert.deepEqual(await store.detachSync(done.taskId), { code: 'terminal', status: 'completed' });
    const task = await newTask({ mode: 'task' });
    assert.deepEqual(await store.detachSync(task.taskId), {
      code: 'not_sync',
      status: 'working',
      statusMessage: 'Queued',
    });
    assert.deepEqual(await store.detachSync('6f1c2d4e-8a9b-4c3d-9e8f-0a1b2c3d4e5f'), { code: 'gone' });
    await drain(store.channel(parked.taskId));
  });
});

describe('statusMessage is capped by every writer (one constant, STATUS_MESSAGE_MAX_CHARS)', () => {
  const LONG = `${'é'.repeat(150)}${'😀'.repeat(150)}`; // 300 code points, 450 UTF-16 units

  it('capStatusMessage cuts at the constant (code points, never half a surrogate pair) and leaves short messages alone', () => {
    assert.equal(STATUS_MESSAGE_MAX_CHARS, 200);
    const cut = capStatusMessage(LONG);
    assert.equal(Array.from(cut).length, STATUS_MESSAGE_MAX_CHARS);
    assert.ok(cut.endsWith('…'));
    assert.doesNotMatch(cut, /[\uD800-\uDBFF](?![\uDC00-\uDFFF])/, 'no lone high surrogate');
    assert.equal(capStatusMessage('Done'), 'Done');
    assert.equal(capStatusMessage('x'.repeat(200)), 'x'.repeat(200));
  });

  it('create, reportProgress, parkForInput, complete, fail, markCancelled and requestCancel all store at most the cap', async () => {
    const stored = async (taskId: string) => (await redis.hget(store.key(taskId), 'statusMessage')) ?? '';
    const ok = (s: string) => Array.from(s).length === STATUS_MESSAGE_MAX_CHARS && s.endsWith('…');
    const created = await newTask({ statusMessage: LONG });
    assert.ok(ok(await stored(created.taskId)), 'create');
    const fence = await claim(created.taskId);
    await store.reportProgress(created.taskId, fence, { statusMessage: LONG });
    assert.ok(ok(await stored(created.taskId)), 'reportProgress');
    await store.parkForInput(created.taskId, fence, { q: ELICIT_A }, null, LONG);
    assert.ok(ok(await stored(created.taskId)), 'parkForInput');
    await store.requestCancel(created.taskId, LONG);
    assert.ok(ok(await stored(created.taskId)), 'requestCancel (ended at once)');

    const w1 = await taskIn('working');
    await store.complete(w1.rec.taskId, w1.fence, { content: [] }, LONG);
    assert.ok(ok(await stored(w1.rec.taskId)), 'complete');
    const w2 = await taskIn('working');
    await store.fail(w2.rec.taskId, { fence: w2.fence }, { code: -32603, message: 'x' }, LONG);
    assert.ok(ok(await stored(w2.rec.taskId)), 'fail');
    const w3 = await taskIn('working');
    await store.markCancelled(w3.rec.taskId, w3.fence, LONG);
    assert.ok(ok(await stored(w3.rec.taskId)), 'markCancelled');
    const w4 = await taskIn('working');
    await store.requestCancel(w4.rec.taskId, LONG); // running: the reason is kept for the worker's write
    assert.ok(ok((await redis.hget(store.key(w4.rec.taskId), 'cancelReason')) ?? ''), 'requestCancel (reason)');
    await drain(store.cancelChannel);
    for (const id of [created.taskId, w1.rec.taskId, w2.rec.taskId, w3.rec.taskId, w4.rec.taskId])
      await drain(store.channel(id));
  });
});

describe('wire shapes (src/wire.ts)', () => {
  const BASE_KEYS = ['createdAt', 'lastUpdatedAt', 'pollIntervalMs', 'status', 'statusMessage', 'taskId', 'ttlMs'];
  const PAYLOAD_KEYS = ['result', 'error', 'inputRequests'];

  function assertNoUndefined(obj: Record<string, unknown>) {
    for (const [k, v] of Object.entries(obj)) assert.notEqual(v, undefined, `key ${k} is present with value undefined`);
  }
  function assertBase(t: Record<string, unknown>, rec: TaskRecord) {
    assert.equal(t.taskId, rec.taskId);
    assert.equal(t.status, rec.status);
    assert.equal(t.createdAt, new Date(rec.createdAt).toISOString());
    assert.equal(t.lastUpdatedAt, new Date(rec.lastUpdatedAt).toISOString());
    assert.equal(t.ttlMs, rec.ttlMs);
    assert.equal(t.pollIntervalMs, rec.pollIntervalMs);
    for (const internal of [
      'owner',
      'tool',
      'args',
      'mode',
      'step',
      'fence',
      'claimedStep',
      'progress',
      'inputResponses',
      'cancelRequested',
      'reruns',
      'state',
    ]) {
      assert.ok(!(internal in t), `internal field ${internal} must not be on the wire`);
    }
  }

  it('T-21: working → plain task, no result / error / inputRequests keys at all', async () => {
    const { rec, fence } = await taskIn('working');
    await store.reportProgress(rec.taskId, fence, { statusMessage: 'Half way', progress: { progress: 5, total: 10 } });
    const cur = await mustGet(rec.taskId);
    const t = toDetailedTask(cur);
    assertBase(t, cur);
    assert.deepEqual(Object.keys(t).sort(), BASE_KEYS);
    assert.equal(t.statusMessage, 'Half way');
    for (const k of PAYLOAD_KEYS) assert.ok(!(k in t), `'${k}' in a working task`);
    assertNoUndefined(t);
  });

  it('T-21: input_required → inputRequests with every outstanding request, nothing else', async () => {
    const rec = await newTask();
    const fence = await claim(rec.taskId);
    await store.parkForInput(rec.taskId, fence, { a: ELICIT_A, b: ELICIT_B }, null, 'Need input');
    const cur = await mustGet(rec.taskId);
    const t = toDetailedTask(cur);
    assertBase(t, cur);
    assert.deepEqual(Object.keys(t).sort(), [...BASE_KEYS, 'inputRequests'].sort());
    assert.deepEqual(t.inputRequests, { a: ELICIT_A, b: ELICIT_B });
    assert.ok(!('result' in t) && !('error' in t));
    assertNoUndefined(t);
  });

  it('T-21 / T-14: completed → result inlined with resultType "complete" (isError results too), no error / inputRequests', async () => {
    for (const result of [
      { content: [{ type: 'text', text: 'Q3 report ready' }], structuredContent: { reportId: 'rep_51' } },
      { content: [{ type: 'text', text: 'rejected' }], isError: true },
    ]) {
      const { rec, fence } = await taskIn('working');
      await store.complete(rec.taskId, fence, result, 'Done');
      const cur = await mustGet(rec.taskId);
      const t = toDetailedTask(cur);
      assertBase(t, cur);
      assert.equal(t.status, 'completed');
      assert.deepEqual(Object.keys(t).sort(), [...BASE_KEYS, 'result'].sort());
      assert.deepEqual(t.result, { resultType: 'complete', ...result });
      assert.ok(!('error' in t) && !('inputRequests' in t));
      assertNoUndefined(t);
    }
  });

  it('T-21: failed → error (JSON-RPC error object), no result / inputRequests', async () => {
    const { rec, fence } = await taskIn('working');
    const err = { code: -32603, message: 'Internal error while rendering report' };
    await store.fail(rec.taskId, { fence }, err, 'Worker crashed while rendering');
    const cur = await mustGet(rec.taskId);
    const t = toDetailedTask(cur);
    assertBase(t, cur);
    assert.deepEqual(Object.keys(t).sort(), [...BASE_KEYS, 'error'].sort());
    assert.deepEqual(t.error, err);
    assert.ok(!('result' in t) && !('inputRequests' in t));
    assertNoUndefined(t);
  });

  it('T-21: cancelled → plain task', async () => {
    const { rec } = await taskIn('cancelled');
    const t = toDetailedTask(rec);
    assertBase(t, rec);
    assert.deepEqual(Object.keys(t).sort(), BASE_KEYS);
    for (const k of PAYLOAD_KEYS) assert.ok(!(k in t));
    assertNoUndefined(t);
  });

  it('statusMessage is absent (not undefined) when the task has none', async () => {
    const rec = await store.create(input({ statusMessage: undefined }));
    assert.ok(!('statusMessage' in toDetailedTask(rec)));
    assert.ok(!('statusMessage' in toCreateTaskResult(rec)));
    assertNoUndefined(toDetailedTask(rec));
    assertNoUndefined(toCreateTaskResult(rec));
  });

  it('T-11: toCreateTaskResult has resultType "task" and none of result / error / inputRequests / requestState', async () => {
    for (const status of ['working', 'input_required', 'completed', 'failed', 'cancelled'] as const) {
      const { rec } = await taskIn(status);
      const h = toCreateTaskResult(rec);
      assert.equal(h.resultType, 'task');
      assertBase(h, rec);
      for (const k of [...PAYLOAD_KEYS, 'requestState', 'task'])
        assert.ok(!(k in h), `CreateTaskResult (${status}) must not carry ${k}`);
      assert.deepEqual(Object.keys(h).sort(), ['resultType', ...BASE_KEYS].sort());
      assertNoUndefined(h);
    }
  });
});
