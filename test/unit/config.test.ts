/**
 * Unit tests of `loadConfig` (packages/config, design §5): defaults, one-line `ConfigError`s that
 * name the variable, tool set validation, the production key rule, and "empty value = default".
 * Every call passes its own env object; `process.env` is never read or changed.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError, loadConfig, TOOLSETS, type Config } from '@mcp-tasks/config';

/** Every variable the schema reads (documented in .env.example). */
const VARIABLES = [
  'NODE_ENV',
  'HOST',
  'PORT',
  'REDIS_URL',
  'REDIS_CLUSTER_NODES',
  'REDIS_SENTINELS',
  'REDIS_SENTINEL_NAME',
  'REDIS_USERNAME',
  'REDIS_PASSWORD',
  'REDIS_SENTINEL_PASSWORD',
  'REDIS_TLS',
  'REDIS_KEY_PREFIX',
  'MCP_TOOLSETS',
  'MCP_TOOL_MODULES',
  'TASK_TTL_MS',
  'TASK_POLL_INTERVAL_MS',
  'TASK_INPUT_TIMEOUT_MS',
  'REQUEST_STATE_KEY',
  'REQUEST_STATE_KEYS',
  'REQUEST_STATE_TTL_S',
  'AUTH_API_KEYS',
  'AUTH_JWT_ISSUER',
  'AUTH_JWT_JWKS_URL',
  'AUTH_JWT_AUDIENCE',
  'AUTH_JWT_REQUIRED_SCOPES',
  'AUTH_JWT_CLOCK_TOLERANCE_S',
  'AUTH_JWT_JWKS_COOLDOWN_MS',
  'AUTH_ALLOW_ANONYMOUS',
  'PUBLIC_URL',
  'WORKER_CONCURRENCY',
  'TOOL_QUEUE_SHARDS',
  'WORKER_LOCK_DURATION_MS',
  'WORKER_LOCK_RENEW_MS',
  'WORKER_STALLED_INTERVAL_MS',
  'WORKER_MAX_STALLED_COUNT',
  'SHUTDOWN_GRACE_MS',
  'RECONCILE_INTERVAL_MS',
  'RECONCILE_AFTER_MS',
  'DEMO_RESEARCH_PHASE_MS',
  'ALLOWED_ORIGINS',
  'LOG_LEVEL',
  'MAX_BODY_BYTES',
  'SYNC_BUDGET_MS',
  'SYNC_BUDGET_MS_BY_TOOL',
  'PROGRESS_MIN_INTERVAL_MS',
  'PROGRESS_HEARTBEAT_MS',
  'SSE_KEEPALIVE_MS',
  'TESTING_SIDE_EFFECT_DIR',
  'MAX_OUTSTANDING_TASKS',
  'MAX_RESULT_BYTES',
  'MAX_RESULT_BYTES_PER_PRINCIPAL',
  'MAX_RUNNING_STEPS_PER_PRINCIPAL',
  'TOOL_TIMEOUT_MS',
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
] as const;

const PROD_KEY = 'Zq8vN3kT0pLw5xRj2mYc7bHs4dGf9aUe';
/** Authentication, needed off loopback or in production (auth rules: config-auth.test.ts). */
const AUTH = { AUTH_API_KEYS: 'ci:ci-api-key-0123456789abcdef' };

/** Asserts `loadConfig(env)` throws a ConfigError whose message is one line naming `variable`. */
function assertConfigError(env: Record<string, string>, variable: string, also?: RegExp): ConfigError {
  let caught: unknown;
  try {
    loadConfig(env);
  } catch (e) {
    caught = e;
  }
  assert.ok(caught, `loadConfig(${JSON.stringify(env)}) must throw`);
  assert.ok(caught instanceof ConfigError, `expected a ConfigError, got ${String(caught)}`);
  assert.equal(caught.name, 'ConfigError');
  const msg = caught.message;
  assert.ok(msg.length > 0);
  assert.doesNotMatch(msg, /[\r\n]/, `one line: ${JSON.stringify(msg)}`);
  assert.ok(msg.includes(variable), `message names ${variable}: ${JSON.stringify(msg)}`);
  if (also) assert.match(msg, also);
  return caught;
}

describe('loadConfig defaults', () => {
  it('an empty environment gives the documented defaults', () => {
    const c: Config = loadConfig({});
    assert.equal(c.host, '127.0.0.1');
    assert.equal(c.port, 3000);
    assert.deepEqual(c.redis, { mode: 'single', url: 'redis://127.0.0.1:6379', tls: false });
    assert.deepEqual(c.toolsets, ['demo']);
    assert.equal(c.task.ttlMs, 86_400_000);
    assert.equal(c.task.pollIntervalMs, 2000);
    assert.equal(c.task.inputTimeoutMs, 21_600_000);
    assert.equal(c.env, 'development');
    assert.equal(c.keyPrefix, 'mcp');
    assert.equal(c.logLevel, 'info');
    assert.equal(c.maxBodyBytes, 4 * 1024 * 1024);
    assert.equal(c.requestState.isDevKey, true, 'development falls back to the built-in dev key');
    assert.ok(c.requestState.keys[0]!.secret.length >= 32);
    assert.equal(c.requestState.ttlSeconds, 600);
    assert.deepEqual(c.worker, {
      concurrency: 50,
      lockDurationMs: 20_000,
      lockRenewMs: 1000,
      stalledIntervalMs: 5000,
      maxStalledCount: 2,
      shutdownGraceMs: 10_000,
      checkpointMaxBytes: 65_536,
      lostAfterMs: 2500,
      drainDelayMs: 5_000,
      syncHolderTimeoutMs: 15_000,
      reconcileIntervalMs: 5000,
      reconcileAfterMs: 10_000,
    });
    assert.deepEqual(c.demo, { researchPhaseMs: 20_000 });
    assert.deepEqual(c.sync, {
      budgetMs: 100_000,
      budgetMsByTool: {},
      progressMinIntervalMs: 200,
      progressStreamKeepMs: 300_000,
      progressHeartbeatMs: 15_000,
      keepAliveMs: 15_000,
    });
    assert.deepEqual(c.testing, {});
    assert.deepEqual(c.allowedOrigins, ['localhost', '127.0.0.1', '[::1]']);
    assert.equal(c.maxOutstandingTasks, 100);
    assert.equal(c.maxResultBytes, 1_048_576);
    assert.equal(c.maxResultBytesPerPrincipal, 64 * 1024 * 1024);
    assert.equal(c.maxRunningStepsPerPrincipal, 10);
    assert.equal(c.toolTimeoutMs, 3_600_000);
  });

  it('MAX_RUNNING_STEPS_PER_PRINCIPAL, TOOL_TIMEOUT_MS and MAX_RESULT_BYTES_PER_PRINCIPAL are read', () => {
    const c = loadConfig({
      MAX_RUNNING_STEPS_PER_PRINCIPAL: '3',
      TOOL_TIMEOUT_MS: '604800000',
      MAX_RESULT_BYTES: '2048',
      MAX_RESULT_BYTES_PER_PRINCIPAL: '2048',
    });
    assert.equal(c.maxRunningStepsPerPrincipal, 3);
    assert.equal(c.toolTimeoutMs, 604_800_000);
    assert.equal(c.maxResultBytesPerPrincipal, 2048);
  });

  it('MAX_RESULT_BYTES_PER_PRINCIPAL below MAX_RESULT_BYTES is refused: a result of the largest size could never be stored', () => {
    assertConfigError(
      { MAX_RESULT_BYTES: '4096', MAX_RESULT_BYTES_PER_PRINCIPAL: '4095' },
      'MAX_RESULT_BYTES_PER_PRINCIPAL',
      /at least MAX_RESULT_BYTES/,
    );
    assertConfigError({ MAX_RESULT_BYTES_PER_PRINCIPAL: '1048575' }, 'MAX_RESULT_BYTES_PER_PRINCIPAL');
  });

  it('MAX_OUTSTANDING_TASKS and MAX_RESULT_BYTES are read', () => {
    const c = loadConfig({ MAX_OUTSTANDING_TASKS: '1500', MAX_RESULT_BYTES: '2048' });
    assert.equal(c.maxOutstandingTasks, 1500);
    assert.equal(c.maxResultBytes, 2048);
  });

  it('given values are parsed and typed', () => {
    const c = loadConfig({
      ...AUTH,
      REQUEST_STATE_KEYS: `k1:${PROD_KEY}`,
      HOST: '0.0.0.0',
      PORT: '8080',
      REDIS_URL: 'rediss://user:pw@redis.example:6380/2',
      MCP_TOOLSETS: 'demo, conformance,demo',
      TASK_TTL_MS: '60000',
      TASK_POLL_INTERVAL_MS: '500',
      LOG_LEVEL: 'debug',
      UNRELATED_VARIABLE: 'ignored',
    });
    assert.equal(c.host, '0.0.0.0');
    assert.equal(c.port, 8080);
    assert.deepEqual(c.redis, { mode: 'single', url: 'rediss://user:pw@redis.example:6380/2', tls: true });
    assert.deepEqual(c.toolsets, ['demo', 'conformance'], 'trimmed and de-duplicated');
    assert.equal(c.task.ttlMs, 60_000);
    assert.equal(c.task.pollIntervalMs, 500);
    assert.equal(c.logLevel, 'debug');
    assert.deepEqual(loadConfig({ MCP_TOOLSETS: TOOLSETS.join(',') }).toolsets, [...TOOLSETS]);
  });
});

describe('loadConfig errors: ConfigError, one line, naming the variable', () => {
  const bad: [string, string][] = [
    ['PORT', 'abc'],
    ['PORT', '70000'],
    ['PORT', '-1'],
    ['PORT', '3000.5'],
    ['REDIS_URL', 'http://127.0.0.1:6379'],
    ['REDIS_KEY_PREFIX', 'has space'],
    ['TASK_TTL_MS', 'soon'],
    ['TASK_TTL_MS', '999'],
    ['TASK_POLL_INTERVAL_MS', 'fast'],
    ['TASK_POLL_INTERVAL_MS', '50'],
    ['TASK_INPUT_TIMEOUT_MS', '1.5'],
    ['REQUEST_STATE_KEY', 'short'],
    ['WORKER_CONCURRENCY', '0'],
    ['WORKER_MAX_STALLED_COUNT', '-1'],
    ['LOG_LEVEL', 'loud'],
    ['MAX_BODY_BYTES', '10'],
    ['SYNC_BUDGET_MS', '500'],
    ['SYNC_BUDGET_MS_BY_TOOL', 'countdown=3000'],
    ['SYNC_BUDGET_MS_BY_TOOL', '{"countdown":"3s"}'],
    ['SYNC_BUDGET_MS_BY_TOOL', '{"countdown":10}'],
    ['PROGRESS_HEARTBEAT_MS', '31000'],
    ['SSE_KEEPALIVE_MS', '20001'],
    ['MAX_OUTSTANDING_TASKS', '0'],
    ['MAX_OUTSTANDING_TASKS', 'many'],
    ['MAX_RESULT_BYTES', '100'],
    ['MAX_RESULT_BYTES', '1.5'],
    ['MAX_RUNNING_STEPS_PER_PRINCIPAL', '0'],
    ['MAX_RUNNING_STEPS_PER_PRINCIPAL', 'ten'],
    ['TOOL_TIMEOUT_MS', '999'],
    ['TOOL_TIMEOUT_MS', '604800001'],
    ['TOOL_TIMEOUT_MS', '1e99'],
    ['MAX_RESULT_BYTES_PER_PRINCIPAL', '1.5'],
  ];
  for (const [name, value] of bad) {
    it(`${name}=${JSON.stringify(value)} is rejected`, () => {
      assertConfigError({ [name]: value }, name);
    });
  }

  it('the first bad variable is named even when others are fine', () => {
    assertConfigError({ HOST: '0.0.0.0', PORT: 'eighty', MCP_TOOLSETS: 'demo' }, 'PORT');
  });
});

describe('synchronous calls', () => {
  it('per-tool budgets are parsed from JSON; heartbeat and keep-alive accept their maximum', () => {
    const c = loadConfig({
      SYNC_BUDGET_MS_BY_TOOL: '{"countdown":3000,"slow_echo":120000}',
      PROGRESS_HEARTBEAT_MS: '30000',
      SSE_KEEPALIVE_MS: '20000',
    });
    assert.deepEqual(c.sync.budgetMsByTool, { countdown: 3000, slow_echo: 120_000 });
    assert.equal(c.sync.progressHeartbeatMs, 30_000);
    assert.equal(c.sync.keepAliveMs, 20_000);
  });
});

describe('MCP_TOOLSETS', () => {
  it('an unknown tool set is rejected, naming the variable and the set', () => {
    assertConfigError({ MCP_TOOLSETS: 'demo,bogus' }, 'MCP_TOOLSETS', /bogus/);
    assertConfigError({ MCP_TOOLSETS: 'Demo' }, 'MCP_TOOLSETS', /Demo/);
  });
});

describe('production', () => {
  it('NODE_ENV=production requires authentication, then REQUEST_STATE_KEYS', () => {
    assertConfigError({ NODE_ENV: 'production' }, 'AUTH_API_KEYS');
    assertConfigError({ NODE_ENV: 'production', ...AUTH }, 'REQUEST_STATE_KEYS');
  });

  it('NODE_ENV=production with a short key is rejected; with a 32-character key it loads', () => {
    assertConfigError({ NODE_ENV: 'production', ...AUTH, REQUEST_STATE_KEY: 'k'.repeat(31) }, 'REQUEST_STATE_KEY');
    const c = loadConfig({ NODE_ENV: 'production', ...AUTH, REQUEST_STATE_KEY: PROD_KEY });
    assert.equal(c.env, 'production');
    assert.equal(c.requestState.keys[0]!.secret, PROD_KEY);
    assert.equal(c.requestState.isDevKey, false);
  });
});

describe('empty value means "use the default"', () => {
  const defaults = loadConfig({});
  for (const name of VARIABLES) {
    it(`${name}= (empty) gives the same configuration as ${name} unset`, () => {
      assert.deepEqual(loadConfig({ [name]: '' }), defaults);
    });
  }

  it('every variable empty at once gives the defaults (e.g. PORT= is 3000, not 0)', () => {
    const env = Object.fromEntries(VARIABLES.map((v) => [v, '']));
    const c = loadConfig(env);
    assert.deepEqual(c, defaults);
    assert.equal(c.port, 3000);
  });

  it('an empty value next to set ones only defaults that variable', () => {
    const c = loadConfig({ ...AUTH, REQUEST_STATE_KEYS: `k1:${PROD_KEY}`, PORT: '', HOST: '0.0.0.0', TASK_TTL_MS: '' });
    assert.equal(c.port, 3000);
    assert.equal(c.host, '0.0.0.0');
    assert.equal(c.task.ttlMs, 86_400_000);
  });

  it('NODE_ENV=production with REQUEST_STATE_KEY= (empty) still requires the key', () => {
    assertConfigError(
      { NODE_ENV: 'production', ...AUTH, REQUEST_STATE_KEY: '', REQUEST_STATE_KEYS: '' },
      'REQUEST_STATE_KEYS',
    );
  });
});
