/**
 * Unit tests of the authentication and requestState configuration (packages/config/src/auth.ts;
 * issue 10 §1, §3; design D9): parsing of AUTH_*, PUBLIC_URL and REQUEST_STATE_KEYS, the start
 * rules (anonymous only when configured or in development on loopback; the dev requestState key
 * only in the latter), one-line refusals naming the variable, and no key or secret in any
 * message, in `JSON.stringify(config)` or in `util.inspect(config)`.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { inspect } from 'node:util';
import { authStartupWarnings, ConfigError, isLoopbackHost, loadConfig, type Config } from '@mcp-tasks/config';

const ALICE_KEY = 'alice-secret-key-0123456789abcdef';
const BOB_KEY = 'bob-secret-key-fedcba9876543210';
const sha256hex = (s: string) => createHash('sha256').update(s).digest('hex');
const RS1 = 'request-state-secret-one-0123456789abcdefghij';
const RS2 = 'request-state-secret-two-0123456789abcdefghij';
/** A deployment on a network: keys and a ring. */
const EXPOSED = { HOST: '0.0.0.0', AUTH_API_KEYS: `alice:${ALICE_KEY}`, REQUEST_STATE_KEYS: `k1:${RS1}` };
const JWT = {
  AUTH_JWT_ISSUER: 'https://idp.example.com',
  AUTH_JWT_JWKS_URL: 'https://idp.example.com/.well-known/jwks.json',
  PUBLIC_URL: 'https://mcp.example.com/mcp',
  REQUEST_STATE_KEYS: `k1:${RS1}`,
  HOST: '0.0.0.0',
};
const PUBLIC_JWK = {
  kty: 'EC',
  crv: 'P-256',
  x: 'f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU',
  y: 'x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0',
  kid: 'a',
};

/** Asserts `loadConfig(env)` throws a one-line ConfigError naming `variable`, and returns the message. */
function refusal(env: Record<string, string>, variable: string, also?: RegExp): string {
  let caught: unknown;
  try {
    loadConfig(env);
  } catch (e) {
    caught = e;
  }
  assert.ok(
    caught instanceof ConfigError,
    `loadConfig(${JSON.stringify(Object.keys(env))}) must throw a ConfigError, got ${String(caught)}`,
  );
  const msg = caught.message;
  assert.doesNotMatch(msg, /[\r\n]/, `one line: ${JSON.stringify(msg)}`);
  assert.ok(msg.startsWith('invalid configuration: '), msg);
  assert.ok(msg.includes(variable), `message names ${variable}: ${JSON.stringify(msg)}`);
  if (also) assert.match(msg, also);
  return msg;
}

describe('start rules: anonymous access and the development requestState key', () => {
  it('nothing configured, loopback HOST, development: anonymous (dev-loopback) with the dev key, and both are warned about', () => {
    const c = loadConfig({});
    assert.equal(c.auth.allowAnonymous, true);
    assert.equal(c.auth.anonymous, 'dev-loopback');
    assert.deepEqual(c.auth.apiKeys, []);
    assert.equal(c.auth.jwt, undefined);
    assert.equal(c.requestState.isDevKey, true);
    assert.equal(c.requestState.keys.length, 1);
    assert.equal(c.requestState.keys[0]!.kid, 'dev');
    assert.ok(c.requestState.keys[0]!.secret.length >= 32);
    assert.deepEqual(
      authStartupWarnings(c).map((w) => w.event),
      ['auth.anonymous_dev', 'request_state.dev_key'],
    );
  });

  for (const host of ['127.0.0.1', '127.0.0.2', 'localhost', '::1', '[::1]']) {
    it(`HOST=${host} counts as loopback`, () => {
      assert.equal(isLoopbackHost(host), true);
      assert.equal(loadConfig({ HOST: host }).auth.anonymous, 'dev-loopback');
    });
  }

  for (const host of ['0.0.0.0', '::', '10.0.0.5', 'mcp.internal', '128.0.0.1']) {
    it(`HOST=${host} without authentication refuses to start, naming what to set`, () => {
      assert.equal(isLoopbackHost(host), false);
      refusal({ HOST: host }, 'AUTH_API_KEYS', /AUTH_JWT_ISSUER.*AUTH_ALLOW_ANONYMOUS=true/);
      refusal({ HOST: host }, `HOST=${host}`);
    });
  }

  it('NODE_ENV=production on loopback without authentication refuses to start; another spelling is no NODE_ENV', () => {
    refusal({ NODE_ENV: 'production' }, 'AUTH_API_KEYS', /NODE_ENV=production/);
    refusal({ NODE_ENV: 'Production' }, 'NODE_ENV', /exactly production, development or test/);
  });

  it('AUTH_ALLOW_ANONYMOUS=true allows anonymous anywhere, but not the dev requestState key', () => {
    refusal({ HOST: '0.0.0.0', AUTH_ALLOW_ANONYMOUS: 'true' }, 'REQUEST_STATE_KEYS');
    refusal({ NODE_ENV: 'production', AUTH_ALLOW_ANONYMOUS: 'true' }, 'REQUEST_STATE_KEYS');
    const c = loadConfig({ HOST: '0.0.0.0', AUTH_ALLOW_ANONYMOUS: 'TRUE', REQUEST_STATE_KEYS: `k1:${RS1}` });
    assert.equal(c.auth.allowAnonymous, true);
    assert.equal(c.auth.anonymous, 'configured');
    assert.equal(c.requestState.isDevKey, false);
    assert.deepEqual(
      authStartupWarnings(c).map((w) => w.event),
      ['auth.anonymous_allowed'],
    );
  });

  it('configured authentication turns anonymous off and needs REQUEST_STATE_KEYS even on loopback in development', () => {
    refusal({ AUTH_API_KEYS: `alice:${ALICE_KEY}` }, 'REQUEST_STATE_KEYS', /32 characters/);
    const c = loadConfig({ AUTH_API_KEYS: `alice:${ALICE_KEY}`, REQUEST_STATE_KEYS: `k1:${RS1}` });
    assert.equal(c.auth.allowAnonymous, false);
    assert.equal(c.auth.anonymous, 'off');
    assert.deepEqual(authStartupWarnings(c), []);
  });

  it('authentication and a ring let a production gateway on 0.0.0.0 start', () => {
    const c = loadConfig({ ...EXPOSED, NODE_ENV: 'production' });
    assert.equal(c.auth.allowAnonymous, false);
    assert.equal(c.requestState.isDevKey, false);
  });

  it('the dev key is never used outside (no auth, loopback, not production): a matrix', () => {
    const hosts = ['127.0.0.1', '0.0.0.0'];
    const envs = ['development', 'test', 'production'];
    const auths: Record<string, string>[] = [
      {},
      { AUTH_ALLOW_ANONYMOUS: 'true' },
      { AUTH_API_KEYS: `alice:${ALICE_KEY}` },
    ];
    const rings: Record<string, string>[] = [{}, { REQUEST_STATE_KEYS: `k1:${RS1}` }];
    let loaded = 0;
    for (const HOST of hosts)
      for (const NODE_ENV of envs)
        for (const a of auths)
          for (const r of rings) {
            let c: Config;
            try {
              c = loadConfig({ HOST, NODE_ENV, ...a, ...r });
            } catch (e) {
              assert.ok(e instanceof ConfigError);
              continue;
            }
            loaded += 1;
            const devConditions = HOST === '127.0.0.1' && NODE_ENV !== 'production' && !a.AUTH_API_KEYS;
            if (c.requestState.isDevKey)
              assert.ok(devConditions && !r.REQUEST_STATE_KEYS, JSON.stringify({ HOST, NODE_ENV, a, r }));
            else assert.ok(r.REQUEST_STATE_KEYS, 'without the dev key, the ring is the configured one');
            if (c.auth.allowAnonymous) assert.ok(devConditions || a.AUTH_ALLOW_ANONYMOUS === 'true');
          }
    assert.ok(loaded >= 10, `some combinations load (${loaded})`);
  });

  it('AUTH_ALLOW_ANONYMOUS accepts only true or false', () => {
    refusal({ AUTH_ALLOW_ANONYMOUS: 'yes' }, 'AUTH_ALLOW_ANONYMOUS', /true or false/);
    assert.equal(loadConfig({ AUTH_ALLOW_ANONYMOUS: 'false', HOST: '127.0.0.1' }).auth.anonymous, 'dev-loopback');
  });
});

describe('AUTH_API_KEYS', () => {
  it('principal:key and principal:sha256:<hex> give names and SHA-256 digests (never the key)', () => {
    const c = loadConfig({
      ...EXPOSED,
      AUTH_API_KEYS: ` alice:${ALICE_KEY} , bob:sha256:${sha256hex(BOB_KEY).toUpperCase()},`,
    });
    assert.deepEqual(
      c.auth.apiKeys.map((k) => k.name),
      ['alice', 'bob'],
    );
    assert.equal(c.auth.apiKeys[0]!.digest.toString('hex'), sha256hex(ALICE_KEY));
    assert.equal(c.auth.apiKeys[1]!.digest.toString('hex'), sha256hex(BOB_KEY));
  });

  it('one principal may hold two keys (key rotation); one key may not name two principals', () => {
    const c = loadConfig({ ...EXPOSED, AUTH_API_KEYS: `alice:${ALICE_KEY},alice:${BOB_KEY}` });
    assert.deepEqual(
      c.auth.apiKeys.map((k) => k.name),
      ['alice', 'alice'],
    );
    refusal(
      { ...EXPOSED, AUTH_API_KEYS: `alice:${ALICE_KEY},bob:sha256:${sha256hex(ALICE_KEY)}` },
      'AUTH_API_KEYS',
      /entries 1 and 2/,
    );
  });

  it('principal names: 1-64 of letters, digits, ".", "_", "-"', () => {
    for (const name of ['a', 'svc.ci_bot-2', 'x'.repeat(64)]) {
      assert.equal(loadConfig({ ...EXPOSED, AUTH_API_KEYS: `${name}:${ALICE_KEY}` }).auth.apiKeys[0]!.name, name);
    }
    for (const name of ['', 'x'.repeat(65), 'al ice', 'a/b', 'ali@ce', 'é']) {
      refusal(
        { ...EXPOSED, AUTH_API_KEYS: `${name}:${ALICE_KEY}` },
        'AUTH_API_KEYS',
        /entry 1: expected principal:key/,
      );
    }
  });

  const badKeys: [string, string, RegExp][] = [
    ['a key shorter than 16 characters', 'alice:short-key-15chr', /shorter than 16 characters/],
    ['a key with a character a Bearer token cannot carry', 'alice:has space in it 0123456789', /Bearer token/],
    ['a key with a colon (would read as another form)', 'alice:abc:defghijklmnopqrstuvwxyz', /Bearer token/],
    ['a sha256 form with 63 hex digits', `alice:sha256:${'a'.repeat(63)}`, /64 hex digits/],
    ['a sha256 form with a non-hex digit', `alice:sha256:${'g'.repeat(64)}`, /64 hex digits/],
    ['an entry without a principal', 'just-a-raw-key-0123456789abcdef', /entry 1: expected principal:key/],
    ['an entry starting with a colon', ':just-a-raw-key-0123456789abcdef', /entry 1: expected principal:key/],
    ['only commas', ',,', /no entries/],
  ];
  for (const [what, value, re] of badKeys) {
    it(`${what} is refused without echoing the key`, () => {
      const msg = refusal({ ...EXPOSED, AUTH_API_KEYS: value }, 'AUTH_API_KEYS', re);
      const secretPart = value.slice(value.indexOf(':') + 1);
      if (secretPart.length >= 6) assert.ok(!msg.includes(secretPart), `the key is not in the message: ${msg}`);
      assert.ok(!msg.includes('just-a-raw-key'), msg);
    });
  }

  it('the second entry is named by its position', () => {
    refusal(
      { ...EXPOSED, AUTH_API_KEYS: `alice:${ALICE_KEY},bob:tiny` },
      'AUTH_API_KEYS',
      /entry 2 \(principal "bob"\)/,
    );
  });
});

describe('AUTH_JWT_* and PUBLIC_URL', () => {
  it('a remote JWKS: issuer as written, audience defaults to PUBLIC_URL, documented defaults', () => {
    const c = loadConfig(JWT);
    assert.deepEqual(c.auth.jwt, {
      issuer: 'https://idp.example.com',
      audience: 'https://mcp.example.com/mcp',
      jwks: { kind: 'remote', url: 'https://idp.example.com/.well-known/jwks.json' },
      requiredScopes: [],
      clockToleranceSeconds: 30,
      jwksCooldownMs: 30_000,
    });
    assert.equal(c.auth.publicUrl, 'https://mcp.example.com/mcp');
    assert.equal(c.auth.allowAnonymous, false);
  });

  it('audience, scopes, tolerance and cooldown are read', () => {
    const c = loadConfig({
      ...JWT,
      AUTH_JWT_AUDIENCE: 'api://mcp-tasks',
      AUTH_JWT_REQUIRED_SCOPES: 'tasks:read tasks:write,tasks:read',
      AUTH_JWT_CLOCK_TOLERANCE_S: '0',
      AUTH_JWT_JWKS_COOLDOWN_MS: '1000',
    });
    assert.equal(c.auth.jwt!.audience, 'api://mcp-tasks');
    assert.deepEqual(c.auth.jwt!.requiredScopes, ['tasks:read', 'tasks:write']);
    assert.equal(c.auth.jwt!.clockToleranceSeconds, 0);
    assert.equal(c.auth.jwt!.jwksCooldownMs, 1000);
  });

  it('http is accepted only for a loopback issuer and JWKS', () => {
    const c = loadConfig({
      ...JWT,
      AUTH_JWT_ISSUER: 'http://127.0.0.1:9000',
      AUTH_JWT_JWKS_URL: 'http://localhost:9000/jwks',
    });
    assert.deepEqual(c.auth.jwt!.jwks, { kind: 'remote', url: 'http://localhost:9000/jwks' });
    refusal({ ...JWT, AUTH_JWT_ISSUER: 'http://idp.example.com' }, 'AUTH_JWT_ISSUER', /https/);
    refusal({ ...JWT, AUTH_JWT_JWKS_URL: 'http://idp.example.com/jwks' }, 'AUTH_JWT_JWKS_URL', /https/);
    refusal({ ...JWT, AUTH_JWT_JWKS_URL: 'ftp://idp.example.com/jwks' }, 'AUTH_JWT_JWKS_URL');
    refusal({ ...JWT, AUTH_JWT_ISSUER: 'https://idp.example.com/?tenant=1' }, 'AUTH_JWT_ISSUER', /query or fragment/);
    refusal({ ...JWT, AUTH_JWT_ISSUER: 'idp.example.com' }, 'AUTH_JWT_ISSUER', /absolute URL/);
  });

  it('a file: JWKS and an inline JWKS', () => {
    assert.deepEqual(loadConfig({ ...JWT, AUTH_JWT_JWKS_URL: 'file:///etc/mcp/jwks.json' }).auth.jwt!.jwks, {
      kind: 'file',
      url: 'file:///etc/mcp/jwks.json',
    });
    const inline = JSON.stringify({ keys: [PUBLIC_JWK] });
    assert.deepEqual(loadConfig({ ...JWT, AUTH_JWT_JWKS_URL: inline }).auth.jwt!.jwks, {
      kind: 'inline',
      jwks: { keys: [PUBLIC_JWK] },
    });
  });

  it('an inline JWKS must be JSON, have keys, and hold only public, asymmetric keys', () => {
    refusal({ ...JWT, AUTH_JWT_JWKS_URL: '{"keys": [' }, 'AUTH_JWT_JWKS_URL', /not valid JSON/);
    refusal({ ...JWT, AUTH_JWT_JWKS_URL: '{"keys": []}' }, 'AUTH_JWT_JWKS_URL', /no keys/);
    refusal({ ...JWT, AUTH_JWT_JWKS_URL: '{"kty": "EC"}' }, 'AUTH_JWT_JWKS_URL', /JWK Set/);
    const priv = JSON.stringify({ keys: [{ ...PUBLIC_JWK, d: 'private-part-must-not-be-echoed' }] });
    const msg = refusal({ ...JWT, AUTH_JWT_JWKS_URL: priv }, 'AUTH_JWT_JWKS_URL', /private key material/);
    assert.ok(!msg.includes('private-part-must-not-be-echoed'));
    refusal(
      { ...JWT, AUTH_JWT_JWKS_URL: JSON.stringify({ keys: [{ kty: 'oct', k: 'c2VjcmV0' }] }) },
      'AUTH_JWT_JWKS_URL',
      /symmetric/,
    );
  });

  it('issuer and JWKS come together; audience and scopes need them; PUBLIC_URL is required with JWT', () => {
    const { AUTH_JWT_JWKS_URL: _j, ...noJwks } = JWT;
    refusal(noJwks, 'AUTH_JWT_JWKS_URL');
    const { AUTH_JWT_ISSUER: _i, ...noIssuer } = JWT;
    refusal(noIssuer, 'AUTH_JWT_ISSUER');
    refusal({ ...EXPOSED, AUTH_JWT_AUDIENCE: 'x' }, 'AUTH_JWT_AUDIENCE');
    refusal({ ...EXPOSED, AUTH_JWT_REQUIRED_SCOPES: 'x' }, 'AUTH_JWT_REQUIRED_SCOPES');
    const { PUBLIC_URL: _p, ...noPublic } = JWT;
    refusal(noPublic, 'PUBLIC_URL', /audience/);
  });

  it('bad scopes, tolerance and cooldown are refused', () => {
    refusal({ ...JWT, AUTH_JWT_REQUIRED_SCOPES: 'ok "quoted"' }, 'AUTH_JWT_REQUIRED_SCOPES', /scope token/);
    refusal({ ...JWT, AUTH_JWT_CLOCK_TOLERANCE_S: '301' }, 'AUTH_JWT_CLOCK_TOLERANCE_S');
    refusal({ ...JWT, AUTH_JWT_CLOCK_TOLERANCE_S: '-1' }, 'AUTH_JWT_CLOCK_TOLERANCE_S');
    refusal({ ...JWT, AUTH_JWT_JWKS_COOLDOWN_MS: '999' }, 'AUTH_JWT_JWKS_COOLDOWN_MS');
  });

  it('PUBLIC_URL must be canonical, https (http on loopback), without query or fragment', () => {
    assert.equal(
      loadConfig({ ...JWT, PUBLIC_URL: 'http://127.0.0.1:3000/mcp' }).auth.publicUrl,
      'http://127.0.0.1:3000/mcp',
    );
    refusal(
      { ...JWT, PUBLIC_URL: 'https://MCP.example.com/mcp' },
      'PUBLIC_URL',
      /canonical form: https:\/\/mcp\.example\.com\/mcp/,
    );
    refusal(
      { ...JWT, PUBLIC_URL: 'https://mcp.example.com' },
      'PUBLIC_URL',
      /canonical form: https:\/\/mcp\.example\.com\//,
    );
    refusal({ ...JWT, PUBLIC_URL: 'http://mcp.example.com/mcp' }, 'PUBLIC_URL', /https/);
    refusal({ ...JWT, PUBLIC_URL: 'https://mcp.example.com/mcp?x=1' }, 'PUBLIC_URL', /query or fragment/);
    refusal({ ...JWT, PUBLIC_URL: 'https://mcp.example.com/mcp#top' }, 'PUBLIC_URL', /query or fragment/);
    refusal({ ...JWT, PUBLIC_URL: 'https://mcp.example.com/a:b' }, 'PUBLIC_URL', /path/);
    refusal({ ...JWT, PUBLIC_URL: 'https://user:pw@mcp.example.com/mcp' }, 'PUBLIC_URL', /user name or password/);
  });

  it('PUBLIC_URL alone (API keys only) is kept for the metadata document', () => {
    const c = loadConfig({ ...EXPOSED, PUBLIC_URL: 'https://mcp.example.com/mcp' });
    assert.equal(c.auth.publicUrl, 'https://mcp.example.com/mcp');
    assert.equal(c.auth.jwt, undefined);
  });
});

describe('REQUEST_STATE_KEYS (the requestState key ring)', () => {
  it('kid:secret pairs in order: the first signs; secrets are not enumerable', () => {
    const c = loadConfig({ ...EXPOSED, REQUEST_STATE_KEYS: `new:${RS2}, old:${RS1}` });
    assert.deepEqual(
      c.requestState.keys.map((k) => k.kid),
      ['new', 'old'],
    );
    assert.deepEqual(
      c.requestState.keys.map((k) => k.secret),
      [RS2, RS1],
    );
    assert.equal(c.requestState.keys[0]!.secret, RS2, 'the first key signs');
    assert.deepEqual(Object.keys(c.requestState.keys[0]!), ['kid']);
    assert.equal(c.requestState.isDevKey, false);
    assert.equal(c.requestState.ttlSeconds, 600);
  });

  it('secrets may contain ":" (only the first colon separates the kid)', () => {
    const s = `a:b:c:${RS1}`;
    assert.equal(loadConfig({ ...EXPOSED, REQUEST_STATE_KEYS: `k1:${s}` }).requestState.keys[0]!.secret, s);
  });

  const bad: [string, string, RegExp][] = [
    ['a secret of 31 characters', `k1:${'s'.repeat(31)}`, /entry 1 \(kid "k1"\): secret shorter than 32/],
    ['a repeated kid', `k1:${RS1},k1:${RS2}`, /kid "k1" appears twice/],
    ['a kid with a space', `k 1:${RS1}`, /entry 1: expected kid:secret/],
    ['an entry without a kid', RS1, /entry 1: expected kid:secret/],
    ['only commas', ',', /no entries/],
  ];
  for (const [what, value, re] of bad) {
    it(`${what} is refused without echoing a secret`, () => {
      const msg = refusal({ ...EXPOSED, REQUEST_STATE_KEYS: value }, 'REQUEST_STATE_KEYS', re);
      assert.ok(!msg.includes(RS1) && !msg.includes(RS2) && !msg.includes('s'.repeat(31)), msg);
    });
  }

  it('the deprecated REQUEST_STATE_KEY is the ring legacy:<key>; with REQUEST_STATE_KEYS too it is refused as ambiguous', () => {
    const { REQUEST_STATE_KEYS: _r, ...noRing } = EXPOSED;
    const c = loadConfig({ ...noRing, REQUEST_STATE_KEY: RS1 });
    assert.deepEqual(
      c.requestState.keys.map((k) => [k.kid, k.secret]),
      [['legacy', RS1]],
    );
    const msg = refusal(
      { ...EXPOSED, REQUEST_STATE_KEY: RS2 },
      'REQUEST_STATE_KEYS',
      /REQUEST_STATE_KEY .*legacy:<key>/,
    );
    assert.ok(!msg.includes(RS2));
    refusal({ ...noRing, REQUEST_STATE_KEY: 'x'.repeat(31) }, 'REQUEST_STATE_KEY', /32 characters/);
  });
});

describe('no key material in the loaded configuration', () => {
  it('JSON.stringify(config) and util.inspect(config) hold neither API keys nor requestState secrets', () => {
    const c = loadConfig({
      ...EXPOSED,
      AUTH_API_KEYS: `alice:${ALICE_KEY},bob:${BOB_KEY}`,
      REQUEST_STATE_KEYS: `k2:${RS2},k1:${RS1}`,
    });
    for (const text of [JSON.stringify(c), inspect(c, { depth: Infinity, showHidden: false })]) {
      for (const secret of [ALICE_KEY, BOB_KEY, RS1, RS2])
        assert.ok(!text.includes(secret), `no ${secret.slice(0, 8)}… in ${text.slice(0, 80)}…`);
    }
    // The deprecated getter still reads the signing secret for the code that needs it.
    assert.equal(c.requestState.keys[0]!.secret, RS2);
  });
});

describe('.env.example', () => {
  const text = readFileSync(new URL('../../.env.example', import.meta.url), 'utf8');
  it('documents every authentication and requestState variable', () => {
    for (const name of [
      'AUTH_API_KEYS',
      'AUTH_JWT_ISSUER',
      'AUTH_JWT_JWKS_URL',
      'AUTH_JWT_AUDIENCE',
      'AUTH_JWT_REQUIRED_SCOPES',
      'AUTH_JWT_CLOCK_TOLERANCE_S',
      'AUTH_JWT_JWKS_COOLDOWN_MS',
      'AUTH_ALLOW_ANONYMOUS',
      'PUBLIC_URL',
      'REQUEST_STATE_KEYS',
      'REQUEST_STATE_KEY',
      'REQUEST_STATE_TTL_S',
    ]) {
      assert.match(text, new RegExp(`^#? ?${name}=`, 'm'), `${name} is in .env.example`);
    }
  });
  it('its values are the defaults: loading them gives the same configuration as an empty environment', () => {
    const env = Object.fromEntries(
      text
        .split('\n')
        .filter((l) => /^[A-Z_]+=/.test(l))
        .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
    );
    assert.ok('AUTH_ALLOW_ANONYMOUS' in env && 'AUTH_JWT_CLOCK_TOLERANCE_S' in env);
    assert.deepEqual(loadConfig(env), loadConfig({}));
  });
});
