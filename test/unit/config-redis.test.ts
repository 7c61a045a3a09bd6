/**
 * Unit tests of the Redis topology variables (packages/config/src/redis.ts, issue 9 §7, case
 * N-10): one Redis, a Cluster or Sentinel; conflicting settings refused at start with one line
 * naming the variables; passwords never in the start-up summary.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError, describeRedis, loadConfig, startupSummary } from '@mcp-tasks/config';

function refused(env: Record<string, string>, ...names: string[]): string {
  let caught: unknown;
  try {
    loadConfig(env, { role: 'worker' });
  } catch (e) {
    caught = e;
  }
  assert.ok(caught instanceof ConfigError, `expected a ConfigError for ${JSON.stringify(env)}, got ${String(caught)}`);
  const msg = caught.message;
  assert.doesNotMatch(msg, /[\r\n]/);
  for (const n of names) assert.ok(msg.includes(n), `names ${n}: ${msg}`);
  return msg;
}

describe('config.redis (case N-10)', () => {
  it('REDIS_CLUSTER_NODES: seed nodes, port 6379 by default, IPv6 in brackets', () => {
    const c = loadConfig({ REDIS_CLUSTER_NODES: '10.0.0.1:7000, redis-b ,[::1]:7002' }, { role: 'worker' });
    assert.deepEqual(c.redis, {
      mode: 'cluster',
      nodes: [
        { host: '10.0.0.1', port: 7000 },
        { host: 'redis-b', port: 6379 },
        { host: '::1', port: 7002 },
      ],
      tls: false,
    });
  });

  it('REDIS_SENTINELS + REDIS_SENTINEL_NAME: port 26379 by default; credentials and TLS carried', () => {
    const c = loadConfig(
      {
        REDIS_SENTINELS: 's1:26380,s2',
        REDIS_SENTINEL_NAME: 'mymaster',
        REDIS_USERNAME: 'svc',
        REDIS_PASSWORD: 'data-pw',
        REDIS_SENTINEL_PASSWORD: 'sent-pw',
        REDIS_TLS: 'true',
      },
      { role: 'worker' },
    );
    assert.deepEqual(c.redis, {
      mode: 'sentinel',
      sentinels: [
        { host: 's1', port: 26380 },
        { host: 's2', port: 26379 },
      ],
      name: 'mymaster',
      sentinelPassword: 'sent-pw',
      username: 'svc',
      password: 'data-pw',
      tls: true,
    });
  });

  it('REDIS_URL stays the default topology; a rediss:// URL means TLS; REDIS_PASSWORD applies to it', () => {
    assert.deepEqual(loadConfig({}, { role: 'worker' }).redis, {
      mode: 'single',
      url: 'redis://127.0.0.1:6379',
      tls: false,
    });
    assert.deepEqual(loadConfig({ REDIS_URL: 'rediss://h:6380', REDIS_PASSWORD: 'pw' }, { role: 'worker' }).redis, {
      mode: 'single',
      url: 'rediss://h:6380',
      password: 'pw',
      tls: true,
    });
  });

  it('conflicting settings are refused, naming the variables', () => {
    refused(
      { REDIS_CLUSTER_NODES: 'a:1', REDIS_SENTINELS: 'b:2', REDIS_SENTINEL_NAME: 'm' },
      'REDIS_CLUSTER_NODES',
      'REDIS_SENTINELS',
    );
    refused({ REDIS_SENTINELS: 'b:2' }, 'REDIS_SENTINEL_NAME');
    refused({ REDIS_SENTINEL_NAME: 'm' }, 'REDIS_SENTINEL_NAME', 'REDIS_SENTINELS');
    refused({ REDIS_CLUSTER_NODES: 'a:1', REDIS_SENTINEL_PASSWORD: 'x' }, 'REDIS_SENTINEL_PASSWORD');
    refused({ REDIS_URL: 'redis://h:1', REDIS_CLUSTER_NODES: 'a:1' }, 'REDIS_URL', 'REDIS_CLUSTER_NODES');
    refused(
      { REDIS_URL: 'redis://h:1', REDIS_SENTINELS: 'a:1', REDIS_SENTINEL_NAME: 'm' },
      'REDIS_URL',
      'REDIS_SENTINELS',
    );
    refused({ REDIS_CLUSTER_NODES: 'a:1,b:99999' }, 'REDIS_CLUSTER_NODES', 'b:99999');
    refused({ REDIS_CLUSTER_NODES: 'a:x' }, 'REDIS_CLUSTER_NODES');
    refused({ REDIS_CLUSTER_NODES: ' , ' }, 'REDIS_CLUSTER_NODES');
    refused({ REDIS_TLS: 'yes' }, 'REDIS_TLS');
  });

  it('REDIS_WAIT_REPLICAS: off by default; a count with its timeout (default 1000 ms); refused with a Cluster or out of range', () => {
    assert.equal(loadConfig({}, { role: 'worker' }).redis.waitReplicas, undefined);
    assert.equal(loadConfig({ REDIS_WAIT_REPLICAS: '0' }, { role: 'worker' }).redis.waitReplicas, undefined);
    const s = loadConfig(
      { REDIS_SENTINELS: 's1', REDIS_SENTINEL_NAME: 'm', REDIS_WAIT_REPLICAS: '1' },
      { role: 'worker' },
    ).redis;
    assert.deepEqual([s.waitReplicas, s.waitTimeoutMs], [1, 1000]);
    const u = loadConfig({ REDIS_WAIT_REPLICAS: '2', REDIS_WAIT_TIMEOUT_MS: '250' }, { role: 'worker' }).redis;
    assert.deepEqual([u.waitReplicas, u.waitTimeoutMs], [2, 250]);
    refused({ REDIS_CLUSTER_NODES: 'a:7000', REDIS_WAIT_REPLICAS: '1' }, 'REDIS_WAIT_REPLICAS', 'REDIS_CLUSTER_NODES');
    refused({ REDIS_WAIT_REPLICAS: '-1' }, 'REDIS_WAIT_REPLICAS');
    refused({ REDIS_WAIT_REPLICAS: 'one' }, 'REDIS_WAIT_REPLICAS');
    refused({ REDIS_WAIT_REPLICAS: '1', REDIS_WAIT_TIMEOUT_MS: '0' }, 'REDIS_WAIT_TIMEOUT_MS');
    refused({ REDIS_WAIT_REPLICAS: '1', REDIS_WAIT_TIMEOUT_MS: '2000' }, 'REDIS_WAIT_TIMEOUT_MS');
  });

  it('an empty value is unset (REDIS_URL= next to REDIS_CLUSTER_NODES is no conflict)', () => {
    assert.equal(
      loadConfig({ REDIS_URL: '', REDIS_CLUSTER_NODES: 'a:1', REDIS_SENTINEL_NAME: '' }, { role: 'worker' }).redis.mode,
      'cluster',
    );
  });

  it('no password reaches the start-up summary or describeRedis', () => {
    const envs = [
      { REDIS_URL: 'redis://u:url-secret@h:1', REDIS_PASSWORD: 'data-secret' },
      { REDIS_CLUSTER_NODES: 'a:1,b:2', REDIS_PASSWORD: 'data-secret', REDIS_TLS: 'true' },
      {
        REDIS_SENTINELS: 's:1',
        REDIS_SENTINEL_NAME: 'm',
        REDIS_PASSWORD: 'data-secret',
        REDIS_SENTINEL_PASSWORD: 'sent-secret',
      },
    ];
    const lines = envs.map((env) => JSON.stringify(startupSummary(loadConfig(env, { role: 'worker' }), 'worker')));
    for (const l of lines) assert.doesNotMatch(l, /secret/, l);
    assert.deepEqual(
      envs.map((env) => describeRedis(loadConfig(env, { role: 'worker' }).redis)),
      ['redis://u:***@h:1 (password ***)', 'cluster a:1,b:2 (tls, password ***)', 'sentinel m via s:1 (password ***)'],
    );
  });
});
