/**
 * The Authenticator with JWT access tokens against a loopback issuer made in the test
 * (test/support/oauth.ts: ES256 keys from jose, the JWKS served over HTTP on 127.0.0.1).
 * Configuration goes through `loadConfig` → `config.auth` → `createAuthenticator`, as in the
 * gateway. Issue 10 §1; H-04; design D9; case N-04 (a token for another audience is 401
 * invalid_token; no refusal or identity carries the token).
 *
 * Covered: valid token, wrong aud, wrong iss, expired, nbf in the future (and both inside the
 * stated 30 s tolerance), no exp, missing sub, missing scope (403), `scp`, tampered signature,
 * HS256 and unknown keys, key rotation at the issuer picked up after the configured cooldown
 * without a restart, the cooldown bounding fetches, an issuer that fails (503), a `file:` JWKS,
 * an inline JWKS, and API keys and JWTs configured at once.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { SignJWT } from 'jose';
import { loadConfig } from '@mcp-tasks/config';
import {
  createAuthenticator,
  type AuthOutcome,
  type Authenticator,
} from '../../apps/gateway/src/auth/authenticator.js';
import { AuthSetupError } from '../../apps/gateway/src/auth/jwt.js';
import {
  accessToken,
  nowSeconds,
  signingKey,
  startJwksServer,
  type JwksServer,
  type SigningKey,
  type TokenSpec,
} from '../support/oauth.js';

const PUBLIC_URL = 'https://mcp.example.com/mcp';
const RING = 'k1:ring-secret-0123456789abcdefghijklmnop';
const API_KEY = 'ci-api-key-0123456789abcdef';

let server: JwksServer;
let k1: SigningKey;
let k2: SigningKey;
let stranger: SigningKey;
let issuer: string;

/** An authenticator for the loopback issuer; `env` adds or overrides variables. */
function authenticator(env: Record<string, string> = {}): Promise<Authenticator> {
  const config = loadConfig({
    HOST: '0.0.0.0',
    REQUEST_STATE_KEYS: RING,
    AUTH_JWT_ISSUER: issuer,
    AUTH_JWT_JWKS_URL: server.jwksUrl,
    PUBLIC_URL,
    ...env,
  });
  return createAuthenticator(config.auth);
}

const token = (s: Partial<TokenSpec> = {}) => accessToken({ key: k1, issuer, audience: PUBLIC_URL, ...s });

function refused(r: AuthOutcome, status: number, error: string | undefined, description?: RegExp) {
  assert.equal(r.ok, false, `refused: ${JSON.stringify(r)}`);
  if (r.ok) return;
  assert.equal(r.status, status, JSON.stringify(r));
  assert.equal(r.error, error, JSON.stringify(r));
  if (description) assert.match(r.description, description);
}

before(async () => {
  [k1, k2, stranger] = await Promise.all([signingKey('k1'), signingKey('k2'), signingKey('k1')]);
  server = await startJwksServer([k1]);
  issuer = server.origin;
});
after(async () => {
  await server.close();
});

describe('JWT: claims', () => {
  it('a valid token gives principal jwt:<iss>#<sub>, its scopes and expiry', async () => {
    const a = await authenticator();
    const exp = nowSeconds() + 300;
    const r = await a.authenticate(`Bearer ${await token({ exp, claims: { scope: 'tasks:read tasks:write' } })}`);
    assert.deepEqual(r, {
      ok: true,
      principal: `jwt:${issuer}#user-1`,
      scopes: ['tasks:read', 'tasks:write'],
      kind: 'jwt',
      expiresAt: exp,
    });
  });

  it('the same sub from another issuer is another principal (N-01): the other issuer is refused here', async () => {
    const a = await authenticator();
    refused(
      await a.authenticate(`Bearer ${await token({ issuer: 'https://other.example.com' })}`),
      401,
      'invalid_token',
      /issuer/,
    );
  });

  it('wrong audience → 401 invalid_token (N-04); an aud array that includes ours is accepted', async () => {
    const a = await authenticator();
    refused(
      await a.authenticate(`Bearer ${await token({ audience: 'https://other-service.example.com/api' })}`),
      401,
      'invalid_token',
      /audience/,
    );
    refused(
      await a.authenticate(`Bearer ${await token({ audience: `${PUBLIC_URL}/` })}`),
      401,
      'invalid_token',
      /audience/,
    );
    const r = await a.authenticate(`Bearer ${await token({ audience: ['https://other.example.com', PUBLIC_URL] })}`);
    assert.equal(r.ok, true);
  });

  it('AUTH_JWT_AUDIENCE replaces the PUBLIC_URL default', async () => {
    const a = await authenticator({ AUTH_JWT_AUDIENCE: 'api://mcp-tasks' });
    assert.equal((await a.authenticate(`Bearer ${await token({ audience: 'api://mcp-tasks' })}`)).ok, true);
    refused(await a.authenticate(`Bearer ${await token()}`), 401, 'invalid_token', /audience/);
  });

  it('expired beyond the 30 s tolerance → 401 invalid_token; expired 5 s ago is inside it', async () => {
    const a = await authenticator();
    refused(
      await a.authenticate(`Bearer ${await token({ exp: nowSeconds() - 120 })}`),
      401,
      'invalid_token',
      /expired/,
    );
    assert.equal((await a.authenticate(`Bearer ${await token({ exp: nowSeconds() - 5 })}`)).ok, true);
    const strict = await authenticator({ AUTH_JWT_CLOCK_TOLERANCE_S: '0' });
    refused(
      await strict.authenticate(`Bearer ${await token({ exp: nowSeconds() - 5 })}`),
      401,
      'invalid_token',
      /expired/,
    );
  });

  it('nbf beyond the tolerance in the future → 401 invalid_token; 5 s ahead is inside it', async () => {
    const a = await authenticator();
    refused(
      await a.authenticate(`Bearer ${await token({ nbf: nowSeconds() + 120 })}`),
      401,
      'invalid_token',
      /not yet valid/,
    );
    assert.equal((await a.authenticate(`Bearer ${await token({ nbf: nowSeconds() + 5 })}`)).ok, true);
  });

  it('a token without exp is refused (it would never expire)', async () => {
    const a = await authenticator();
    refused(await a.authenticate(`Bearer ${await token({ exp: null })}`), 401, 'invalid_token', /expiry/);
  });

  it('a token without sub, or with an unusable sub, is refused', async () => {
    const a = await authenticator();
    refused(await a.authenticate(`Bearer ${await token({ subject: null })}`), 401, 'invalid_token', /subject/);
    refused(await a.authenticate(`Bearer ${await token({ subject: '' })}`), 401, 'invalid_token', /subject/);
    refused(await a.authenticate(`Bearer ${await token({ subject: 'a\nb' })}`), 401, 'invalid_token', /subject/);
    refused(
      await a.authenticate(`Bearer ${await token({ subject: 'x'.repeat(257) })}`),
      401,
      'invalid_token',
      /subject/,
    );
  });

  it('a missing required scope → 403 insufficient_scope naming the required scopes; scope and scp both count', async () => {
    const a = await authenticator({ AUTH_JWT_REQUIRED_SCOPES: 'tasks:read tasks:write' });
    assert.deepEqual(a.requiredScopes, ['tasks:read', 'tasks:write']);
    const r = await a.authenticate(`Bearer ${await token({ claims: { scope: 'tasks:read' } })}`);
    refused(r, 403, 'insufficient_scope');
    assert.deepEqual(!r.ok && r.status === 403 && r.scope, ['tasks:read', 'tasks:write']);
    refused(await a.authenticate(`Bearer ${await token()}`), 403, 'insufficient_scope');
    assert.equal(
      (await a.authenticate(`Bearer ${await token({ claims: { scope: 'tasks:read', scp: ['tasks:write'] } })}`)).ok,
      true,
    );
    assert.equal(
      (await a.authenticate(`Bearer ${await token({ claims: { scp: 'tasks:write tasks:read' } })}`)).ok,
      true,
    );
  });
});

describe('JWT: signatures and keys', () => {
  it('a tampered payload or signature → 401 invalid_token', async () => {
    const a = await authenticator();
    const t = await token();
    const [h, p, s] = t.split('.') as [string, string, string];
    const forged = Buffer.from(
      JSON.stringify({ ...JSON.parse(Buffer.from(p, 'base64url').toString()), sub: 'admin' }),
    ).toString('base64url');
    refused(await a.authenticate(`Bearer ${h}.${forged}.${s}`), 401, 'invalid_token', /signature/);
    const flipped = s.slice(0, 10) + (s[10] === 'A' ? 'B' : 'A') + s.slice(11);
    refused(await a.authenticate(`Bearer ${h}.${p}.${flipped}`), 401, 'invalid_token', /signature/);
  });

  it('a token signed by another key under a published kid → invalid signature; under an unknown kid → unknown key', async () => {
    const a = await authenticator();
    refused(
      await a.authenticate(`Bearer ${await accessToken({ key: stranger, issuer, audience: PUBLIC_URL })}`),
      401,
      'invalid_token',
      /signature/,
    );
    refused(
      await a.authenticate(`Bearer ${await accessToken({ key: stranger, kid: 'nope', issuer, audience: PUBLIC_URL })}`),
      401,
      'invalid_token',
      /unknown/,
    );
  });

  it('HS256 (even with a secret equal to a public key member) and alg "none" are refused', async () => {
    const a = await authenticator();
    const hs = await new SignJWT({})
      .setProtectedHeader({ alg: 'HS256', kid: 'k1' })
      .setIssuer(issuer)
      .setAudience(PUBLIC_URL)
      .setSubject('u')
      .setExpirationTime('5m')
      .sign(new TextEncoder().encode(String(k1.jwk.x).padEnd(32, 'x')));
    refused(await a.authenticate(`Bearer ${hs}`), 401, 'invalid_token', /algorithm/);
    const none = `${Buffer.from('{"alg":"none"}').toString('base64url')}.${Buffer.from(JSON.stringify({ iss: issuer, aud: PUBLIC_URL, sub: 'u', exp: nowSeconds() + 60 })).toString('base64url')}.`;
    refused(await a.authenticate(`Bearer ${none}`), 401, 'invalid_token');
  });

  it('no refusal and no identity carries the token (N-04)', async () => {
    const a = await authenticator({ AUTH_JWT_REQUIRED_SCOPES: 'tasks' });
    const good = await token({ claims: { scope: 'tasks' } });
    const wrongAud = await token({ audience: 'https://elsewhere.example.com' });
    const noScope = await token();
    for (const t of [good, wrongAud, noScope]) {
      const r = await a.authenticate(`Bearer ${t}`);
      const text = JSON.stringify(r);
      for (const part of t.split('.')) assert.ok(!text.includes(part), `no part of the token in ${text}`);
    }
  });
});

describe('JWT: the remote JWKS', () => {
  it('key rotation at the issuer: a new kid is picked up after the cooldown without a restart; a removed key is refused', async () => {
    const rotating = await startJwksServer([k1]);
    try {
      const a = await authenticator({
        AUTH_JWT_ISSUER: rotating.origin,
        AUTH_JWT_JWKS_URL: rotating.jwksUrl,
        AUTH_JWT_JWKS_COOLDOWN_MS: '1000',
      });
      const old = await accessToken({ key: k1, issuer: rotating.origin, audience: PUBLIC_URL });
      const fresh = await accessToken({ key: k2, issuer: rotating.origin, audience: PUBLIC_URL });
      assert.equal((await a.authenticate(`Bearer ${old}`)).ok, true);
      assert.equal(rotating.fetches(), 1);
      rotating.publish([k2]);
      // jose refetches for an unknown kid only once the cooldown (1 s here) has passed since the last fetch.
      await new Promise((r) => setTimeout(r, 1100));
      const r = await a.authenticate(`Bearer ${fresh}`);
      assert.deepEqual(r.ok && r.principal, `jwt:${rotating.origin}#user-1`);
      assert.equal(rotating.fetches(), 2, 'one refetch picked up the new key');
      refused(await a.authenticate(`Bearer ${old}`), 401, 'invalid_token', /unknown/);
    } finally {
      await rotating.close();
    }
  });

  it('tokens with made-up kids cannot make the gateway hammer the issuer: one fetch per cooldown', async () => {
    const counted = await startJwksServer([k1]);
    try {
      const a = await authenticator({
        AUTH_JWT_ISSUER: counted.origin,
        AUTH_JWT_JWKS_URL: counted.jwksUrl,
        AUTH_JWT_JWKS_COOLDOWN_MS: '600000',
      });
      assert.equal(
        (await a.authenticate(`Bearer ${await accessToken({ key: k1, issuer: counted.origin, audience: PUBLIC_URL })}`))
          .ok,
        true,
      );
      for (let i = 0; i < 20; i++) {
        const t = await accessToken({
          key: stranger,
          kid: `made-up-${i}`,
          issuer: counted.origin,
          audience: PUBLIC_URL,
        });
        refused(await a.authenticate(`Bearer ${t}`), 401, 'invalid_token', /unknown/);
      }
      assert.equal(counted.fetches(), 1, 'no refetch inside the cooldown');
    } finally {
      await counted.close();
    }
  });

  it("an issuer whose JWKS fails → 503 temporarily_unavailable (not the token's fault); it recovers", async () => {
    const failing = await startJwksServer([k1]);
    try {
      failing.failWith(500);
      const a = await authenticator({
        AUTH_JWT_ISSUER: failing.origin,
        AUTH_JWT_JWKS_URL: failing.jwksUrl,
        AUTH_JWT_JWKS_COOLDOWN_MS: '1000',
      });
      const t = await accessToken({ key: k1, issuer: failing.origin, audience: PUBLIC_URL });
      const r = await a.authenticate(`Bearer ${t}`);
      refused(r, 503, 'temporarily_unavailable');
      assert.equal(!r.ok && r.status === 503 && r.retryAfterSeconds, 5);
      failing.failWith(200);
      assert.equal((await a.authenticate(`Bearer ${t}`)).ok, true);
    } finally {
      await failing.close();
    }
  });

  it('an unreachable issuer (connection refused) → 503', async () => {
    const gone = await startJwksServer([k1]);
    await gone.close();
    const a = await authenticator({ AUTH_JWT_ISSUER: gone.origin, AUTH_JWT_JWKS_URL: gone.jwksUrl });
    refused(
      await a.authenticate(`Bearer ${await accessToken({ key: k1, issuer: gone.origin, audience: PUBLIC_URL })}`),
      503,
      'temporarily_unavailable',
    );
  });
});

describe('JWT: file: and inline JWKS (air-gapped)', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'mcp-auth-jwks-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('a file: JWKS verifies tokens of its keys and refuses others, with no HTTP fetch', async () => {
    const path = join(dir, 'jwks.json');
    await writeFile(path, JSON.stringify({ keys: [k2.jwk] }));
    const before = server.fetches();
    const a = await authenticator({ AUTH_JWT_JWKS_URL: pathToFileURL(path).href });
    assert.equal((await a.authenticate(`Bearer ${await token({ key: k2 })}`)).ok, true);
    refused(await a.authenticate(`Bearer ${await token({ key: k1 })}`), 401, 'invalid_token', /unknown/);
    assert.equal(server.fetches(), before);
  });

  it('a missing, non-JSON or private-key file refuses to start with one line naming AUTH_JWT_JWKS_URL', async () => {
    const privatePath = join(dir, 'private.json');
    await writeFile(privatePath, JSON.stringify({ keys: [{ ...k1.jwk, d: 'secret-part' }] }));
    const junkPath = join(dir, 'junk.json');
    await writeFile(junkPath, 'not json');
    for (const [path, re] of [
      [join(dir, 'missing.json'), /ENOENT/],
      [junkPath, /not valid JSON/],
      [privatePath, /private key material/],
    ] as const) {
      await assert.rejects(authenticator({ AUTH_JWT_JWKS_URL: pathToFileURL(path).href }), (e: unknown) => {
        assert.ok(e instanceof AuthSetupError);
        assert.doesNotMatch(e.message, /[\r\n]/);
        assert.match(e.message, /^AUTH_JWT_JWKS_URL: /);
        assert.match(e.message, re);
        assert.ok(!e.message.includes('secret-part'));
        return true;
      });
    }
  });

  it('an inline JWKS verifies tokens of its keys', async () => {
    const a = await authenticator({ AUTH_JWT_JWKS_URL: JSON.stringify({ keys: [k1.jwk, k2.jwk] }) });
    assert.equal((await a.authenticate(`Bearer ${await token({ key: k1 })}`)).ok, true);
    assert.equal((await a.authenticate(`Bearer ${await token({ key: k2 })}`)).ok, true);
    refused(
      await a.authenticate(`Bearer ${await accessToken({ key: stranger, kid: 'x', issuer, audience: PUBLIC_URL })}`),
      401,
      'invalid_token',
    );
  });
});

describe('API keys and JWT configured at once', () => {
  it('an API key is tried first, then a JWT; anything else is 401 invalid_token; no header is a bare 401', async () => {
    const a = await authenticator({ AUTH_API_KEYS: `ci:${API_KEY}` });
    assert.deepEqual(await a.authenticate(`Bearer ${API_KEY}`), {
      ok: true,
      principal: 'key:ci',
      scopes: [],
      kind: 'apikey',
    });
    const r = await a.authenticate(`Bearer ${await token()}`);
    assert.equal(r.ok && r.kind, 'jwt');
    refused(await a.authenticate('Bearer not-a-key-and-not-a-jwt'), 401, 'invalid_token', /unknown credentials/);
    refused(
      await a.authenticate(`Bearer ${await token({ audience: 'https://elsewhere.example.com' })}`),
      401,
      'invalid_token',
      /audience/,
    );
    refused(await a.authenticate(undefined), 401, undefined);
  });

  it('a JWT configured as an API key is matched as the key (digest first), never parsed', async () => {
    const t = await token({ exp: nowSeconds() - 3600 });
    const a = await authenticator({ AUTH_API_KEYS: `svc:${t}` });
    assert.deepEqual(await a.authenticate(`Bearer ${t}`), {
      ok: true,
      principal: 'key:svc',
      scopes: [],
      kind: 'apikey',
    });
  });
});
