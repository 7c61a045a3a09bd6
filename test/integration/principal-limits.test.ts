// @needs redis
/**
 * Integration tests of the per-principal worker share (MAX_RUNNING_STEPS_PER_PRINCIPAL, design
 * D9, case N-08) and the budget of stored result bytes (MAX_RESULT_BYTES_PER_PRINCIPAL, case
 * N-09): `PrincipalShares` (`enterShare-3`, `renewShare-2`, `leaveShare-3`, `noteWaiting-1`) and
 * `ResultBudget` (`reserveResultBytes-2`, `releaseResultBytes-2`), against the real shared Redis.
 * Two store instances on separate connections stand for two workers. Times are passed in, so
 * lease and result expiry are tested without waiting.
 *
 * Every key starts with this file's random prefix; only those keys are deleted at the end.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { newTaskId, PrincipalShares, ResultBudget, stepJobId, TaskStore } from '@mcp-tasks/task-store';
import { deleteKeysUnder, keysUnder } from '../support/redis-keys.js';

const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const PREFIX = `unit-${randomBytes(8).toString('hex')}`;
const HOUR = 3_600_000;
const LEASE = 10_000;

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

describe("a principal's share of the workers (PrincipalShares)", () => {
  it('admits up to the limit across two workers; the next waits, in line, without a lease; other principals are unaffected', async () => {
    const a = principal('alice');
    const w1 = new PrincipalShares(store, 2, LEASE);
    const w2 = new PrincipalShares(store2, 2, LEASE);
    const [t1, t2, t3, t4] = [newTaskId(), newTaskId(), newTaskId(), newTaskId()];
    const now = Date.now();
    assert.deepEqual(await w1.enter(a, t1, stepJobId(t1, 1), 'tok1', now), {
      admitted: true,
      running: 1,
      waited: false,
    });
    assert.deepEqual(await w2.enter(a, t2, stepJobId(t2, 1), 'tok2', now), {
      admitted: true,
      running: 2,
      waited: false,
    });
    assert.deepEqual(await w1.enter(a, t3, stepJobId(t3, 1), 'tok3', now), {
      admitted: false,
      running: 2,
      rank: 0,
      first: true,
    });
    assert.deepEqual(await w2.enter(a, t4, stepJobId(t4, 1), 'tok4', now + 1), {
      admitted: false,
      running: 2,
      rank: 1,
      first: true,
    });
    // Asking again keeps its place (and says it is not the first time).
    assert.deepEqual(await w1.enter(a, t3, stepJobId(t3, 1), 'tok3b', now + 5), {
      admitted: false,
      running: 2,
      rank: 0,
      first: false,
    });
    assert.equal(await w1.running(a, now), 2);
    assert.deepEqual(await w1.waiting(a), [stepJobId(t3, 1), stepJobId(t4, 1)]);
    const b = principal('bob');
    assert.equal((await w1.enter(b, newTaskId(), 'job-b', 'tokb', now)).admitted, true, 'bob has his own share');
    // Every key of the principal expires.
    for (const key of Object.values(w1.keys(a))) assert.ok((await redis.pttl(key)) > 0, `${key} expires`);
  });

  it('leave drops the lease and names the waiting steps to wake, as many as shares are free; a woken step keeps its place until admitted', async () => {
    const a = principal('alice');
    const s = new PrincipalShares(store, 2, LEASE);
    const ids = Array.from({ length: 5 }, () => newTaskId());
    const now = Date.now();
    for (const [i, id] of ids.entries()) await s.enter(a, id, stepJobId(id, 1), `tok${i}`, now + i);
    assert.deepEqual(await s.leave(a, ids[0]!, 'tok0', now + 10), [stepJobId(ids[2]!, 1)]);
    // A second one ends before the woken step is admitted: both the first in line and the next are named.
    assert.deepEqual(await s.leave(a, ids[1]!, 'tok1', now + 11), [stepJobId(ids[2]!, 1), stepJobId(ids[3]!, 1)]);
    const admitted = await s.enter(a, ids[2]!, stepJobId(ids[2]!, 1), 'tok2b', now + 12);
    assert.deepEqual(admitted, { admitted: true, running: 1, waited: true });
    assert.deepEqual(await s.waiting(a), [stepJobId(ids[3]!, 1), stepJobId(ids[4]!, 1)]);
  });

  it('a re-run of the same step (another token) takes the lease over and counts once; the stale run neither renews nor drops it', async () => {
    const a = principal('alice');
    const s = new PrincipalShares(store, 2, LEASE);
    const t = newTaskId();
    const now = Date.now();
    await s.enter(a, t, stepJobId(t, 1), 'first-run', now);
    assert.deepEqual(await s.enter(a, t, stepJobId(t, 1), 're-run', now + 100), {
      admitted: true,
      running: 1,
      waited: false,
    });
    assert.equal(await s.renew(a, t, 'first-run', now + 200), false, 'the stale run stops renewing');
    await s.leave(a, t, 'first-run', now + 300);
    assert.equal(await s.running(a, now + 300), 1, "the stale run's leave left the re-run's lease");
    assert.equal(await s.renew(a, t, 're-run', now + 400), true);
    await s.leave(a, t, 're-run', now + 500);
    assert.equal(await s.running(a, now + 500), 0);
  });

  it("a lease that is not renewed lapses (its worker died): the next step is admitted after the lease's lifetime, not before", async () => {
    const a = principal('alice');
    const s = new PrincipalShares(store, 1, LEASE);
    const [dead, next] = [newTaskId(), newTaskId()];
    const now = Date.now();
    await s.enter(a, dead, stepJobId(dead, 1), 'killed', now);
    assert.equal((await s.enter(a, next, stepJobId(next, 1), 'n', now + LEASE - 1)).admitted, false);
    assert.deepEqual(await s.enter(a, next, stepJobId(next, 1), 'n', now + LEASE + 1), {
      admitted: true,
      running: 1,
      waited: true,
    });
    // A renewal keeps a lease alive past its first expiry.
    const [kept, blocked] = [newTaskId(), newTaskId()];
    const b = principal('bob');
    await s.enter(b, kept, stepJobId(kept, 1), 'k', now);
    assert.equal(await s.renew(b, kept, 'k', now + LEASE - 100), true);
    assert.equal((await s.enter(b, blocked, stepJobId(blocked, 1), 'x', now + LEASE + 1)).admitted, false);
  });

  it('noteWaiting writes the statusMessage only while the step is unclaimed and working', async () => {
    const s = new PrincipalShares(store, 1, LEASE);
    const t = newTaskId();
    await store.create(
      { owner: 'key:x', tool: 'slow_echo', args: {}, mode: 'task', ttlMs: HOUR, pollIntervalMs: 1000 },
      t,
    );
    assert.equal(await s.noteWaiting(t, 1, 'Queued'), true);
    assert.equal((await store.get(t))!.statusMessage, 'Queued');
    assert.equal(await s.noteWaiting(t, 2, 'other step'), false);
    const claim = await store.claimStep(t, 1, 'tok');
    assert.equal(claim.code, 'ok');
    assert.equal(await s.noteWaiting(t, 1, 'too late'), false, 'a claimed step keeps its own message');
    assert.equal(await s.noteWaiting(newTaskId(), 1, 'gone'), false, 'no key is created for an unknown task');
    assert.deepEqual(await s.subject(t), { owner: 'key:x', status: 'working', step: 1, cancelRequested: false });
  });
});

describe("a principal's budget of stored result bytes (ResultBudget)", () => {
  /** A task record of `owner` created at `createdAt` living `ttlMs`. */
  async function task(owner: string, createdAt = Date.now(), ttlMs = HOUR): Promise<string> {
    const id = newTaskId();
    await store.create(
      { owner, tool: 'big_result', args: {}, mode: 'task', ttlMs, pollIntervalMs: 1000 },
      id,
      createdAt,
    );
    return id;
  }

  it('counts results up to the budget across two workers, refuses the one that does not fit without writing, and counts a task once', async () => {
    const a = principal('alice');
    const w1 = new ResultBudget(store, 1000);
    const w2 = new ResultBudget(store2, 1000);
    const [t1, t2, t3] = [await task(a), await task(a), await task(a)];
    const now = Date.now();
    assert.deepEqual(await w1.reserve(a, t1, 400, now), { ok: true, storedBytes: 400 });
    assert.deepEqual(await w2.reserve(a, t2, 500, now), { ok: true, storedBytes: 900 });
    const refused = await w1.reserve(a, t3, 101, now);
    assert.equal(refused.ok, false);
    assert.equal(refused.storedBytes, 900);
    assert.ok(!refused.ok && refused.oldestExpiresAt > now + HOUR - 60_000, 'the oldest expiry is reported');
    assert.equal(await w1.stored(a), 900, 'a refusal counts nothing');
    // The same task counted again (its step re-ran) replaces its size.
    assert.deepEqual(await w2.reserve(a, t2, 600, now), { ok: true, storedBytes: 1000 });
    await w1.release(a, t1);
    assert.equal(await w1.stored(a), 600);
    await w1.release(a, t1);
    assert.equal(await w1.stored(a), 600, 'release is idempotent');
    const b = principal('bob');
    assert.equal((await w1.reserve(b, await task(b), 1000, now)).ok, true, 'bob has his own budget');
    for (const key of Object.values(w1.keys(a))) assert.ok((await redis.pttl(key)) > 0, `${key} expires`);
  });

  it('forgets a result once its task expired (Redis dropped it without telling anyone)', async () => {
    const a = principal('alice');
    const budget = new ResultBudget(store, 1000);
    const created = Date.now();
    const short = await task(a, created, 5_000);
    const long = await task(a, created);
    assert.equal((await budget.reserve(a, short, 800, created)).ok, true);
    assert.equal((await budget.reserve(a, long, 300, created + 4_999)).ok, false, 'still stored');
    assert.deepEqual(await budget.reserve(a, long, 300, created + 5_001), { ok: true, storedBytes: 300 });
  });

  it('a refusal repairs reservations whose result was never stored (the task failed or was cancelled after counting)', async () => {
    const a = principal('alice');
    const budget = new ResultBudget(store, 1000);
    const [lost, next] = [await task(a), await task(a)];
    assert.equal((await budget.reserve(a, lost, 900)).ok, true);
    // The worker counted the result, then the task ended otherwise and the release was lost.
    assert.equal((await store.requestCancel(lost)).code, 'cancelled');
    assert.deepEqual(await budget.reserve(a, next, 500), { ok: true, storedBytes: 500 });
  });
});
