/**
 * `loadConfig`: the environment, validated once at start (design §5), in named steps: parse
 * (`parseEnv`), check combinations (`checkCombinations`), the gateway's credentials
 * (`loadAccess`), then the `Config` sections (`runtimeSettings`, `limitSettings`,
 * `networkSettings`). Every failure is a one-line `ConfigError` naming the variable.
 */
import { AUTH_VARIABLES, isLoopbackHost, loadAuthConfig, type AuthConfig, type RequestStateConfig } from './auth.js';
import { ConfigError } from './errors.js';
import { parseWebhookConfig, WEBHOOK_VARIABLES_SCHEMA } from './webhooks.js';
import { ADMIN_VARIABLES_SCHEMA, parseAdminConfig, type AdminConfig } from './admin.js';
import { adminOverlapProblem, weakKeysProblem } from './api-keys-file.js';
import { parseRedisConfig, REDIS_VARIABLES_SCHEMA } from './redis.js';
import { DEFAULT_WORKER_HTTP_PORT, envSchema, type Env } from './env-schema.js';
import type { Config } from './config-type.js';

/**
 * Every environment variable the configuration reads (both schemas' keys): what a manifest or
 * compose file may set (test/unit/k8s-manifests.test.ts checks them against this list).
 */
export const CONFIG_VARIABLES: readonly string[] = Object.freeze([
  ...Object.keys(envSchema.shape),
  ...AUTH_VARIABLES,
  ...Object.keys(WEBHOOK_VARIABLES_SCHEMA.shape),
  ...Object.keys(ADMIN_VARIABLES_SCHEMA.shape),
  ...Object.keys(REDIS_VARIABLES_SCHEMA.shape),
]);

/** Host names of the loopback interface (the default `ALLOWED_HOSTS` when HOST is one of them). */
export const LOOPBACK_HOSTS = ['localhost', '127.0.0.1', '[::1]'];

type Role = 'gateway' | 'worker';
/** The environment without empty values (`PORT=` in compose files and manifests means "use the default"). */
type Cleaned = Record<string, string>;

/**
 * Parses and validates `env` (default `process.env`).
 * @param o.role `worker` skips the gateway-only settings (authentication, requestState keys).
 * @throws ConfigError naming the first bad variable, e.g. `PORT: expected number, received NaN`.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, o: { role?: Role } = {}): Config {
  const { cleaned, e } = parseEnv(env);
  checkCombinations(e);
  const { admin, auth, requestState } = loadAccess(cleaned, e, o.role);
  const redis = parseRedisConfig(cleaned);
  if ('problem' in redis) throw invalid(redis.problem);
  const webhooks = parseWebhookConfig(cleaned);
  if ('problem' in webhooks) throw invalid(webhooks.problem);
  return {
    env: e.NODE_ENV,
    host: e.HOST,
    port: e.PORT,
    redis,
    toolQueueShards: e.TOOL_QUEUE_SHARDS,
    keyPrefix: e.REDIS_KEY_PREFIX,
    toolsets: e.MCP_TOOLSETS,
    toolModules: e.MCP_TOOL_MODULES,
    requestState,
    auth,
    ...runtimeSettings(e),
    logLevel: e.LOG_LEVEL,
    maxBodyBytes: e.MAX_BODY_BYTES,
    limits: limitSettings(e),
    ...networkSettings(e),
    maxOutstandingTasks: e.MAX_OUTSTANDING_TASKS,
    maxResultBytes: e.MAX_RESULT_BYTES,
    maxResultBytesPerPrincipal: e.MAX_RESULT_BYTES_PER_PRINCIPAL,
    maxRunningStepsPerPrincipal: e.MAX_RUNNING_STEPS_PER_PRINCIPAL,
    toolTimeoutMs: e.TOOL_TIMEOUT_MS,
    heartbeatMs: e.WORKER_HEARTBEAT_MS,
    webhooks,
    ...(admin ? { admin } : {}),
  };
}

/** A ConfigError with the common prefix. */
function invalid(problem: string): ConfigError {
  return new ConfigError(`invalid configuration: ${problem}`);
}

/** Step 1: drops empty values and applies the schema. @throws ConfigError naming the first bad variable. */
function parseEnv(env: NodeJS.ProcessEnv): { cleaned: Cleaned; e: Env } {
  const cleaned = Object.fromEntries(
    Object.entries(env).filter(([, v]) => v !== undefined && v.trim() !== ''),
  ) as Cleaned;
  const parsed = envSchema.safeParse(cleaned);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw invalid(`${issue.path.join('.')}: ${issue.message}`);
  }
  return { cleaned, e: parsed.data };
}

/** Step 2: rules between variables that the schema checks one at a time. @throws ConfigError. */
function checkCombinations(e: Env): void {
  if (e.WORKER_LOCK_RENEW_MS >= e.WORKER_LOCK_DURATION_MS) {
    throw invalid('WORKER_LOCK_RENEW_MS: must be below WORKER_LOCK_DURATION_MS (locks would expire between renewals)');
  }
  if (e.MAX_RESULT_BYTES_PER_PRINCIPAL < e.MAX_RESULT_BYTES) {
    throw invalid(
      'MAX_RESULT_BYTES_PER_PRINCIPAL: must be at least MAX_RESULT_BYTES (a result of the largest size must fit)',
    );
  }
  if (e.NODE_ENV === 'production' && e.MCP_TOOLSETS.includes('testing')) {
    throw invalid('MCP_TOOLSETS: the testing tool set cannot be enabled when NODE_ENV=production');
  }
}

/**
 * Step 3: the queue view's admin keys, authentication and requestState keys. They are the
 * gateway's: a worker never sees a request, so it gets none. An admin key opens the queue view
 * only; it must not also be an MCP credential. @throws ConfigError.
 */
function loadAccess(
  cleaned: Cleaned,
  e: Env,
  role: Role | undefined,
): { admin: AdminConfig | undefined; auth: AuthConfig; requestState: RequestStateConfig } {
  const production = e.NODE_ENV === 'production';
  if (role === 'worker') {
    const requestState = { keys: Object.freeze([]), ttlSeconds: e.REQUEST_STATE_TTL_S, isDevKey: false };
    return {
      admin: undefined,
      auth: { apiKeys: [], fixedApiKeys: [], allowAnonymous: false, anonymous: 'off' as const },
      requestState: requestState,
    };
  }
  const admin = parseAdminConfig(cleaned);
  if (admin && 'problem' in admin) throw invalid(admin.problem);
  if (admin && production && cleaned.ADMIN_API_KEYS) {
    const weak = weakKeysProblem(cleaned.ADMIN_API_KEYS, 'ADMIN_API_KEYS');
    if (weak) throw invalid(weak);
  }
  const adminDigests = admin?.apiKeys.map((k) => k.digest);
  const { auth, requestState } = loadAuthConfig(cleaned, {
    nodeEnv: e.NODE_ENV,
    host: e.HOST,
    requestStateTtlSeconds: e.REQUEST_STATE_TTL_S,
    ...(adminDigests ? { adminDigests } : {}),
  });
  if (adminDigests) {
    const clash = adminOverlapProblem(auth.fixedApiKeys, { production, adminDigests }, 'AUTH_API_KEYS');
    if (clash) throw invalid(clash);
  }
  return { admin, auth, requestState };
}

/** The task, session, worker, demo, synchronous-call and testing sections of `Config`. */
function runtimeSettings(
  e: Env,
): Pick<Config, 'task' | 'sessions' | 'acceptMissingMcpName' | 'worker' | 'demo' | 'sync' | 'testing'> {
  return {
    task: {
      ttlMs: e.TASK_TTL_MS,
      pollIntervalMs: e.TASK_POLL_INTERVAL_MS,
      inputTimeoutMs: e.TASK_INPUT_TIMEOUT_MS,
      inputSlotReleaseMs: e.TASK_INPUT_SLOT_RELEASE_MS,
    },
    sessions: { idleTimeoutMs: e.SESSION_IDLE_TIMEOUT_MS },
    acceptMissingMcpName: e.ACCEPT_MISSING_MCP_NAME,
    worker: {
      concurrency: e.WORKER_CONCURRENCY,
      lockDurationMs: e.WORKER_LOCK_DURATION_MS,
      lockRenewMs: e.WORKER_LOCK_RENEW_MS,
      stalledIntervalMs: e.WORKER_STALLED_INTERVAL_MS,
      maxStalledCount: e.WORKER_MAX_STALLED_COUNT,
      shutdownGraceMs: e.SHUTDOWN_GRACE_MS,
      checkpointMaxBytes: e.CHECKPOINT_MAX_BYTES,
      lostAfterMs: e.WORKER_LOST_AFTER_MS,
      drainDelayMs: e.SHUTDOWN_DRAIN_DELAY_MS,
      syncHolderTimeoutMs: e.SYNC_HOLDER_TIMEOUT_MS,
      reconcileIntervalMs: e.RECONCILE_INTERVAL_MS,
      reconcileAfterMs: e.RECONCILE_AFTER_MS,
    },
    demo: { researchPhaseMs: e.DEMO_RESEARCH_PHASE_MS },
    sync: {
      budgetMs: e.SYNC_BUDGET_MS,
      budgetMsByTool: e.SYNC_BUDGET_MS_BY_TOOL,
      progressMinIntervalMs: e.PROGRESS_MIN_INTERVAL_MS,
      progressStreamKeepMs: e.PROGRESS_STREAM_KEEP_MS,
      progressHeartbeatMs: e.PROGRESS_HEARTBEAT_MS,
      keepAliveMs: e.SSE_KEEPALIVE_MS,
    },
    testing: { ...(e.TESTING_SIDE_EFFECT_DIR ? { sideEffectDir: e.TESTING_SIDE_EFFECT_DIR } : {}) },
  };
}

/** `Config.limits`: per-principal rates and the size limits of requests. */
function limitSettings(e: Env): Config['limits'] {
  return {
    requestsPerMin: e.RATE_LIMIT_REQUESTS_PER_MIN,
    taskCreationsPerMin: e.RATE_LIMIT_TASK_CREATIONS_PER_MIN,
    maxArgumentsBytes: e.MAX_ARGUMENTS_BYTES,
    maxInputResponsesBytes: e.MAX_INPUT_RESPONSES_BYTES,
    listenStreamsPerPrincipal: e.MAX_LISTEN_STREAMS_PER_PRINCIPAL,
    idempotencyKeyMaxChars: e.IDEMPOTENCY_KEY_MAX_CHARS,
    bodyReadTimeoutMs: e.BODY_READ_TIMEOUT_MS,
    maxUnauthenticatedBodyBytes: Math.min(e.MAX_UNAUTHENTICATED_BODY_BYTES, e.MAX_BODY_BYTES),
    maxJsonKeys: e.MAX_JSON_KEYS,
    authFailuresPerMin: e.RATE_LIMIT_AUTH_FAILURES_PER_MIN,
  };
}

/** Who may reach the service and where it listens: origins, proxies, hosts, hot path, metrics, the worker's port, traces. */
function networkSettings(
  e: Env,
): Pick<Config, 'allowedOrigins' | 'trustProxy' | 'hotPath' | 'allowedHosts' | 'metrics' | 'workerHttp' | 'tracing'> {
  const production = e.NODE_ENV === 'production';
  return {
    allowedOrigins: e.ALLOWED_ORIGINS ?? (production ? [] : ['localhost', '127.0.0.1', '[::1]']),
    trustProxy: e.TRUST_PROXY,
    hotPath: e.HOT_PATH,
    allowedHosts: e.ALLOWED_HOSTS
      ? e.ALLOWED_HOSTS.includes('*')
        ? undefined
        : e.ALLOWED_HOSTS
      : isLoopbackHost(e.HOST)
        ? LOOPBACK_HOSTS
        : undefined,
    metrics: {
      enabled: e.METRICS_ENABLED,
      ...(e.METRICS_PORT === undefined ? {} : { listen: { host: e.METRICS_HOST ?? e.HOST, port: e.METRICS_PORT } }),
    },
    ...(e.WORKER_HTTP_PORT === 'off'
      ? {}
      : {
          workerHttp: {
            host: e.WORKER_HTTP_HOST ?? e.HOST,
            port: e.WORKER_HTTP_PORT ?? DEFAULT_WORKER_HTTP_PORT,
            freePortIfTaken: e.WORKER_HTTP_PORT === undefined,
          },
        }),
    tracing: {
      // OpenTelemetry's convention: an OTLP endpoint turns the exporter on unless it is `none`.
      enabled:
        e.OTEL_TRACES_EXPORTER === 'otlp' ||
        (e.OTEL_TRACES_EXPORTER === undefined &&
          !!(e.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? e.OTEL_EXPORTER_OTLP_ENDPOINT)),
      protocol: e.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? e.OTEL_EXPORTER_OTLP_PROTOCOL ?? 'http/protobuf',
    },
  };
}
