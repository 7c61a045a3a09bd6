// @needs redis redis-server
/**
 * The worker's view of Redis continuity (apps/worker/src/redis-continuity.ts, issue 9 §6/§8):
 * Redis frozen for longer than `awayAfterMs` counts as away, and is back from when it answers
 * again; a stall of this process (its event loop blocked while a PING's reply waits on the
 * socket, as on a busy machine) does not count, or the reconciler's orphan check would keep
 * deferring the cancellation of a dead gateway's call (C-01). Real Redis: the shared one for the
 * stall, a throwaway one for the freeze (SIGSTOP / SIGCONT).
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { watchContinuity } from '../../apps/worker/src/redis-continuity.js';
import { startRedis, waitFor, type ThrowawayRedis } from '../support/cluster.js';

const SHARED = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

/** Blocks the event loop for `ms` (a starved or busy process). */
function stall(ms: number) {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    // busy
  }
}

describe('Redis continuity as a worker sees it', () => {
  const cleanup: (() => Promise<unknown> | void)[] = [];
  after(async () => {
    for (const f of cleanup.reverse()) await f();
  });

  it('a stall of this process while a PING is in flight is not an outage', async () => {
    const redis = new Redis(SHARED, { maxRetriesPerRequest: 1 });
    cleanup.push(() => redis.quit());
    await redis.ping();
    // Each of the first three PINGs the watch sends is followed at once by a 1.5 s stall, longer
    // than awayAfterMs (the shipped 1 s, so a shared Redis slowed by a busy machine is not taken
    // for an outage either): the reply reaches the socket during the stall, and the next timer
    // finds the PING overdue.
    let stalls = 0;
    const ping = redis.ping.bind(redis) as () => Promise<string>;
    (redis as unknown as { ping: () => Promise<string> }).ping = () => {
      const p = ping();
      if (stalls < 3) {
        stalls++;
        setImmediate(() => stall(1500));
      }
      return p;
    };
    const w = watchContinuity(redis, { everyMs: 100, awayAfterMs: 1000 });
    cleanup.push(() => w.stop());
    await waitFor(() => stalls === 3, 15_000, 20, 'three PINGs, each followed by a stall');
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(w.away, false);
    assert.equal(w.unbrokenForMs(), Infinity, 'never counted as away since the start');
  });

  it('Redis frozen (SIGSTOP) past awayAfterMs counts as away, and is back from its first answer after SIGCONT', async () => {
    const r: ThrowawayRedis = await startRedis();
    cleanup.push(() => r.stop());
    const redis = new Redis(r.url, { maxRetriesPerRequest: null });
    redis.on('error', () => undefined);
    cleanup.push(() => redis.disconnect());
    await redis.ping();
    const w = watchContinuity(redis, { everyMs: 100, awayAfterMs: 300 });
    cleanup.push(() => w.stop());
    assert.equal(w.unbrokenForMs(), Infinity);
    r.proc.kill('SIGSTOP');
    try {
      await waitFor(() => w.away, 3000, 20, 'the frozen Redis to count as away');
      assert.equal(w.unbrokenForMs(), 0);
      await new Promise((res) => setTimeout(res, 1000));
    } finally {
      r.proc.kill('SIGCONT');
    }
    const resumedAt = performance.now();
    await waitFor(() => !w.away, 3000, 20, 'Redis to count as back');
    const back = w.unbrokenForMs();
    assert.ok(
      back < performance.now() - resumedAt + 1,
      `unbroken for ${back} ms: counted from its answer after SIGCONT`,
    );
  });
});
