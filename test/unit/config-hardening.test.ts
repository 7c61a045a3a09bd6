/**
 * Start-up guards and the settings of the hardening (packages/config): exact NODE_ENV; in
 * production the public development requestState key, weak keys and an admin key that is an
 * MCP key are refused (one line naming the variable, never the key); the Origin allow-list and
 * its production default; TRUST_PROXY; the body limits' defaults; the keys file format; the
 * nginx template's MAX_BODY_BYTES default equals the gateway's.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import {
  ConfigError,
  DEV_REQUEST_STATE_KID,
  estimatedBits,
  loadConfig,
  parseApiKeysFile,
  weakKeyProblem,
} from '@mcp-tasks/config';
import { DEFAULT_MAX_BODY_BYTES } from '../../deploy/nginx/render.mjs';

const strong = () => randomBytes(32).toString('hex');
const PROD = {
  NODE_ENV: 'production',
  AUTH_API_KEYS: `alice:${strong()}`,
  REQUEST_STATE_KEYS: `k1:${randomBytes(48).toString('base64')}`,
};
const refused = (env: Record<string, string>, variable: string, also?: RegExp) => {
  assert.throws(
    () => loadConfig(env),
    (e: Error) => {
      assert.ok(e instanceof ConfigError, String(e));
      assert.ok(e.message.includes(variable), e.message);
      if (also) assert.match(e.message, also);
      assert.ok(!e.message.includes('\n'));
      return true;
    },
  );
};

describe('NODE_ENV is one of production, development, test, exactly', () => {
  for (const v of ['prod', ' production', 'Production', 'staging'])
    it(`NODE_ENV=${JSON.stringify(v)} is refused`, () =>
      refused({ NODE_ENV: v }, 'NODE_ENV', /exactly production, development or test/));
  it('the three values load; unset is development', () => {
    assert.equal(loadConfig({}).env, 'development');
    assert.equal(loadConfig({ NODE_ENV: 'test' }).env, 'test');
    assert.equal(loadConfig(PROD).env, 'production');
  });
  it('NODE_ENV=prod cannot sneak the testing tool set in (it used to start as development)', () =>
    refused({ ...PROD, NODE_ENV: 'prod', MCP_TOOLSETS: 'demo,testing' }, 'NODE_ENV'));
});

describe('production refuses public, weak and shared keys', () => {
  it('the public development requestState key', () => {
    const dev = 'dev-only-request-state-key-change-me-0123456789';
    refused(
      { ...PROD, REQUEST_STATE_KEYS: `${DEV_REQUEST_STATE_KID}:${dev}` },
      'REQUEST_STATE_KEYS',
      /public development key/,
    );
    refused(
      { ...PROD, REQUEST_STATE_KEYS: undefined as never, REQUEST_STATE_KEY: dev },
      'REQUEST_STATE_KEY',
      /public development key/,
    );
  });
  it('32 × a (and other low-entropy keys) as API key, admin key or requestState secret; never printing the key', () => {
    const weak = 'a'.repeat(32);
    refused({ ...PROD, AUTH_API_KEYS: `alice:${weak}` }, 'AUTH_API_KEYS', /entry 1 \(principal "alice"\)/);
    refused({ ...PROD, ADMIN_API_KEYS: `ops:${'ab'.repeat(16)}` }, 'ADMIN_API_KEYS');
    refused({ ...PROD, REQUEST_STATE_KEYS: `k1:${'0123'.repeat(10)}` }, 'REQUEST_STATE_KEYS', /kid "k1"/);
    try {
      loadConfig({ ...PROD, AUTH_API_KEYS: `alice:${weak}` });
    } catch (e) {
      assert.ok(!(e as Error).message.includes(weak));
    }
  });
  it('outside production the same keys load (development keeps working with short test keys)', () => {
    assert.equal(
      loadConfig({ AUTH_API_KEYS: `alice:${'a'.repeat(32)}`, REQUEST_STATE_KEYS: PROD.REQUEST_STATE_KEYS }).auth.apiKeys
        .length,
      1,
    );
  });
  it('a sha256: key cannot be judged and loads', () => {
    assert.equal(loadConfig({ ...PROD, AUTH_API_KEYS: `alice:sha256:${'ab'.repeat(32)}` }).auth.apiKeys.length, 1);
  });
  it('an admin key equal to an MCP key is refused (any mode)', () => {
    const k = strong();
    refused(
      { ...PROD, AUTH_API_KEYS: `alice:${k}`, ADMIN_API_KEYS: `ops:${k}` },
      'ADMIN_API_KEYS',
      /also an admin key/,
    );
    refused(
      { AUTH_API_KEYS: `alice:${k}`, ADMIN_API_KEYS: `ops:${k}`, REQUEST_STATE_KEYS: PROD.REQUEST_STATE_KEYS },
      'ADMIN_API_KEYS',
    );
  });
  it('the strength rule: ≥ 8 different characters and ≥ 64 estimated bits; openssl rand -hex 32 passes', () => {
    assert.equal(estimatedBits('a'.repeat(32)), 0);
    assert.match(weakKeyProblem('a'.repeat(32))!, /only 1 different/);
    assert.match(weakKeyProblem('abcdefgh')!, /too predictable/);
    for (let i = 0; i < 200; i++) assert.equal(weakKeyProblem(strong()), undefined);
  });
});

describe('Origin allow-list', () => {
  it('development: the loopback names; production: none unless listed', () => {
    assert.deepEqual(loadConfig({}).allowedOrigins, ['localhost', '127.0.0.1', '[::1]']);
    assert.deepEqual(loadConfig(PROD).allowedOrigins, []);
    assert.deepEqual(
      loadConfig({ ...PROD, ALLOWED_ORIGINS: 'https://app.example.com,http://localhost:6274/' }).allowedOrigins,
      ['https://app.example.com', 'http://localhost:6274'],
    );
    assert.deepEqual(loadConfig({ ALLOWED_ORIGINS: 'none' }).allowedOrigins, []);
  });
  it('an origin with a path is refused', () => refused({ ALLOWED_ORIGINS: 'https://a.example/x' }, 'ALLOWED_ORIGINS'));
});

describe('TRUST_PROXY and the body limits', () => {
  it('addresses, CIDR ranges and the proxy-addr names; default none', () => {
    assert.deepEqual(loadConfig({}).trustProxy, []);
    assert.deepEqual(loadConfig({ TRUST_PROXY: 'loopback, 10.0.0.0/8,::1,fd00::/8' }).trustProxy, [
      'loopback',
      '10.0.0.0/8',
      '::1',
      'fd00::/8',
    ]);
    refused({ TRUST_PROXY: 'nginx' }, 'TRUST_PROXY');
    refused({ TRUST_PROXY: '10.0.0.0/33' }, 'TRUST_PROXY');
  });
  it('defaults: 16 KiB without credentials (never above MAX_BODY_BYTES), 20,000 keys, 60 failed authentications a minute; nginx renders the same MAX_BODY_BYTES', () => {
    const c = loadConfig({});
    assert.equal(c.limits.maxUnauthenticatedBodyBytes, 16_384);
    assert.equal(c.limits.maxJsonKeys, 20_000);
    assert.equal(c.limits.authFailuresPerMin, 60);
    assert.equal(loadConfig({ MAX_BODY_BYTES: '8192' }).limits.maxUnauthenticatedBodyBytes, 8192);
    assert.equal(DEFAULT_MAX_BODY_BYTES, c.maxBodyBytes);
  });
});

describe('the API keys file format', () => {
  const rules = { production: false };
  it('lines and commas, # comments and blank lines; empty is valid', () => {
    const r = parseApiKeysFile(`# team\n\nalice:${strong()}\nbob:${strong()},carol:${strong()}\n`, [], rules);
    assert.ok('keys' in r);
    assert.deepEqual(
      r.keys.map((k) => k.name),
      ['alice', 'bob', 'carol'],
    );
    assert.deepEqual(parseApiKeysFile('# nobody\n', [], rules), { keys: [] });
  });
  it('a key of another principal in AUTH_API_KEYS, an admin key, or (production) a weak key is a problem', () => {
    const k = strong();
    const fixed = loadConfig({ AUTH_API_KEYS: `ci:${k}`, REQUEST_STATE_KEYS: PROD.REQUEST_STATE_KEYS }).auth
      .fixedApiKeys;
    assert.match((parseApiKeysFile(`alice:${k}`, fixed, rules) as { problem: string }).problem, /also the key of "ci"/);
    const admin = loadConfig({ ADMIN_API_KEYS: `ops:${k}` }).admin!.apiKeys.map((a) => a.digest);
    assert.match(
      (parseApiKeysFile(`alice:${k}`, [], { production: false, adminDigests: admin }) as { problem: string }).problem,
      /also an admin key/,
    );
    assert.match(
      (parseApiKeysFile(`alice:${'a'.repeat(40)}`, [], { production: true }) as { problem: string }).problem,
      /AUTH_API_KEYS_FILE: entry 1/,
    );
  });
});
