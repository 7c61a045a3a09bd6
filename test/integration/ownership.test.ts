// @needs redis
/**
 * Integration tests of the owner check inside the transition scripts (T-44; cases N-01, B-14;
 * issue 10 §2): `applyInputResponses-1.lua` and `requestCancel-1.lua` take the caller's
 * principal and the mode its method serves, and answer another principal's task (or a task of
 * another mode) exactly like an unknown id, writing and publishing nothing. Also the guard that
 * keeps a request with 100,000 answer keys away from the script's arguments (issue 10 §5).
 *
 * Real shared Redis (TEST_REDIS_URL, default redis://127.0.0.1:6379); every key starts with this
 * file's random prefix and only those keys are deleted at the end.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { TaskStore, type ActAs, type CreateTaskInput, type TaskRecord } from '@mcp-tasks/task-store';
import { deleteKeysUnder } from '../support/redis-keys.js';

const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const PREFIX = `unit-${randomBytes(8).toString('hex')}`;
const UNKNOWN_ID = '00000000-0000-4000-8000-000000000000';

/** Principals as the gateway builds them: API keys and JWTs (`jwt:<iss>#<sub>`). */
const ALICE = 'key:alice';
const MALLORY = 'key:mallory';
const JWT_A = 'jwt:https://issuer-a.example#user-1';
const JWT_SAME_SUB_OTHER_ISS = 'jwt:https://issuer-b.example#user-1';

let redis: Redis;
let sub: Redis;
let store: TaskStore;
const received: { channel: string; message: string }[] = [];

const ELICIT = {
  method: 'elicitation/create',
  params: { mode: 'form', message: 'Confirm?', requestedSchema: { type: 'object', properties: {} } },
};

function input(over: Partial<CreateTaskInput> = {}): CreateTaskInput {
  return { owner: ALICE, tool: 'ask_confirm', args: {}, mode: 'task', ttlMs: 120_000, pollIntervalMs: 2000, ...over };
}

/** A task parked in input_required with the given keys. */
async function parked(over: Partial<CreateTaskInput> = {}, keys = ['confirm.1']): Promise<TaskRecord> {
  const rec = await store.create(input(over));
  const c = await store.claimStep(rec.taskId, 1, 'tok');
  assert.equal(c.code, 'ok');
  const fence = (c as { fence: string }).fence;
  assert.deepEqual(
    await store.parkForInput(rec.taskId, fence, Object.fromEntries(keys.map((k) => [k, ELICIT])), { s: 1 }, 'Waiting'),
    { code: 'ok' },
  );
  return rec;
}

/** A task a worker is running (claimed step 1). */
async function running(over: Partial<CreateTaskInput> = {}): Promise<TaskRecord> {
  const rec = await store.create(input(over));
  assert.equal((await store.claimStep(rec.taskId, 1, 'tok')).code, 'ok');
  return rec;
}

/** Every field of the hash and its absolute expiry. */
async function snapshot(taskId: string) {
  return {
    hash: await redis.hgetall(store.key(taskId)),
    expireAt: Number(await redis.call('PEXPIRETIME', store.key(taskId))),
  };
}

/** Messages published on `channel` since the last call (waits for a marker: delivery is ordered). */
async function published(channel: string): Promise<string[]> {
  const marker = `__marker_${randomBytes(4).toString('hex')}`;
  await redis.publish(channel, marker);
  const deadline = Date.now() + 5000;
  for (;;) {
    const i = received.findIndex((m) => m.channel === channel && m.message === marker);
    if (i >= 0) {
      const out: string[] = [];
      const rest: typeof received = [];
      received.forEach((m, j) => {
        if (j <= i && m.channel === channel) {
          if (!m.message.startsWith('__marker_')) out.push(m.message);
        } else rest.push(m);
      });
      received.splice(0, received.length, ...rest);
      return out;
    }
    if (Date.now() > deadline) throw new Error(`marker not received on ${channel}`);
    await new Promise((r) => setTimeout(r, 5));
  }
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
  await deleteKeysUnder(redis, PREFIX);
  await Promise.all([redis.quit(), sub.quit()]);
});

describe('cases N-01 / B-14: tasks/update (applyInputResponses) checks the owner inside the script', () => {
  it('another principal\'s answers get "gone", exactly like an unknown id, and change nothing (record, expiry, channel)', async () => {
    for (const [owner, other] of [
      [ALICE, MALLORY],
      [JWT_A, JWT_SAME_SUB_OTHER_ISS], // the same `sub` under another issuer is another principal
      [JWT_A, ALICE],
    ] as const) {
      const rec = await parked({ owner });
      await published(store.channel(rec.taskId));
      const before = await snapshot(rec.taskId);
      const foreign = await store.applyInputResponses(
        rec.taskId,
        { 'confirm.1': { action: 'accept', content: { confirm: true } } },
        { owner: other, mode: 'task' },
      );
      const unknown = await store.applyInputResponses(
        UNKNOWN_ID,
        { 'confirm.1': { action: 'accept', content: { confirm: true } } },
        { owner: other, mode: 'task' },
      );
      assert.deepEqual(foreign, { code: 'gone' }, `${other} answering ${owner}'s task`);
      assert.deepEqual(foreign, unknown, 'indistinguishable from an unknown id');
      assert.deepEqual(await snapshot(rec.taskId), before, 'HGETALL and expiry byte-for-byte unchanged');
      assert.deepEqual(await published(store.channel(rec.taskId)), [], 'nothing published');
      // The owner's own answer still works.
      assert.deepEqual(
        await store.applyInputResponses(
          rec.taskId,
          { 'confirm.1': { action: 'accept', content: { confirm: true } } },
          { owner, mode: 'task' },
        ),
        {
          code: 'resumed',
          step: 2,
          applied: 1,
        },
      );
      assert.deepEqual(await published(store.channel(rec.taskId)), ['working']);
    }
  });

  it('the owner with the wrong mode gets "gone": a synchronous call\'s task is not reachable through tasks/update, nor a task through a sync retry', async () => {
    const syncTask = await parked({ mode: 'sync' });
    const before = await snapshot(syncTask.taskId);
    assert.deepEqual(
      await store.applyInputResponses(
        syncTask.taskId,
        { 'confirm.1': { action: 'accept' } },
        { owner: ALICE, mode: 'task' },
      ),
      { code: 'gone' },
    );
    assert.deepEqual(await snapshot(syncTask.taskId), before);
    assert.equal(
      (
        await store.applyInputResponses(
          syncTask.taskId,
          { 'confirm.1': { action: 'accept' } },
          { owner: ALICE, mode: 'sync' },
        )
      ).code,
      'resumed',
    );

    const task = await parked({ mode: 'task' });
    const beforeTask = await snapshot(task.taskId);
    assert.deepEqual(
      await store.applyInputResponses(
        task.taskId,
        { 'confirm.1': { action: 'accept' } },
        { owner: ALICE, mode: 'sync' },
      ),
      { code: 'gone' },
    );
    assert.deepEqual(await snapshot(task.taskId), beforeTask);
  });

  it('a foreign terminal or working task is "gone" too (not "ignored" with its status, which would reveal it exists)', async () => {
    const work = await running();
    assert.deepEqual(await store.applyInputResponses(work.taskId, { a: {} }, { owner: MALLORY, mode: 'task' }), {
      code: 'gone',
    });
    assert.deepEqual(await store.applyInputResponses(work.taskId, { a: {} }, { owner: ALICE, mode: 'task' }), {
      code: 'ignored',
      status: 'working',
    });
    const done = await running();
    assert.deepEqual(
      await store.requestCancel(done.taskId, 'Cancelled by client request', { owner: ALICE, mode: 'task' }),
      { code: 'requested', jobId: `t.${done.taskId}.1` },
    );
    assert.deepEqual(await store.applyInputResponses(done.taskId, { a: {} }, { owner: MALLORY, mode: 'task' }), {
      code: 'gone',
    });
    await published(store.cancelChannel);
  });

  it('system callers (no owner) act on any task; an empty principal is refused before Redis (it would mean "system")', async () => {
    const rec = await parked({ owner: MALLORY });
    assert.equal((await store.applyInputResponses(rec.taskId, { 'confirm.1': { action: 'decline' } })).code, 'resumed');
    await assert.rejects(store.applyInputResponses(rec.taskId, {}, { owner: '' } as ActAs), /non-empty principal/);
    await assert.rejects(store.requestCancel(rec.taskId, 'x', { owner: '' }), /non-empty principal/);
  });
});

describe('cases N-01 / B-14: tasks/cancel (requestCancel) checks the owner inside the script', () => {
  it('another principal\'s cancel of a parked, a running and a finished task is "gone" like an unknown id: no write, no PUBLISH', async () => {
    await published(store.cancelChannel);
    const tasks = [await parked(), await running()];
    const fin = await running();
    const c = await store.claimStep(fin.taskId, 1, 'tok2');
    await store.complete(fin.taskId, (c as { fence: string }).fence, { content: [] }, 'Done');
    tasks.push(fin);
    for (const rec of tasks) {
      await published(store.channel(rec.taskId));
      const before = await snapshot(rec.taskId);
      for (const as of [
        { owner: MALLORY, mode: 'task' },
        { owner: JWT_SAME_SUB_OTHER_ISS },
        { owner: ALICE, mode: 'sync' },
      ] as ActAs[]) {
        const r = await store.requestCancel(rec.taskId, 'Cancelled by client request', as);
        assert.deepEqual(r, { code: 'gone' }, `${JSON.stringify(as)} on a ${before.hash.status} task`);
        assert.deepEqual(r, await store.requestCancel(UNKNOWN_ID, 'Cancelled by client request', as));
      }
      assert.deepEqual(await snapshot(rec.taskId), before, `record of the ${before.hash.status} task unchanged`);
      assert.deepEqual(await published(store.channel(rec.taskId)), []);
    }
    assert.deepEqual(await published(store.cancelChannel), [], 'no job was told to abort');
    // The owner's cancel still works, on each.
    const as: ActAs = { owner: ALICE, mode: 'task' };
    assert.deepEqual(await store.requestCancel(tasks[0]!.taskId, 'Cancelled by client request', as), {
      code: 'cancelled',
    });
    assert.deepEqual(await store.requestCancel(tasks[1]!.taskId, 'Cancelled by client request', as), {
      code: 'requested',
      jobId: `t.${tasks[1]!.taskId}.1`,
    });
    assert.deepEqual(await store.requestCancel(tasks[2]!.taskId, 'Cancelled by client request', as), {
      code: 'terminal',
      status: 'completed',
    });
    assert.deepEqual(await published(store.cancelChannel), [`t.${tasks[1]!.taskId}.1`]);
  });

  it("a synchronous call's disconnect (system caller, no owner) still cancels", async () => {
    const rec = await running({ mode: 'sync' });
    assert.deepEqual(await store.requestCancel(rec.taskId, 'Cancelled: the client closed the request'), {
      code: 'requested',
      jobId: `t.${rec.taskId}.1`,
    });
    await published(store.cancelChannel);
  });
});

describe('applyInputResponses with 100,000 keys (issue 10 §5)', () => {
  it('only outstanding keys reach the script: 100k unknown keys are ignored and write nothing; with the real key among them only it is stored', async (t) => {
    const rec = await parked({}, ['confirm.1', 'extra.1']);
    const flood: Record<string, unknown> = {};
    for (let i = 0; i < 100_000; i++) flood[`k${i}`] = { action: 'accept', content: { v: 'x'.repeat(20) } };
    const before = await snapshot(rec.taskId);
    let started = Date.now();
    assert.deepEqual(await store.applyInputResponses(rec.taskId, flood, { owner: ALICE, mode: 'task' }), {
      code: 'ignored',
      status: 'input_required',
    });
    const unknownMs = Date.now() - started;
    assert.deepEqual(await snapshot(rec.taskId), before, 'nothing written');

    started = Date.now();
    const r = await store.applyInputResponses(
      rec.taskId,
      { ...flood, 'confirm.1': { action: 'accept', content: { confirm: true } } },
      { owner: ALICE, mode: 'task' },
    );
    const mixedMs = Date.now() - started;
    assert.deepEqual(r, { code: 'partial', applied: 1 });
    const fields = Object.keys(await redis.hgetall(store.key(rec.taskId)));
    assert.deepEqual(
      fields.filter((f) => f.startsWith('resp:')),
      ['resp:confirm.1'],
      'only the outstanding key was stored',
    );
    assert.equal(
      fields.length,
      Object.keys(before.hash).length,
      'req:confirm.1 became resp:confirm.1; no other field appeared',
    );
    t.diagnostic(`100k unknown keys: ${unknownMs} ms; 100k + 1 real key: ${mixedMs} ms`);
    // Before the guard, 200k script arguments overflowed the JS call stack ("Maximum call stack
    // size exceeded"). The work is now one HKEYS and one small script call: well under a second
    // even on a busy machine; 5 s only catches a regression to per-key work in Redis.
    assert.ok(unknownMs < 5000 && mixedMs < 5000, `took ${unknownMs} / ${mixedMs} ms`);
  });
});
