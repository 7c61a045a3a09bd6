/**
 * Unit tests of the Authenticator with API keys (apps/gateway/src/auth/authenticator.ts,
 * api-keys.ts, bearer.ts; issue 10 §1; H-04; design D9): the configuration is loaded with
 * `loadConfig` and handed over as `config.auth`, as the gateway does. Right key, wrong key, the
 * sha256 form, a principal with two keys, anonymous on and off, and every malformed header form.
 * No network: JWT is covered by test/integration/auth-jwt.test.ts.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { loadConfig } from '@mcp-tasks/config';
import { createAuthenticator, type AuthOutcome } from '../../apps/gateway/src/auth/authenticator.js';
import { createApiKeyMatcher } from '../../apps/gateway/src/auth/api-keys.js';
import { readBearer } from '../../apps/gateway/src/auth/bearer.js';

const ALICE_KEY = 'alice-secret-key-0123456789abcdef';
const BOB_KEY = 'bob+secret/key_0123456789~abc==';
const ALICE_NEW_KEY = 'alice-rotated-key-9876543210fedcba';
const sha256hex = (s: string) => createHash('sha256').update(s).digest('hex');
const RING = { REQUEST_STATE_KEYS: 'k1:ring-secret-0123456789abcdefghijklmnop' };

const authFor = (env: Record<string, string>) =>
  createAuthenticator(loadConfig({ HOST: '0.0.0.0', ...RING, ...env }).auth);
const keys = () =>
  authFor({ AUTH_API_KEYS: `alice:${ALICE_KEY},bob:sha256:${sha256hex(BOB_KEY)},alice:${ALICE_NEW_KEY}` });

function assertInvalidToken(r: AuthOutcome, what: string) {
  assert.equal(r.ok, false, `${what}: refused`);
  if (r.ok) return;
  assert.equal(r.status, 401, what);
  assert.equal(r.error, 'invalid_token', what);
}

describe('Authenticator: API keys', () => {
  it('the right key gives principal key:<name>, kind apikey, no scopes', async () => {
    const a = await keys();
    assert.deepEqual(await a.authenticate(`Bearer ${ALICE_KEY}`), {
      ok: true,
      principal: 'key:alice',
      scopes: [],
      kind: 'apikey',
    });
  });

  it('the sha256:<hex> form matches the key whose digest it is (base64 characters included)', async () => {
    const a = await keys();
    assert.deepEqual(await a.authenticate(`Bearer ${BOB_KEY}`), {
      ok: true,
      principal: 'key:bob',
      scopes: [],
      kind: 'apikey',
    });
    // Presenting the digest itself is not the key.
    assertInvalidToken(await a.authenticate(`Bearer ${sha256hex(BOB_KEY)}`), 'the digest as a token');
  });

  it('a principal with two keys (rotation) is the same principal with either', async () => {
    const a = await keys();
    const r = await a.authenticate(`Bearer ${ALICE_NEW_KEY}`);
    assert.equal(r.ok && r.principal, 'key:alice');
  });

  it('a wrong key, a key with one character changed, a prefix and an extension are 401 invalid_token', async () => {
    const a = await keys();
    for (const token of [
      'wrong-key-0123456789abcdef',
      `${ALICE_KEY.slice(0, -1)}X`,
      ALICE_KEY.slice(0, 20),
      `${ALICE_KEY}0`,
    ]) {
      assertInvalidToken(await a.authenticate(`Bearer ${token}`), token);
    }
  });

  it('the scheme is case-insensitive (RFC 7235)', async () => {
    const a = await keys();
    for (const scheme of ['bearer', 'BEARER', 'bEaReR']) {
      const r = await a.authenticate(`${scheme} ${ALICE_KEY}`);
      assert.equal(r.ok && r.principal, 'key:alice', scheme);
    }
  });

  it('no credentials: 401 without an error code; anonymous is not granted', async () => {
    const a = await keys();
    for (const header of [undefined, '']) {
      const r = await a.authenticate(header);
      assert.equal(r.ok, false);
      assert.ok(!r.ok && r.status === 401 && r.error === undefined, JSON.stringify(r));
    }
  });

  it('malformed headers are 401 invalid_token: no scheme, Basic, empty token, two spaces, trailing garbage, tab', async () => {
    const a = await keys();
    const forms = [
      ALICE_KEY,
      `Basic ${Buffer.from(`alice:${ALICE_KEY}`).toString('base64')}`,
      'Bearer',
      'Bearer ',
      `Bearer  ${ALICE_KEY}`,
      `Bearer ${ALICE_KEY} `,
      ` Bearer ${ALICE_KEY}`,
      `Bearer ${ALICE_KEY} extra`,
      `Bearer\t${ALICE_KEY}`,
      `Bearer ${ALICE_KEY},Bearer ${ALICE_KEY}`,
      `Token ${ALICE_KEY}`,
      `Bearer ${'a'.repeat(9000)}`,
    ];
    for (const h of forms) assertInvalidToken(await a.authenticate(h), JSON.stringify(h.slice(0, 40)));
    assertInvalidToken(await a.authenticate([`Bearer ${ALICE_KEY}`, `Bearer ${ALICE_KEY}`]), 'two header values');
  });

  it('no refusal carries the presented token', async () => {
    const a = await keys();
    const token = 'presented-token-that-must-not-echo-0123';
    for (const h of [`Bearer ${token}`, `Basic ${token}`, token]) {
      const r = await a.authenticate(h);
      assert.ok(!JSON.stringify(r).includes(token), JSON.stringify(r));
    }
  });
});

describe('Authenticator: anonymous', () => {
  it('AUTH_ALLOW_ANONYMOUS=true with keys: no header is anonymous, a valid key its principal, a bad header still refused', async () => {
    const a = await authFor({ AUTH_API_KEYS: `alice:${ALICE_KEY}`, AUTH_ALLOW_ANONYMOUS: 'true' });
    assert.deepEqual(await a.authenticate(undefined), {
      ok: true,
      principal: 'anonymous',
      scopes: [],
      kind: 'anonymous',
    });
    assert.equal(((await a.authenticate(`Bearer ${ALICE_KEY}`)) as { principal: string }).principal, 'key:alice');
    assertInvalidToken(
      await a.authenticate('Bearer not-a-configured-key-0123'),
      'a wrong key is never downgraded to anonymous',
    );
    assertInvalidToken(await a.authenticate('Basic Zm9vOmJhcg=='), 'Basic is never downgraded to anonymous');
  });

  it('dev-loopback (nothing configured): every request without credentials is anonymous; any token is refused', async () => {
    const a = await createAuthenticator(loadConfig({}).auth);
    assert.equal(((await a.authenticate(undefined)) as { principal: string }).principal, 'anonymous');
    assertInvalidToken(await a.authenticate(`Bearer ${ALICE_KEY}`), 'no key is configured');
  });
});

describe('readBearer and the key matcher', () => {
  it('reads exactly "Bearer <b64token>"', () => {
    assert.deepEqual(readBearer('Bearer abc-._~+/=='), { kind: 'bearer', token: 'abc-._~+/==' });
    assert.deepEqual(readBearer(undefined), { kind: 'none' });
    assert.deepEqual(readBearer(''), { kind: 'none' });
    assert.deepEqual(readBearer('Bearer a=b'), { kind: 'malformed' }, '"=" only as trailing padding');
    assert.deepEqual(readBearer('Bearer ä'), { kind: 'malformed' });
  });

  it('the matcher compares against every digest and names the first match; refuses a digest that is not 32 bytes', () => {
    const d = (s: string) => createHash('sha256').update(s).digest();
    const match = createApiKeyMatcher([
      { name: 'a', digest: d('key-a-0123456789abcdef') },
      { name: 'b', digest: d('key-b-0123456789abcdef') },
    ]);
    assert.equal(match('key-b-0123456789abcdef'), 'b');
    assert.equal(match('key-a-0123456789abcdef'), 'a');
    assert.equal(match('key-c-0123456789abcdef'), undefined);
    assert.throws(() => createApiKeyMatcher([{ name: 'x', digest: new Uint8Array(16) }]), /32 bytes/);
  });
});
