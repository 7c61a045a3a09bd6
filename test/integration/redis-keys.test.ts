// @needs redis
/**
 * The tests' cleanup on the shared Redis (test/support/redis-keys.ts): it lists and deletes the
 * keys under `<prefix>:` and nothing else, not even the keys of a prefix that merely starts
 * the same way (another run's `test-ab12` beside this one's `test-ab1`).
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { SHARED_REDIS_URL } from '../support/cluster.js';
import { deleteKeysUnder, keysUnder } from '../support/redis-keys.js';

describe('keysUnder / deleteKeysUnder', () => {
  const redis = new Redis(SHARED_REDIS_URL, { maxRetriesPerRequest: 1 });
  const prefix = `test-keys-${randomBytes(4).toString('hex')}`;
  const sibling = `${prefix}x`; // starts like `prefix`, is another prefix
  after(async () => {
    await redis.del(`${sibling}:a`, prefix);
    redis.disconnect();
  });

  it('list and delete exactly the keys under <prefix>: (1,200 of them: more than one SCAN page and one DEL)', async () => {
    const mine = Array.from({ length: 1200 }, (_, i) => `${prefix}:{t:${i}}:task`);
    for (let i = 0; i < mine.length; i += 400) {
      const batch = redis.pipeline();
      for (const k of mine.slice(i, i + 400)) batch.set(k, '1', 'EX', 300);
      await batch.exec();
    }
    await redis.set(`${sibling}:a`, '1', 'EX', 300);
    await redis.set(prefix, '1', 'EX', 300); // the bare prefix is not under it either
    assert.deepEqual(await keysUnder(redis, prefix), [...mine].sort());
    assert.equal(await deleteKeysUnder(redis, prefix), 1200);
    assert.deepEqual(await keysUnder(redis, prefix), []);
    assert.equal(await redis.exists(`${sibling}:a`, prefix), 2, "another prefix's keys are left alone");
    assert.equal(await deleteKeysUnder(redis, prefix), 0, 'nothing left: nothing deleted');
  });
});
