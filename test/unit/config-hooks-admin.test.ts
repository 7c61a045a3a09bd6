/**
 * Unit tests of the completion webhook and admin view settings (issue 11 §4, §5;
 * packages/config/src/webhooks.ts, admin.ts): defaults (both off), one-line ConfigErrors naming
 * the variable and never echoing a secret or URL, secrets kept out of JSON and inspect, the
 * per-principal target, .env.example.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { inspect } from 'node:util';
import { randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { ConfigError, loadConfig, webhookTargetFor } from '@mcp-tasks/config';

const SECRET = `whsec_${randomBytes(32).toString('base64')}`;
const BOB_SECRET = `whsec_${randomBytes(24).toString('base64')}`;
const URL_WITH_TOKEN = 'https://hooks.example/tasks?token=url-secret-token';
const ADMIN_KEY = 'ops-admin-key-0123456789abcdef';

function configError(env: Record<string, string>, variable: string, also?: RegExp): string {
  let caught: unknown;
  try {
    loadConfig(env);
  } catch (e) {
    caught = e;
  }
  assert.ok(caught instanceof ConfigError, `loadConfig(${Object.keys(env).join(',')}) must throw a ConfigError`);
  const msg = caught.message;
  assert.doesNotMatch(msg, /[\r\n]/);
  assert.ok(msg.includes(variable), `names ${variable}: ${msg}`);
  if (also) assert.match(msg, also);
  for (const secret of [SECRET, BOB_SECRET, 'url-secret-token', ADMIN_KEY])
    assert.ok(!msg.includes(secret), `no secret in: ${msg}`);
  return msg;
}

describe('TASK_WEBHOOK_* settings', () => {
  it('defaults: off, 10 s timeout, 12 attempts from 2 s, 16 at a time, no result', () => {
    const { webhooks } = loadConfig({});
    assert.deepEqual(
      { ...webhooks, byPrincipal: { ...webhooks.byPrincipal } },
      {
        enabled: false,
        byPrincipal: {},
        includeResult: false,
        timeoutMs: 10_000,
        attempts: 12,
        backoffMs: 2000,
        concurrency: 16,
      },
    );
  });

  it('a global target and per-principal targets; a principal listed gets its own target instead of the global one', () => {
    const c = loadConfig({
      TASK_WEBHOOK_URL: URL_WITH_TOKEN,
      TASK_WEBHOOK_SECRET: SECRET,
      TASK_WEBHOOKS_BY_PRINCIPAL: JSON.stringify({ 'key:bob': { url: 'http://127.0.0.1:9/bob', secret: BOB_SECRET } }),
      TASK_WEBHOOK_INCLUDE_RESULT: 'true',
      TASK_WEBHOOK_TIMEOUT_MS: '2500',
      TASK_WEBHOOK_ATTEMPTS: '3',
      TASK_WEBHOOK_BACKOFF_MS: '100',
      TASK_WEBHOOK_CONCURRENCY: '4',
    }).webhooks;
    assert.equal(c.enabled, true);
    assert.equal(webhookTargetFor(c, 'key:alice')?.url, URL_WITH_TOKEN);
    assert.equal(webhookTargetFor(c, 'key:alice')?.secret, SECRET);
    assert.equal(webhookTargetFor(c, 'key:bob')?.url, 'http://127.0.0.1:9/bob');
    assert.equal(webhookTargetFor(c, 'key:bob')?.secret, BOB_SECRET);
    assert.deepEqual([c.includeResult, c.timeoutMs, c.attempts, c.backoffMs, c.concurrency], [true, 2500, 3, 100, 4]);
    // The library accepts every configured secret.
    assert.doesNotThrow(() => new Webhook(webhookTargetFor(c, 'key:bob')!.secret).sign('msg_1', new Date(), '{}'));
    const only = loadConfig({
      TASK_WEBHOOKS_BY_PRINCIPAL: JSON.stringify({ 'key:bob': { url: 'https://b.example/', secret: BOB_SECRET } }),
    }).webhooks;
    assert.equal(only.enabled, true);
    assert.equal(webhookTargetFor(only, 'key:alice'), undefined, 'no global target: only bob');
    assert.equal(webhookTargetFor(only, 'constructor'), undefined, 'no inherited names');
  });

  it('secrets stay out of JSON and inspect', () => {
    const c = loadConfig({
      TASK_WEBHOOK_URL: URL_WITH_TOKEN,
      TASK_WEBHOOK_SECRET: SECRET,
      TASK_WEBHOOKS_BY_PRINCIPAL: JSON.stringify({ b: { url: 'https://b.example/', secret: BOB_SECRET } }),
    });
    for (const text of [JSON.stringify(c), inspect(c, { depth: Infinity })]) {
      assert.ok(!text.includes(SECRET.slice(6)) && !text.includes(BOB_SECRET.slice(6)), 'no secret');
    }
  });

  it('one-line errors naming the variable, never echoing the secret or the URL', () => {
    configError({ TASK_WEBHOOK_URL: URL_WITH_TOKEN }, 'TASK_WEBHOOK_SECRET', /required/);
    configError({ TASK_WEBHOOK_SECRET: SECRET }, 'TASK_WEBHOOK_URL', /required/);
    configError(
      { TASK_WEBHOOK_URL: 'ftp://x.example/?token=url-secret-token', TASK_WEBHOOK_SECRET: SECRET },
      'TASK_WEBHOOK_URL',
      /http/,
    );
    configError({ TASK_WEBHOOK_URL: 'not a url', TASK_WEBHOOK_SECRET: SECRET }, 'TASK_WEBHOOK_URL');
    configError(
      { TASK_WEBHOOK_URL: URL_WITH_TOKEN, TASK_WEBHOOK_SECRET: SECRET.slice(6) },
      'TASK_WEBHOOK_SECRET',
      /whsec_/,
    );
    configError(
      { TASK_WEBHOOK_URL: URL_WITH_TOKEN, TASK_WEBHOOK_SECRET: `whsec_${randomBytes(8).toString('base64')}` },
      'TASK_WEBHOOK_SECRET',
      /24-64 bytes/,
    );
    configError({ TASK_WEBHOOKS_BY_PRINCIPAL: '{nope' }, 'TASK_WEBHOOKS_BY_PRINCIPAL', /JSON object/);
    configError({ TASK_WEBHOOKS_BY_PRINCIPAL: '[]' }, 'TASK_WEBHOOKS_BY_PRINCIPAL', /JSON object/);
    configError(
      { TASK_WEBHOOKS_BY_PRINCIPAL: JSON.stringify({ 'key:bob': { url: URL_WITH_TOKEN } }) },
      'TASK_WEBHOOKS_BY_PRINCIPAL',
      /key:bob/,
    );
    configError(
      { TASK_WEBHOOKS_BY_PRINCIPAL: JSON.stringify({ 'key:bob': { url: URL_WITH_TOKEN, secret: 'whsec_short' } }) },
      'TASK_WEBHOOKS_BY_PRINCIPAL',
      /secret of "key:bob"/,
    );
    configError({ TASK_WEBHOOK_INCLUDE_RESULT: 'yes' }, 'TASK_WEBHOOK_INCLUDE_RESULT');
    configError({ TASK_WEBHOOK_ATTEMPTS: '0' }, 'TASK_WEBHOOK_ATTEMPTS');
    configError({ TASK_WEBHOOK_TIMEOUT_MS: '10' }, 'TASK_WEBHOOK_TIMEOUT_MS');
  });
});

describe('ADMIN_* settings', () => {
  it('off by default; ADMIN_API_KEYS turns it on at 127.0.0.1:3100, read-only', () => {
    assert.equal(loadConfig({}).admin, undefined);
    const a = loadConfig({ ADMIN_API_KEYS: `ops:${ADMIN_KEY}` }).admin!;
    assert.deepEqual(
      { ...a, apiKeys: a.apiKeys.map((k) => k.name) },
      { apiKeys: ['ops'], host: '127.0.0.1', port: 3100, readOnly: true },
    );
    assert.ok(!JSON.stringify(a).includes(ADMIN_KEY));
    const b = loadConfig({
      ADMIN_API_KEYS: `ops:${ADMIN_KEY}`,
      ADMIN_HOST: '0.0.0.0',
      ADMIN_PORT: '0',
      ADMIN_READ_ONLY: 'false',
      HOST: '127.0.0.1',
    }).admin!;
    assert.deepEqual([b.host, b.port, b.readOnly], ['0.0.0.0', 0, false]);
  });

  it('a worker ignores it; errors name the variable', () => {
    assert.equal(loadConfig({ ADMIN_API_KEYS: `ops:${ADMIN_KEY}` }, { role: 'worker' }).admin, undefined);
    configError({ ADMIN_PORT: '3100' }, 'ADMIN_PORT', /ADMIN_API_KEYS/);
    configError({ ADMIN_API_KEYS: 'ops:short' }, 'ADMIN_API_KEYS', /16 characters/);
    configError({ ADMIN_API_KEYS: `ops:${ADMIN_KEY}`, ADMIN_PORT: '70000' }, 'ADMIN_PORT');
    configError({ ADMIN_API_KEYS: `ops:${ADMIN_KEY}`, ADMIN_READ_ONLY: 'no' }, 'ADMIN_READ_ONLY');
  });
});

describe('.env.example', () => {
  const text = readFileSync(new URL('../../.env.example', import.meta.url), 'utf8');
  it('documents every webhook and admin variable', () => {
    for (const name of [
      'TASK_WEBHOOK_URL',
      'TASK_WEBHOOK_SECRET',
      'TASK_WEBHOOKS_BY_PRINCIPAL',
      'TASK_WEBHOOK_INCLUDE_RESULT',
      'TASK_WEBHOOK_TIMEOUT_MS',
      'TASK_WEBHOOK_ATTEMPTS',
      'TASK_WEBHOOK_BACKOFF_MS',
      'TASK_WEBHOOK_CONCURRENCY',
      'ADMIN_API_KEYS',
      'ADMIN_HOST',
      'ADMIN_PORT',
      'ADMIN_READ_ONLY',
    ]) {
      assert.match(text, new RegExp(`^#? ?${name}=`, 'm'), `${name} is in .env.example`);
    }
  });
});
