// @needs redis
/**
 * Integration tests of the per-principal outstanding-task count (MAX_OUTSTANDING_TASKS, issue
 * 10 §4): `TaskStore.reserveOutstanding` / `releaseOutstanding` / `repairOutstanding` and
 * `reserveOutstanding-2.lua`, and of the listen-stream leases (MAX_LISTEN_STREAMS_PER_PRINCIPAL:
 * `acquireListenLease`, `acquireLease-1.lua`), against the real shared Redis. Two TaskStore
 * instances on separate connections stand for two gateway replicas.
 *
 * Every key starts with this file's random prefix; only those keys are deleted at the end.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { newTaskId, OUTSTANDING_CREATE_GRACE_MS, OUTSTANDING_REPAIR_EVERY_MS, TaskStore } from '@mcp-tasks/task-store';
import { deleteKeysUnder, keysUnder } from '../support/redis-keys.js';

const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const PREFIX = `unit-${randomBytes(8).toString('hex')}`;
const HOUR = 3_600_000;

let redis: Redis;
let other: Redis;
let store: TaskStore;
/** A second replica: its own connection. */
let store2: TaskStore;

/** A fresh principal per test (the repair throttle is per principal). */
const principal = (name: string) => `key:${name}-${randomBytes(4).toString('hex')}`;

/** This file's keys, sorted. */
const prefixKeys = () => keysUnder(redis, PREFIX);

/** A task record of `owner` with id `taskId` (as the gateway writes it after the reservation). */
async function record(owner: string, taskId: string) {
  await store.create({ owner, tool: 'slow_echo', args: {}, mode: 'task', ttlMs: HOUR, pollIntervalMs: 1000 }, taskId);
}

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

describe('reserveOutstanding / releaseOutstanding', () => {
  it('counts up to the limit, refuses the next one without creating a key, and counts an id already reserved once', async () => {
    const p = principal('alice');
    const now = Date.now();
    const ids = Array.from({ length: 4 }, () => newTaskId());
    for (let i = 0; i < 3; i++)
      assert.deepEqual(await store.reserveOutstanding(p, ids[i]!, 3, now + HOUR), { ok: true, count: i + 1 });
    const keysBefore = await prefixKeys();
    assert.deepEqual(await store.reserveOutstanding(p, ids[3]!, 3, now + HOUR), { ok: false, count: 3 });
    assert.deepEqual(await prefixKeys(), keysBefore, 'a refused reservation creates no key');
    assert.equal(await redis.zscore(store.outstandingKeys(p).outstanding, ids[3]!), null);
    assert.deepEqual(
      await store.reserveOutstanding(p, ids[0]!, 3, now + HOUR),
      { ok: true, count: 3 },
      'the same id again: already counted',
    );
    assert.equal(await store.outstandingCount(p), 3);

    await store.releaseOutstanding(p, ids[1]!);
    await store.releaseOutstanding(p, ids[1]!); // idempotent
    assert.equal(await store.outstandingCount(p), 2);
    assert.deepEqual(await store.reserveOutstanding(p, ids[3]!, 3, now + HOUR), { ok: true, count: 3 });
  });

  it('the key hashes the principal (a 2 kB JWT principal gives a short key), and both keys expire with the latest task', async () => {
    const p = `jwt:https://issuer.example/${'x'.repeat(2000)}#user-1`;
    const keys = store.outstandingKeys(p);
    const hash = createHash('sha256').update(p).digest('hex');
    assert.equal(keys.outstanding, `${PREFIX}:{p:${hash}}:outstanding`);
    assert.equal(keys.since, `${PREFIX}:{p:${hash}}:outstanding:since`);
    const now = Date.now();
    await store.reserveOutstanding(p, newTaskId(), 10, now + 2 * HOUR);
    await store.reserveOutstanding(p, newTaskId(), 10, now + HOUR);
    for (const k of [keys.outstanding, keys.since]) {
      assert.equal(Number(await redis.call('PEXPIRETIME', k)), now + 2 * HOUR, `${k} expires with its latest member`);
    }
    // Another principal has its own count.
    assert.deepEqual(await store.reserveOutstanding(principal('bob'), newTaskId(), 1, now + HOUR), {
      ok: true,
      count: 1,
    });
  });

  it('a task whose expiry has passed no longer counts (its record is gone)', async () => {
    const p = principal('carol');
    const now = Date.now();
    const short = newTaskId();
    await store.reserveOutstanding(p, short, 2, now + 60_000, now);
    await store.reserveOutstanding(p, newTaskId(), 2, now + HOUR, now);
    // 61 s later the first one has expired: the slot is free without any release.
    assert.deepEqual(await store.reserveOutstanding(p, newTaskId(), 2, now + HOUR, now + 61_000), {
      ok: true,
      count: 2,
    });
    assert.equal(await redis.zscore(store.outstandingKeys(p).outstanding, short), null);
    assert.equal(await redis.zscore(store.outstandingKeys(p).since, short), null);
  });

  it('race: 200 concurrent reservations at the limit on two replicas: exactly `limit` pass, never more', async () => {
    for (const limit of [1, 10, 50]) {
      const p = principal(`race${limit}`);
      const results = await Promise.all(
        Array.from({ length: 200 }, (_, i) =>
          (i % 2 ? store2 : store).reserveOutstanding(p, newTaskId(), limit, Date.now() + HOUR),
        ),
      );
      const passed = results.filter((r) => r.ok);
      assert.equal(passed.length, limit, `limit ${limit}: ${passed.length} passed`);
      assert.deepEqual(
        passed.map((r) => r.count).sort((a, b) => a - b),
        Array.from({ length: limit }, (_, i) => i + 1),
        'each pass saw its own count',
      );
      for (const r of results.filter((x) => !x.ok)) assert.equal(r.count, limit);
      assert.equal(await redis.zcard(store.outstandingKeys(p).outstanding), limit);
    }
    // At limit - 1, two replicas at once: one passes.
    for (let round = 0; round < 20; round++) {
      const p = principal(`pair${round}`);
      for (let i = 0; i < 4; i++) await store.reserveOutstanding(p, newTaskId(), 5, Date.now() + HOUR);
      const pair = await Promise.all(
        [store, store2].map((s) => s.reserveOutstanding(p, newTaskId(), 5, Date.now() + HOUR)),
      );
      assert.equal(pair.filter((r) => r.ok).length, 1, `round ${round}: ${JSON.stringify(pair)}`);
    }
  });
});

describe('repair of lost releases', () => {
  it('at the limit, members whose task is terminal are dropped and the reservation goes through', async () => {
    const p = principal('dave');
    const ids = [newTaskId(), newTaskId(), newTaskId()];
    for (const id of ids) {
      assert.equal((await store.reserveOutstanding(p, id, 3, Date.now() + HOUR)).ok, true);
      await record(p, id);
    }
    // Task 0 failed and task 1 was cancelled, but both releases were lost (a crash after the write).
    assert.equal((await store.fail(ids[0]!, {}, { code: -32603, message: 'x' }, 'x')).code, 'ok');
    assert.equal((await store.requestCancel(ids[1]!)).code, 'cancelled');
    const next = newTaskId();
    assert.deepEqual(await store.reserveOutstanding(p, next, 3, Date.now() + HOUR), { ok: true, count: 2 });
    const members = await redis.zrange(store.outstandingKeys(p).outstanding, '0', '-1');
    assert.deepEqual(members.sort(), [ids[2]!, next].sort(), 'the terminal ones were dropped, the live one kept');
  });

  it('a member without a record is kept while its creation may be on its way, dropped after OUTSTANDING_CREATE_GRACE_MS', async () => {
    const p = principal('erin');
    const now = Date.now();
    const crashed = newTaskId(); // reserved by a gateway that died before writing the record
    await store.reserveOutstanding(p, crashed, 2, now + HOUR, now - OUTSTANDING_CREATE_GRACE_MS - 1000);
    const inFlight = newTaskId(); // reserved just now; its record is about to be written
    await store.reserveOutstanding(p, inFlight, 2, now + HOUR, now);
    assert.deepEqual(await store.reserveOutstanding(p, newTaskId(), 2, now + HOUR, now), { ok: true, count: 2 });
    const members = await redis.zrange(store.outstandingKeys(p).outstanding, '0', '-1');
    assert.ok(members.includes(inFlight), 'an in-flight creation keeps its slot');
    assert.ok(!members.includes(crashed), 'the abandoned reservation was dropped');
  });

  it('repairs run at most once per OUTSTANDING_REPAIR_EVERY_MS per principal (a flood at the limit costs one check per interval)', async () => {
    const p = principal('frank');
    const now = Date.now();
    const ids = [newTaskId(), newTaskId()];
    for (const id of ids) {
      await store.reserveOutstanding(p, id, 2, now + HOUR, now);
      await record(p, id);
    }
    // Nothing to repair yet: the refusal spends this interval's repair.
    assert.deepEqual(await store.reserveOutstanding(p, newTaskId(), 2, now + HOUR, now), { ok: false, count: 2 });
    await store.fail(ids[0]!, {}, { code: -32603, message: 'x' }, 'x'); // its release is lost
    assert.deepEqual(
      await store.reserveOutstanding(p, newTaskId(), 2, now + HOUR, now + 1000),
      { ok: false, count: 2 },
      'within the interval: no repair',
    );
    assert.deepEqual(
      await store.reserveOutstanding(p, newTaskId(), 2, now + HOUR, now + OUTSTANDING_REPAIR_EVERY_MS),
      { ok: true, count: 2 },
      'next interval: repaired',
    );
  });

  it('records of another principal are never counted or dropped (the zset is per principal)', async () => {
    const a = principal('gina');
    const b = principal('hank');
    const idA = newTaskId();
    await store.reserveOutstanding(a, idA, 1, Date.now() + HOUR);
    await record(a, idA);
    assert.deepEqual(await store.reserveOutstanding(b, newTaskId(), 1, Date.now() + HOUR), { ok: true, count: 1 });
    assert.deepEqual(await store.reserveOutstanding(a, newTaskId(), 1, Date.now() + HOUR), { ok: false, count: 1 });
    assert.equal(await store.outstandingCount(a), 1);
  });
});

describe('acquireListenLease (MAX_LISTEN_STREAMS_PER_PRINCIPAL)', () => {
  it('counts leases across replicas up to the limit; a refusal tells the ms until the earliest lease ends unless renewed, writes nothing; an expired lease stops counting', async () => {
    const p = principal('listen');
    const t0 = Date.now();
    const TTL = 45_000;
    assert.equal(await store.acquireListenLease(p, 'a', 2, TTL, t0), 1);
    assert.equal(await store2.acquireListenLease(p, 'b', 2, TTL, t0 + 10_000), 2);
    // 30 s on: lease a (no renewal: its gateway died) ends in 15 s.
    const before = await redis.zrange(store.listenKey(p), '0', '-1', 'WITHSCORES');
    assert.equal(await store.acquireListenLease(p, 'c', 2, TTL, t0 + 30_000), -15_000);
    assert.deepEqual(
      await redis.zrange(store.listenKey(p), '0', '-1', 'WITHSCORES'),
      before,
      'a refusal writes nothing',
    );
    // Renewing a is not a new lease, and moves its end: the wait is then b's.
    assert.equal(await store.acquireListenLease(p, 'a', 2, TTL, t0 + 30_000), 2);
    assert.equal(await store.acquireListenLease(p, 'c', 2, TTL, t0 + 40_000), -15_000);
    // A lease within its last millisecond still counts, and the wait is at least 1 ms.
    assert.equal(await store.acquireListenLease(p, 'c', 2, TTL, t0 + 54_999), -1);
    // b expired unrenewed at t0 + 55 s: c takes its place.
    assert.equal(await store.acquireListenLease(p, 'c', 2, TTL, t0 + 55_000), 2);
    await store.releaseListenLease(p, 'a');
    assert.equal(await store.acquireListenLease(p, 'd', 2, TTL, t0 + 55_001), 2);
  });
});
