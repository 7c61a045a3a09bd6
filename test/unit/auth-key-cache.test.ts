/**
 * Unit tests of the API-key principal cache (apps/gateway/src/auth/principal-cache.ts, used by
 * authenticator.ts; design D9): a matched key's outcome is remembered per header value for
 * API_KEY_CACHE_TTL_MS and no longer; a key removed by a reload (`setApiKeys`, what a changed
 * AUTH_API_KEYS_FILE calls) is refused on the very next request; a wrong token is never
 * remembered; the number of header values held is bounded. No network; the cache's clock is
 * a counter the test moves.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { createAuthenticator } from '../../apps/gateway/src/auth/authenticator.js';
import {
  API_KEY_CACHE_MAX,
  API_KEY_CACHE_TTL_MS,
  createPrincipalCache,
} from '../../apps/gateway/src/auth/principal-cache.js';

const ALICE = 'alice-secret-key-0123456789abcdef';
const BOB = 'bob-secret-key-0123456789abcdefgh';
const digest = (k: string) => createHash('sha256').update(k, 'utf8').digest();

describe('API-key principal cache', () => {
  it('remembers a matched key for the TTL, then matches it against the digests again', async () => {
    let now = 1_000;
    const a = await createAuthenticator(
      { apiKeys: [{ name: 'alice', digest: digest(ALICE) }], allowAnonymous: false },
      () => now,
    );
    const first = await a.authenticate(`Bearer ${ALICE}`);
    assert.equal(first.ok && first.principal, 'key:alice');
    now += API_KEY_CACHE_TTL_MS - 1;
    assert.equal(await a.authenticate(`Bearer ${ALICE}`), first, 'the same remembered outcome within the TTL');
    now += 2;
    const again = await a.authenticate(`Bearer ${ALICE}`);
    assert.notEqual(again, first, 'matched anew once the TTL passed');
    assert.equal(again.ok && again.principal, 'key:alice');
  });

  it('known(): the synchronous answer the /mcp hooks use — a key only once matched and within the TTL, never a wrong or removed key, anonymous only when allowed and no credentials', async () => {
    let now = 1_000;
    const a = await createAuthenticator(
      { apiKeys: [{ name: 'alice', digest: digest(ALICE) }], allowAnonymous: false },
      () => now,
    );
    assert.equal(a.known(`Bearer ${ALICE}`), undefined, 'not before authenticate matched it');
    const first = await a.authenticate(`Bearer ${ALICE}`);
    assert.equal(a.known(`Bearer ${ALICE}`), first);
    assert.equal(a.known(`Bearer ${BOB}`), undefined);
    await a.authenticate(`Bearer ${BOB}`);
    assert.equal(a.known(`Bearer ${BOB}`), undefined, 'a refused token is never known');
    assert.equal(a.known(undefined), undefined, 'no credentials without anonymous access: authenticate decides');
    assert.equal(a.known(''), undefined);
    now += API_KEY_CACHE_TTL_MS + 1;
    assert.equal(a.known(`Bearer ${ALICE}`), undefined, 'not after the TTL');
    await a.authenticate(`Bearer ${ALICE}`);
    a.setApiKeys([{ name: 'bob', digest: digest(BOB) }]);
    assert.equal(a.known(`Bearer ${ALICE}`), undefined, 'not after a reload removed it');

    const anon = await createAuthenticator({ allowAnonymous: true });
    const none = anon.known(undefined);
    assert.equal(none?.ok && none.principal, 'anonymous');
    assert.equal(anon.known(''), none);
    assert.equal(anon.known(`Bearer ${ALICE}`), undefined, 'credentials presented: authenticate decides');
  });

  it('a key removed by a reload is refused on the next request, though it was remembered', async () => {
    const a = await createAuthenticator({
      apiKeys: [
        { name: 'alice', digest: digest(ALICE) },
        { name: 'bob', digest: digest(BOB) },
      ],
      allowAnonymous: false,
    });
    assert.equal((await a.authenticate(`Bearer ${ALICE}`)).ok, true);
    assert.equal((await a.authenticate(`Bearer ${ALICE}`)).ok, true);
    a.setApiKeys([{ name: 'bob', digest: digest(BOB) }]);
    const r = await a.authenticate(`Bearer ${ALICE}`);
    assert.equal(r.ok, false);
    assert.equal(!r.ok && r.status, 401);
    assert.equal((await a.authenticate(`Bearer ${BOB}`)).ok, true);
  });

  it('a wrong token is never remembered (refused every time, fresh refusal each time)', async () => {
    const a = await createAuthenticator({ apiKeys: [{ name: 'alice', digest: digest(ALICE) }], allowAnonymous: false });
    const r1 = await a.authenticate('Bearer not-a-key-0123456789abcdef');
    const r2 = await a.authenticate('Bearer not-a-key-0123456789abcdef');
    assert.equal(r1.ok, false);
    assert.equal(r2.ok, false);
    assert.notEqual(r1, r2);
  });

  it('holds at most API_KEY_CACHE_MAX header values', () => {
    const c = createPrincipalCache<{ p: number }>();
    for (let i = 0; i < API_KEY_CACHE_MAX + 50; i++) c.set(`Bearer k${i}`, { p: i });
    assert.equal(c.size, API_KEY_CACHE_MAX);
    assert.equal(c.get('Bearer k0'), undefined, 'the least recently used went first');
  });
});
