// @needs redis
/**
 * Integration tests of `TaskStore.createReserved` (`createReserved-4.lua`): a new task's slot
 * among its principal's outstanding tasks, its record and its reconciler index entry written in
 * one script (single Redis and Sentinel only; the gateway never uses it under Cluster), against
 * the real shared Redis. Asserted: the record is exactly what `create` writes, with the same
 * expiry, and the slot and the index entry are those `reserveOutstanding` and
 * `scheduleReconcile` write; at the limit nothing is written (no record, no slot, no index
 * entry); a taken id keeps nothing and throws `TaskIdTakenError`.
 *
 * Every key starts with this file's random prefix; only those keys are deleted at the end.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { newTaskId, TaskIdTakenError, TaskStore, type CreateTaskInput } from '@mcp-tasks/task-store';
import { deleteKeysUnder } from '../support/redis-keys.js';

const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const PREFIX = `unit-${randomBytes(8).toString('hex')}`;
const HOUR = 3_600_000;
const RECONCILE = { afterMs: 10_000, maxTtlMs: HOUR };

let redis: Redis;
let store: TaskStore;

const principal = (name: string) => `key:${name}-${randomBytes(4).toString('hex')}`;
const input = (owner: string): CreateTaskInput => ({
  owner,
  tool: 'slow_echo',
  args: { text: 'hi' },
  mode: 'task',
  ttlMs: HOUR,
  pollIntervalMs: 1000,
  clientCapabilities: { extensions: { 'io.modelcontextprotocol/tasks': {} } },
  statusMessage: 'Waiting for a worker',
  trace: { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' },
});

before(async () => {
  redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
  store = new TaskStore(redis, PREFIX);
});

after(async () => {
  await deleteKeysUnder(redis, PREFIX);
  await redis.quit();
});

describe('createReserved: slot, record and reconciler index in one script', () => {
  it('writes what reserveOutstanding, create and scheduleReconcile write, with the same expiries', async () => {
    const p = principal('alice');
    const now = Date.now();
    const [a, b] = [newTaskId(), newTaskId()];
    const r = await store.createReserved(input(p), a, 5, RECONCILE, now);
    assert.equal(r.ok, true);
    assert.equal(r.count, 1);
    // The same task written the usual way, for comparison.
    assert.deepEqual(await store.reserveOutstanding(p, b, 5, now + HOUR, now), { ok: true, count: 2 });
    const made = await store.create(input(p), b, now);
    await store.scheduleReconcile(b, RECONCILE.afterMs, RECONCILE.maxTtlMs, now);
    assert.deepEqual(r.ok && r.rec, { ...made, taskId: a });
    assert.deepEqual(await redis.hgetall(store.key(a)), await redis.hgetall(store.key(b)));
    assert.equal(await redis.pexpiretime(store.key(a)), now + HOUR);
    assert.equal(await redis.pexpiretime(store.key(a)), await redis.pexpiretime(store.key(b)));
    const { outstanding, since } = store.outstandingKeys(p);
    assert.equal(Number(await redis.zscore(outstanding, a)), now + HOUR);
    assert.equal(Number(await redis.zscore(since, a)), now);
    assert.equal(Number(await redis.zscore(store.reconcileKey, a)), now + RECONCILE.afterMs);
    assert.ok((await redis.pttl(store.reconcileKey)) > HOUR, 'the index expires (a day past the longest TTL)');
    assert.deepEqual(await store.get(a), { ...(await store.get(b))!, taskId: a });
  });

  it('at the limit writes nothing: no record, no slot, no index entry', async () => {
    const p = principal('bob');
    const now = Date.now();
    assert.equal((await store.createReserved(input(p), newTaskId(), 1, RECONCILE, now)).ok, true);
    const id = newTaskId();
    assert.deepEqual(await store.createReserved(input(p), id, 1, RECONCILE, now), { ok: false, count: 1 });
    assert.equal(await redis.exists(store.key(id)), 0);
    assert.equal(await redis.zscore(store.outstandingKeys(p).outstanding, id), null);
    assert.equal(await redis.zscore(store.reconcileKey, id), null);
  });

  it('a taken id throws TaskIdTakenError and keeps no slot; the existing record is untouched', async () => {
    const p = principal('carol');
    const id = newTaskId();
    await store.create({ ...input(p), tool: 'other' }, id);
    const before = await redis.hgetall(store.key(id));
    await assert.rejects(store.createReserved(input(p), id, 5, RECONCILE), TaskIdTakenError);
    assert.deepEqual(await redis.hgetall(store.key(id)), before);
    assert.equal(await redis.zscore(store.outstandingKeys(p).outstanding, id), null);
  });
});
