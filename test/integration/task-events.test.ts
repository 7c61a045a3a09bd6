// @needs redis
/**
 * Integration test of the task-channel watch a held synchronous call or listen stream waits on
 * (`TaskEvents.watch`, D5), against the shared Redis on a channel of this test's own prefix.
 *
 * The property case B-12e depends on: a message that arrives while the holder is not waiting
 * (it is reading the record or writing a frame) is kept for its next `wait()`, which then
 * returns at once. Lost, the holder would sleep until its backstop re-read (1 s for a
 * synchronous call) although the task had ended: the result up to 1 s late. The checks are
 * about order, not time: each `wait()` here that must return is given a 10-minute timeout, so
 * it can only return because of the message (or the abort) it is about.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { TaskEvents } from '@mcp-tasks/jobs';
import { SHARED_REDIS_URL, sleep, waitFor } from '../support/cluster.js';

/** Longer than any test: a wait given this returns only because of a message or an abort. */
const NEVER_MS = 600_000;

/** `'returned'` when `p` settles before `ms` elapse, else `'still waiting'` (p keeps running). */
const within = (p: Promise<unknown>, ms: number) =>
  Promise.race([p.then(() => 'returned'), sleep(ms).then(() => 'still waiting')]);

describe('TaskEvents.watch (D5): no message lost between two waits', () => {
  const prefix = `test-events-${randomBytes(4).toString('hex')}`;
  let sub: Redis;
  let pub: Redis;
  let events: TaskEvents;
  let n = 0;
  /** A fresh channel per test. */
  const channel = () => `${prefix}:task:${++n}`;
  /** Publishes on `ch` and resolves once this process's subscriber has received the message. */
  async function deliver(ch: string): Promise<void> {
    let got = 0;
    const stop = await events.listen(ch, () => got++);
    await pub.publish(ch, 'completed');
    await waitFor(() => got > 0, 10_000, 5, `the message on ${ch}`);
    await stop();
  }

  before(async () => {
    sub = new Redis(SHARED_REDIS_URL, { maxRetriesPerRequest: 1 });
    pub = new Redis(SHARED_REDIS_URL, { maxRetriesPerRequest: 1 });
    events = new TaskEvents(sub);
  });
  after(() => {
    sub?.disconnect();
    pub?.disconnect();
  });

  it('a message that arrived while nobody waited makes the next wait() return at once, once', async () => {
    const ch = channel();
    const w = await events.watch(ch);
    const end = new AbortController(); // ends the waits this test leaves behind
    try {
      await deliver(ch); // arrives between two waits (the holder is busy reading)
      assert.equal(
        await within(w.wait(NEVER_MS, end.signal), 10_000),
        'returned',
        'the message was kept for the next wait',
      );
      // Consumed: the wait after it blocks until something new happens.
      const next = w.wait(NEVER_MS, end.signal);
      assert.equal(await within(next, 300), 'still waiting', 'one message wakes one wait');
      await pub.publish(ch, 'completed');
      assert.equal(await within(next, 10_000), 'returned', 'a message during a wait wakes it');
    } finally {
      end.abort();
      await w.close();
    }
  });

  it('several messages between two waits wake the next wait once; the timeout and an abort end a wait without one', async () => {
    const ch = channel();
    const w = await events.watch(ch);
    const end = new AbortController();
    try {
      await deliver(ch);
      await deliver(ch);
      assert.equal(await within(w.wait(NEVER_MS, end.signal), 10_000), 'returned');
      const ac = new AbortController();
      const second = w.wait(NEVER_MS, AbortSignal.any([ac.signal, end.signal]));
      assert.equal(await within(second, 300), 'still waiting', 'the two messages woke one wait');
      ac.abort();
      assert.equal(await within(second, 10_000), 'returned', 'the abort ends the wait');
      assert.equal(await within(w.wait(20), 10_000), 'returned', 'the timeout ends a wait with no message');
    } finally {
      end.abort();
      await w.close();
    }
  });

  it('close() drops the subscription when it was the channel’s last listener', async () => {
    const ch = channel();
    const [a, b] = [await events.watch(ch), await events.watch(ch)];
    const subscribers = async () => Number(((await pub.pubsub('NUMSUB', ch)) as [string, number])[1]);
    assert.equal(await subscribers(), 1, 'one SUBSCRIBE for both watches');
    await a.close();
    assert.equal(await subscribers(), 1, 'b still listens');
    await deliver(ch);
    const end = new AbortController();
    assert.equal(await within(b.wait(NEVER_MS, end.signal), 10_000), 'returned');
    end.abort();
    await b.close();
    assert.equal(await subscribers(), 0);
  });
});
