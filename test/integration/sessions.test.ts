// @needs redis
/**
 * The 2025-era session store (apps/gateway/src/sessions.ts, design D15) against a real Redis
 * (the shared one, own prefix): idle expiry renewed by use, the principal binding (LG-07: another
 * principal's lookup writes nothing and is "not found"), ending returns the in-flight calls, the
 * per-session request ids, and every key it writes carries an expiry.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { SessionStore, sessionCapabilities } from '../../apps/gateway/src/sessions.js';
import { deleteKeysUnder, keysUnder } from '../support/redis-keys.js';

const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const PREFIX = `unit-${randomBytes(8).toString('hex')}`;
const IDLE_MS = 600;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('SessionStore (2025-era sessions in Redis)', () => {
  let redis: Redis;
  let sessions: SessionStore;
  const keys = () => keysUnder(redis, PREFIX);
  before(() => {
    redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
    sessions = new SessionStore(redis, PREFIX, IDLE_MS);
  });
  after(async () => {
    await deleteKeysUnder(redis, PREFIX);
    redis.disconnect();
  });

  it('expires after the idle timeout; each use renews it', async () => {
    const s = await sessions.create('key:alice', '2025-11-25', { elicitation: {} }, { name: 'c', version: '1' });
    for (let i = 0; i < 4; i++) {
      await sleep(IDLE_MS / 2);
      assert.ok(await sessions.resolve(s.id, 'key:alice'), `still there after ${(i + 1) * (IDLE_MS / 2)} ms of use`);
    }
    await sleep(IDLE_MS + 200);
    assert.equal(await sessions.resolve(s.id, 'key:alice'), null, 'expired once idle');
  });

  it('another principal gets null and writes nothing (no renewal); a malformed id never reaches Redis', async () => {
    const s = await sessions.create('key:alice', '2025-06-18', {}, {});
    const k = (await keys()).find((x) => x.endsWith(':session') && !x.includes('events'))!;
    const before = await redis.hget(k, 'lastSeenAt');
    await sleep(20);
    assert.equal(await sessions.resolve(s.id, 'key:bob'), null);
    assert.equal(await redis.hget(k, 'lastSeenAt'), before, 'a foreign lookup writes nothing');
    assert.equal(await sessions.resolve('not a session id', 'key:alice'), null);
    const mine = await sessions.resolve(s.id, 'key:alice');
    assert.equal(mine?.protocolVersion, '2025-06-18');
    assert.equal(mine?.principal, 'key:alice');
  });

  it('end() returns what its calls run on and removes the session; a second end() or another principal gets null', async () => {
    const s = await sessions.create('key:alice', '2025-11-25', {}, {});
    await sessions.setInflight(s.id, 7, { taskId: 't-1' }, 60_000);
    await sessions.setInflight(s.id, '7', { inline: 'tok' }, 60_000);
    assert.deepEqual(await sessions.inflightOf(s.id, 7), { taskId: 't-1' });
    assert.deepEqual(await sessions.inflightOf(s.id, '7'), { inline: 'tok' }, '7 and "7" are different ids');
    assert.equal(await sessions.end(s.id, 'key:bob'), null);
    const ended = await sessions.end(s.id, 'key:alice');
    assert.deepEqual(
      ended?.sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b))),
      [{ inline: 'tok' }, { taskId: 't-1' }],
    );
    assert.equal(await sessions.resolve(s.id, 'key:alice'), null);
    assert.equal(await sessions.end(s.id, 'key:alice'), null);
  });

  it('request ids are unique and increasing within a session; every key written has an expiry', async () => {
    const s = await sessions.create('key:alice', '2025-11-25', {}, {});
    const ids = [];
    for (let i = 0; i < 5; i++) ids.push(await sessions.nextRequestId(s.id));
    assert.deepEqual(ids, [1, 2, 3, 4, 5]);
    await sessions.addPending(s.id, 1, { key: 'k', request: { method: 'elicitation/create' } }, 60_000);
    await sessions.putAnswer(s.id, 2, { action: 'accept' }, 60_000);
    await sessions.cancelInline(s.id, 'tok', 60_000);
    await sessions.setInflight(s.id, 1, { taskId: 't' }, 60_000);
    for (const k of await keys()) assert.ok((await redis.pttl(k)) > 0, `${k} has no expiry`);
  });

  it('keeps only the capabilities a call can use, each bounded', () => {
    const big = { x: 'y'.repeat(5000) };
    assert.deepEqual(sessionCapabilities({ elicitation: { form: {} }, tasks: big, unknown: { a: 1 }, roots: 'no' }), {
      elicitation: { form: {} },
      tasks: {},
    });
  });
});
