/**
 * The real processes refuse to start without authentication off loopback or in production, with
 * one line naming what to set (issue 10 §1, §3; design D9). Configuration fails before Redis is
 * touched, so no Redis is needed. Authentication and requestState keys are the gateway's: a
 * worker never sees a request and starts without them.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { ROOT, appEntry } from '../support/cluster.js';

function run(app: 'gateway' | 'worker', env: Record<string, string>) {
  const base = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !/^(AUTH_|REQUEST_STATE_|PUBLIC_URL$|HOST$|NODE_ENV$)/.test(k)),
  );
  const r = spawnSync(process.execPath, [appEntry(app)], {
    cwd: ROOT,
    env: { ...base, REDIS_URL: 'redis://127.0.0.1:1', ...env },
    encoding: 'utf8',
    timeout: 20_000,
  });
  return { code: r.status, stderr: r.stderr.trim() };
}

describe('start-up without authentication', () => {
  const cases: [string, Record<string, string>, RegExp][] = [
    [
      'HOST=0.0.0.0, nothing configured',
      { HOST: '0.0.0.0' },
      /^gateway: invalid configuration: no authentication configured \(HOST=0\.0\.0\.0 is not a loopback address\): set AUTH_API_KEYS, or AUTH_JWT_ISSUER/,
    ],
    [
      'NODE_ENV=production, nothing configured',
      { NODE_ENV: 'production' },
      /no authentication configured \(NODE_ENV=production\): set AUTH_API_KEYS/,
    ],
    [
      'API keys but no REQUEST_STATE_KEYS',
      { HOST: '0.0.0.0', AUTH_API_KEYS: 'ci:ci-api-key-0123456789abcdef' },
      /REQUEST_STATE_KEYS must be set/,
    ],
    [
      'a short API key',
      { HOST: '0.0.0.0', AUTH_API_KEYS: 'ci:too-short' },
      /AUTH_API_KEYS: entry 1 \(principal "ci"\): key shorter than 16 characters/,
    ],
  ];
  it('worker: no authentication settings needed, even in production off loopback (it only fails here on the unreachable Redis)', () => {
    const r = run('worker', { HOST: '0.0.0.0', NODE_ENV: 'production' });
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /^worker: cannot reach Redis at redis:\/\/127\.0\.0\.1:1/);
    assert.doesNotMatch(r.stderr, /AUTH|REQUEST_STATE/);
  });
  for (const app of ['gateway'] as const) {
    for (const [what, env, re] of cases) {
      it(`${app}: ${what} → exit 1, one line naming the variable, no key echoed`, () => {
        const r = run(app, env);
        assert.equal(r.code, 1, r.stderr);
        assert.equal(r.stderr.split('\n').length, 1, r.stderr);
        assert.match(r.stderr, re);
        assert.ok(r.stderr.startsWith(`${app}: `), r.stderr);
        assert.ok(!r.stderr.includes('too-short') && !r.stderr.includes('ci-api-key'), r.stderr);
      });
    }
  }
});
