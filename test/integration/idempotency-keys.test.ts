// @needs redis
/**
 * Integration tests of the Idempotency-Key store (packages/task-store idempotency.ts,
 * `claimIdempotencyKey-3.lua`, `releaseIdempotencyKey-1.lua`) against the real shared Redis:
 * the claim and the outstanding slot are taken together or not at all, a taken key or a full
 * principal writes nothing, concurrent claims on two connections give one winner, a dead claim
 * is taken over only by a request naming it, a release frees only the task it names, and the key
 * expires with its task.
 *
 * Every key starts with this file's random prefix; only those keys are deleted at the end.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { fingerprintOf, newTaskId, TaskStore } from '@mcp-tasks/task-store';
import { deleteKeysUnder, keysUnder } from '../support/redis-keys.js';

const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const PREFIX = `unit-${randomBytes(8).toString('hex')}`;
const HOUR = 3_600_000;

let redis: Redis;
let other: Redis;
let store: TaskStore;
let store2: TaskStore;

const principal = (name: string) => `key:${name}-${randomBytes(4).toString('hex')}`;

/** This file's keys, sorted. */
const prefixKeys = () => keysUnder(redis, PREFIX);

before(async () => {
  redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
  other = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
  store = new TaskStore(redis, PREFIX);
  store2 = new TaskStore(other, PREFIX);
});

after(async () => {
  await deleteKeysUnder(redis, PREFIX);
  await Promise.all([redis.quit(), other.quit()]);
});

describe('IdempotencyKeys', () => {
  it('a claim writes the key and the slot with the task expiry; the same key then reads back, in the principal slot', async () => {
    const p = principal('alice');
    const fp = fingerprintOf('slow_echo', { seconds: 1 });
    const taskId = newTaskId();
    const now = Date.now();
    const r = await store.idempotency.claim(p, 'k-1', fp, taskId, 10, now + HOUR, now);
    assert.deepEqual(r, { code: 'ok', count: 1 });
    assert.deepEqual(await store2.idempotency.find(p, 'k-1'), { taskId, fp, at: now });
    const key = store.idempotency.keyOf(p, 'k-1');
    assert.equal(await redis.pexpiretime(key), now + HOUR, 'expires with the task');
    assert.ok(key.startsWith(store.outstandingKeys(p).outstanding.split('}:')[0]! + '}:'), 'same hash tag');
    assert.equal(await redis.zscore(store.outstandingKeys(p).outstanding, taskId), String(now + HOUR), 'slot taken');
    assert.equal(await store.idempotency.find(principal('bob'), 'k-1'), null, 'another principal: no key');
  });

  it('a taken key and a full principal write nothing', async () => {
    const p = principal('carol');
    const now = Date.now();
    const first = newTaskId();
    await store.idempotency.claim(p, 'k', 'fp-a', first, 1, now + HOUR, now);
    const before = await prefixKeys();
    const taken = await store.idempotency.claim(p, 'k', 'fp-b', newTaskId(), 1, now + HOUR, now);
    assert.deepEqual(taken, { code: 'taken', entry: { taskId: first, fp: 'fp-a', at: now } });
    const full = await store.idempotency.claim(p, 'k-2', 'fp-a', newTaskId(), 1, now + HOUR, now);
    assert.equal(full.code, 'full');
    assert.equal(await store.idempotency.find(p, 'k-2'), null, 'no key for a refused claim');
    assert.deepEqual(await prefixKeys(), before);
    assert.equal(await redis.zcard(store.outstandingKeys(p).outstanding), 1, 'no slot for a refused claim');
  });

  it('20 concurrent claims of one key on two connections: exactly one wins, the rest see its task', async () => {
    const p = principal('dave');
    const now = Date.now();
    const ids = Array.from({ length: 20 }, () => newTaskId());
    const results = await Promise.all(
      ids.map((id, i) => (i % 2 ? store : store2).idempotency.claim(p, 'race', 'fp', id, 100, now + HOUR, now)),
    );
    const winners = results.filter((r) => r.code === 'ok');
    assert.equal(winners.length, 1);
    const winner = ids[results.findIndex((r) => r.code === 'ok')]!;
    for (const r of results) if (r.code === 'taken') assert.equal(r.entry.taskId, winner);
    assert.equal(await redis.zcard(store.outstandingKeys(p).outstanding), 1, 'one slot');
  });

  it('a dead claim is taken over only by a request naming it; a release frees only the task it names', async () => {
    const p = principal('erin');
    const now = Date.now();
    const dead = newTaskId();
    await store.idempotency.claim(p, 'k', 'fp', dead, 10, now + HOUR, now);
    const next = newTaskId();
    const wrong = await store.idempotency.claim(p, 'k', 'fp', next, 10, now + HOUR, now + 6000, newTaskId());
    assert.equal(wrong.code, 'taken', 'naming another task: no take-over');
    const over = await store.idempotency.claim(p, 'k', 'fp', next, 10, now + HOUR + 6000, now + 6000, dead);
    assert.equal(over.code, 'ok');
    assert.equal((await store.idempotency.find(p, 'k'))?.taskId, next);
    assert.equal(await store.idempotency.release(p, 'k', dead), false, 'the old task no longer owns the key');
    assert.equal((await store.idempotency.find(p, 'k'))?.taskId, next);
    assert.equal(await store.idempotency.release(p, 'k', next), true);
    assert.equal(await store.idempotency.find(p, 'k'), null);
  });

  it('the fingerprint tells calls apart by tool and arguments', () => {
    assert.equal(fingerprintOf('a', { x: 1 }), fingerprintOf('a', { x: 1 }));
    assert.notEqual(fingerprintOf('a', { x: 1 }), fingerprintOf('a', { x: 2 }));
    assert.notEqual(fingerprintOf('a', { x: 1 }), fingerprintOf('b', { x: 1 }));
    assert.equal(fingerprintOf('a', undefined), fingerprintOf('a', {}));
  });
});
