/**
 * Typed configuration from the environment, validated once at start (design §5).
 *
 * Every variable is documented in `.env.example`. `loadConfig()` throws a
 * `ConfigError` whose message is one line naming the variable and what is
 * wrong; the apps print that line and exit 1 (no stack trace).
 */
import { z } from 'zod';
import { AUTH_VARIABLES, isLoopbackHost, loadAuthConfig, type AuthConfig, type RequestStateConfig } from './auth.js';
import { ConfigError } from './errors.js';
import { parseWebhookConfig, WEBHOOK_VARIABLES_SCHEMA, type WebhookConfig } from './webhooks.js';
import { ADMIN_VARIABLES_SCHEMA, parseAdminConfig, type AdminConfig } from './admin.js';
import { parseRedisConfig, REDIS_VARIABLES_SCHEMA, type RedisConfig } from './redis.js';

export { ConfigError };
export * from './auth.js';
export * from './webhooks.js';
export * from './admin.js';
export * from './redis.js';
export * from './cli.js';
export * from './summary.js';

/** Tool sets a deployment can enable through `MCP_TOOLSETS`. */
export const TOOLSETS = ['demo', 'conformance', 'testing'] as const;
export type Toolset = (typeof TOOLSETS)[number];

const intMs = (def: number, min = 0) => z.coerce.number().int().min(min).default(def);

const schema = z.object({
  NODE_ENV: z.string().default('development'),
  HOST: z.string().min(1).default('127.0.0.1'),
  PORT: z.coerce.number().int().min(0).max(65535).default(3000),
  /** Prefix of every Redis key this service writes (task keys and BullMQ queues). */
  REDIS_KEY_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_.-]+$/, 'letters, digits, "_", "." or "-" only')
    .default('mcp'),
  MCP_TOOLSETS: z
    .string()
    .default('demo')
    .transform((v, ctx) => {
      const list = v.split(',').map((s) => s.trim()).filter(Boolean);
      // `none`: only the tools of MCP_TOOL_MODULES (and the built-in task_status).
      if (list.includes('none')) {
        if (list.length === 1) return [] as Toolset[];
        ctx.addIssue({ code: 'custom', message: '"none" cannot be combined with other tool sets' });
        return z.NEVER;
      }
      for (const s of list) {
        if (!(TOOLSETS as readonly string[]).includes(s)) {
          ctx.addIssue({ code: 'custom', message: `unknown tool set "${s}" (known: ${TOOLSETS.join(', ')})` });
          return z.NEVER;
        }
      }
      return [...new Set(list)] as Toolset[];
    }),
  /**
   * Your own tool modules (docs/writing-tools.md): comma list of file paths (relative to the
   * directory the process starts in), `file:` URLs or package names. Loaded by gateways and
   * workers alike; each module's default export is an array of tools or a tool set object.
   */
  MCP_TOOL_MODULES: z
    .string()
    .default('')
    .transform((v) => [...new Set(v.split(',').map((s) => s.trim()).filter(Boolean))]),
  /**
   * `ttlMs` given to new tasks, counted from `createdAt` (T-24). Default 24 h. The record and its
   * result key expire then; finished BullMQ step jobs are kept no longer (at most 1 day
   * completed, 7 days failed; and at most the last 1,000 / 5,000, `jobRetention`). Redis memory
   * is about this many ms of finished tasks (README "Redis settings that matter").
   */
  TASK_TTL_MS: intMs(86_400_000, 1000),
  /** `pollIntervalMs` suggested to clients (T-17). Default 2000 ms. */
  TASK_POLL_INTERVAL_MS: intMs(2000, 100),
  /** How long a task may wait in `input_required` before it ends `failed` (case B-05). Default 6 h. */
  TASK_INPUT_TIMEOUT_MS: intMs(21_600_000, 500),
  /** Lifetime of a minted `requestState`, in seconds. */
  REQUEST_STATE_TTL_S: z.coerce.number().int().min(1).default(600),
  WORKER_CONCURRENCY: z.coerce.number().int().min(1).max(10_000).default(50),
  /**
   * Shards of the tools queue (issue 9 §7): 1 = one queue, `<prefix>:{jobs}:tools` (the layout
   * before sharding); more add `<prefix>:{jobs-1}:tools`, `{jobs-2}`, … (one per further shard), each its own Redis
   * Cluster slot. A task's jobs go to shard FNV-1a(taskId) mod N. The same on every gateway and
   * worker. Max 64.
   */
  TOOL_QUEUE_SHARDS: z.coerce.number().int().min(1).max(64).default(1),
  /**
   * BullMQ job lock duration (bullmq-notes §4). A worker renews its locks every
   * WORKER_LOCK_RENEW_MS, so a Redis outage shorter than lock duration − renew interval − the
   * reconnect back-off (2 s) keeps every lock and restarts no running step: 17 s with the
   * defaults (issue 9 §6). A killed worker's step restarts elsewhere after about lock duration +
   * WORKER_STALLED_INTERVAL_MS. Default 20 s.
   */
  WORKER_LOCK_DURATION_MS: intMs(20_000, 1000),
  /** How often a worker renews its job locks (BullMQ `lockRenewTime`); must be below WORKER_LOCK_DURATION_MS. Default 1 s. */
  WORKER_LOCK_RENEW_MS: intMs(1000, 100),
  /** How often BullMQ looks for stalled jobs (those whose lock expired). */
  WORKER_STALLED_INTERVAL_MS: intMs(5000, 500),
  WORKER_MAX_STALLED_COUNT: z.coerce.number().int().min(0).default(2),
  /** Grace period on SIGTERM before active jobs are released back to the queue. */
  SHUTDOWN_GRACE_MS: intMs(10_000, 0),
  /** Gateway: on SIGTERM, how long /readyz fails and responses say `Connection: close` before it stops accepting (load balancer drain). */
  SHUTDOWN_DRAIN_DELAY_MS: intMs(5000, 0),
  /** A synchronous call whose gateway stopped renewing its hold this long is cancelled (a killed gateway, C-01). */
  SYNC_HOLDER_TIMEOUT_MS: intMs(15_000, 1000),
  /** How often the reconciler looks for tasks whose job was lost (case B-16). */
  RECONCILE_INTERVAL_MS: intMs(5000, 200),
  /** A `working` task untouched this long is checked against its BullMQ job. */
  RECONCILE_AFTER_MS: intMs(10_000, 100),
  /** A synchronous `tools/call` runs at most this long, then continues as a task (`task_status`, D1). Default 100 s. */
  SYNC_BUDGET_MS: intMs(100_000, 1000),
  /** Per-tool budgets, JSON object `{"tool": ms}`, overriding SYNC_BUDGET_MS and the tool's own. */
  SYNC_BUDGET_MS_BY_TOOL: z
    .string()
    .default('{}')
    .transform((v, ctx) => {
      let parsed: unknown;
      try {
        parsed = JSON.parse(v);
      } catch {
        ctx.addIssue({ code: 'custom', message: 'must be a JSON object such as {"countdown":30000}' });
        return z.NEVER;
      }
      const r = z.record(z.string(), z.number().int().min(1000)).safeParse(parsed);
      if (!r.success) {
        ctx.addIssue({ code: 'custom', message: 'must map tool names to integer milliseconds >= 1000' });
        return z.NEVER;
      }
      return r.data;
    }),
  /** A tool's progress is written at most once per this interval, on the worker (P-04); the last value always lands. */
  PROGRESS_MIN_INTERVAL_MS: intMs(200, 0),
  /**
   * A synchronous call's progress stream (`<prefix>:{t:<id>}:progress`, at most ~64 events)
   * expires this long after its last event (never later than the task). Default 5 min: a
   * holding gateway reads each event within milliseconds; this only bounds idle memory.
   */
  PROGRESS_STREAM_KEEP_MS: intMs(300_000, 1000),
  /** A synchronous call with a progressToken gets a progress notification at least this often (client idle timers). Max 30 s. */
  PROGRESS_HEARTBEAT_MS: z.coerce.number().int().min(1000).max(30_000).default(15_000),
  /** SSE comment keep-alive interval on every stream (H-22, case B-10). Max 20 s: a margin under the 25 s proxies are told to expect. */
  SSE_KEEPALIVE_MS: z.coerce.number().int().min(1000).max(20_000).default(15_000),
  /** `testing` tool set only: directory where `side_effect` writes its marker files. */
  TESTING_SIDE_EFFECT_DIR: z.string().optional(),
  /** `deep_research`: length of each of its two phases. */
  DEMO_RESEARCH_PHASE_MS: intMs(20_000, 0),
  /** Hostnames a browser `Origin` may name (H-03); requests without `Origin` are not affected. */
  ALLOWED_ORIGINS: z
    .string()
    .default('localhost,127.0.0.1,[::1]')
    .transform((v) => v.split(',').map((s) => s.trim()).filter(Boolean)),
  /**
   * Hostnames the `Host` header may name (DNS rebinding defence), comma list; `*` = any. Default:
   * the loopback names when HOST is a loopback address, else any. A malformed `Host` is always 400.
   */
  ALLOWED_HOSTS: z
    .string()
    .optional()
    .transform((v) => (v === undefined ? undefined : v.split(',').map((s) => s.trim()).filter(Boolean))),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** Largest accepted request body, in bytes (413 above it). */
  MAX_BODY_BYTES: z.coerce.number().int().min(1024).default(4 * 1024 * 1024),
  // --- Limits per principal (issue "Safe to expose"; counted in Redis, so they hold across replicas) ---
  /** Requests one principal may send per minute (429 + Retry-After above it). */
  RATE_LIMIT_REQUESTS_PER_MIN: z.coerce.number().int().min(1).default(3600),
  /** Tasks (and synchronous calls) one principal may start per minute. */
  RATE_LIMIT_TASK_CREATIONS_PER_MIN: z.coerce.number().int().min(1).default(120),
  /** Largest `params.arguments` of a tools/call, serialized JSON bytes (-32602 above it). */
  MAX_ARGUMENTS_BYTES: z.coerce.number().int().min(1024).default(256 * 1024),
  /** Largest `inputResponses` of a tasks/update or MRTR retry, serialized JSON bytes (-32602 above it). */
  MAX_INPUT_RESPONSES_BYTES: z.coerce.number().int().min(1024).default(64 * 1024),
  /** Task listen streams (`subscriptions/listen` with taskIds) one principal may hold open, across all gateways. */
  MAX_LISTEN_STREAMS_PER_PRINCIPAL: z.coerce.number().int().min(1).default(16),
  /**
   * `tasks/get|update|cancel` and a `tools/call` that becomes a task take the gateway's hot
   * path (no per-request SDK server, same answers). `false` sends them through the SDK like
   * every other method (benchmarks, tests).
   */
  HOT_PATH: z.enum(['true', 'false']).default('true').transform((v) => v === 'true'),
  /** A request whose headers and body have not fully arrived after this is cut (slow-body clients). */
  BODY_READ_TIMEOUT_MS: intMs(10_000, 1000),
  /** Non-terminal tasks one principal may hold at once, counted in Redis across replicas (issue 10 §4). */
  MAX_OUTSTANDING_TASKS: z.coerce.number().int().min(1).max(1_000_000).default(100),
  /** Largest tool result stored, in bytes of serialized JSON; a larger one ends the task failed (-32603, N-09). */
  MAX_RESULT_BYTES: z.coerce.number().int().min(1024).max(512 * 1024 * 1024).default(1_048_576),
  // --- Operations: metrics, worker heartbeats and health port, traces (issue 9 §3-§5) ---
  /** Gateway: serve Prometheus `/metrics` (no credentials). */
  METRICS_ENABLED: z.stringbool({ truthy: ['true'], falsy: ['false'], error: 'must be true or false' }).default(true),
  /** Gateway: serve `/metrics` on this port of METRICS_HOST instead of the MCP port (unset = the MCP port). */
  METRICS_PORT: z.coerce.number().int().min(0).max(65535).optional(),
  /** Gateway: address of the METRICS_PORT listener (default HOST). */
  METRICS_HOST: z.string().min(1).optional(),
  /** Worker: port of `/metrics`, `/healthz`, `/readyz` (`off` = none; 0 = any free port, logged). */
  WORKER_HTTP_PORT: z
    .union([z.literal('off'), z.coerce.number().int().min(0).max(65535)], { error: 'must be a port number (0-65535) or off' })
    .default(9464),
  /** Worker: address of that port (default HOST). */
  WORKER_HTTP_HOST: z.string().min(1).optional(),
  /** Worker: heartbeat interval; a worker counts as alive for 3 intervals after its last heartbeat. */
  WORKER_HEARTBEAT_MS: intMs(5000, 100),
  /** OpenTelemetry (read by the SDK too): `otlp` or `none`; unset = `otlp` when an OTLP endpoint is set. */
  OTEL_TRACES_EXPORTER: z.enum(['otlp', 'none'], { error: 'must be otlp or none (this service exports traces over OTLP/HTTP only)' }).optional(),
  OTEL_EXPORTER_OTLP_ENDPOINT: z.string().url().optional(),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: z.string().url().optional(),
  /** OTLP/HTTP body encoding; `grpc` is not supported. Default `http/protobuf` (the OpenTelemetry default). */
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: z.enum(['http/protobuf', 'http/json'], { error: 'must be http/protobuf or http/json (grpc is not supported)' }).optional(),
  OTEL_EXPORTER_OTLP_PROTOCOL: z.enum(['http/protobuf', 'http/json'], { error: 'must be http/protobuf or http/json (grpc is not supported)' }).optional(),
});

/**
 * Every environment variable the configuration reads (both schemas' keys): what a manifest or
 * compose file may set (test/unit/k8s-manifests.test.ts checks them against this list).
 */
export const CONFIG_VARIABLES: readonly string[] = Object.freeze([
  ...Object.keys(schema.shape),
  ...AUTH_VARIABLES,
  ...Object.keys(WEBHOOK_VARIABLES_SCHEMA.shape),
  ...Object.keys(ADMIN_VARIABLES_SCHEMA.shape),
  ...Object.keys(REDIS_VARIABLES_SCHEMA.shape),
]);

/** The validated configuration. Durations are milliseconds unless the name says otherwise. */
export interface Config {
  env: string;
  host: string;
  port: number;
  /** The Redis topology: one Redis, a Cluster or Sentinel (redis.ts; issue 9 §7). */
  redis: RedisConfig;
  /** TOOL_QUEUE_SHARDS: shards of the tools queue (1 = unsharded). */
  toolQueueShards: number;
  keyPrefix: string;
  toolsets: Toolset[];
  /** MCP_TOOL_MODULES as written (paths, `file:` URLs or package names), de-duplicated, in order. */
  toolModules: string[];
  task: { ttlMs: number; pollIntervalMs: number; inputTimeoutMs: number };
  /** MRTR `requestState` key ring, shared by every replica (D7, M-05); auth.ts. */
  requestState: RequestStateConfig;
  /** Authentication (D9); auth.ts. */
  auth: AuthConfig;
  worker: {
    concurrency: number;
    /** BullMQ lock duration (ms); outage bound = this − lockRenewMs − 2 s (17 s by default, issue 9 §6). */
    lockDurationMs: number;
    /** BullMQ `lockRenewTime` (ms). */
    lockRenewMs: number;
    stalledIntervalMs: number;
    maxStalledCount: number;
    shutdownGraceMs: number;
    drainDelayMs: number;
    syncHolderTimeoutMs: number;
    reconcileIntervalMs: number;
    reconcileAfterMs: number;
  };
  demo: { researchPhaseMs: number };
  /** Synchronous calls (D1, D6). */
  sync: {
    /** Default budget of a synchronous call (ms); then it continues as a task. */
    budgetMs: number;
    /** Per-tool budget overrides (ms). */
    budgetMsByTool: Record<string, number>;
    /** Minimum gap between two progress notifications (ms). */
    progressMinIntervalMs: number;
    /** How long a progress stream outlives its last event (ms, PROGRESS_STREAM_KEEP_MS; at most until the task expires). */
    progressStreamKeepMs: number;
    /** Longest gap without a progress notification when the request has a token (ms). */
    progressHeartbeatMs: number;
    /** SSE comment keep-alive interval (ms). */
    keepAliveMs: number;
  };
  /** `testing` tool set: where `side_effect` writes (undefined = nowhere). */
  testing: { sideEffectDir?: string };
  logLevel: string;
  maxBodyBytes: number;
  /** Per-principal limits and size limits of requests. */
  limits: {
    /** Requests per minute, counted in Redis; polls (`tasks/get`) count against it per gateway, in memory. */
    requestsPerMin: number;
    /** Calls that start work, per minute, counted in Redis (instead of as requests). */
    taskCreationsPerMin: number;
    /** Serialized JSON bytes. */
    maxArgumentsBytes: number;
    /** Serialized JSON bytes. */
    maxInputResponsesBytes: number;
    listenStreamsPerPrincipal: number;
    /** ms. */
    bodyReadTimeoutMs: number;
  };
  /** Hostnames allowed in an `Origin` header (H-03). */
  allowedOrigins: string[];
  /** Hostnames allowed in the `Host` header; `undefined` = any (DNS rebinding defence). */
  allowedHosts: string[] | undefined;
  /** `tasks/*` and task-creating `tools/call` take the hot path (apps/gateway/src/hot-path.ts, HOT_PATH). */
  hotPath: boolean;
  /** Non-terminal tasks one principal may hold, counted in Redis (MAX_OUTSTANDING_TASKS, issue 10 §4). */
  maxOutstandingTasks: number;
  /** Largest stored tool result, bytes of serialized JSON (MAX_RESULT_BYTES, N-09). */
  maxResultBytes: number;
  /** Prometheus metrics (issue 9 §3). */
  metrics: {
    /** Gateway: `/metrics` served at all. */
    enabled: boolean;
    /** Gateway: a separate listener for `/metrics` (`undefined` = on the MCP port). */
    listen?: { host: string; port: number };
  };
  /** Worker: the operations port (`/metrics`, `/healthz`, `/readyz`); `undefined` = off. */
  workerHttp?: { host: string; port: number };
  /** Worker heartbeat interval (ms); a worker is alive for 3 intervals after its last heartbeat. */
  heartbeatMs: number;
  /** Traces (case N-14): exported over OTLP/HTTP only when `enabled`. */
  tracing: { enabled: boolean; protocol: 'http/protobuf' | 'http/json' };
  /** Completion webhooks (issue 11 §5); webhooks.ts. */
  webhooks: WebhookConfig;
  /** The queue view's admin listener (issue 11 §4), gateway only; `undefined` = off. admin.ts. */
  admin?: AdminConfig;
}

/** Host names of the loopback interface (the default `ALLOWED_HOSTS` when HOST is one of them). */
export const LOOPBACK_HOSTS = ['localhost', '127.0.0.1', '[::1]'];

/**
 * Parses and validates `env` (default `process.env`).
 * @param o.role `worker` skips the gateway-only settings (authentication, requestState keys).
 * @throws ConfigError naming the first bad variable, e.g. `PORT: expected number, received NaN`.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, o: { role?: 'gateway' | 'worker' } = {}): Config {
  // An empty value (`PORT=` in compose files and manifests) means "use the default".
  const cleaned = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v.trim() !== ''));
  const parsed = schema.safeParse(cleaned);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new ConfigError(`invalid configuration: ${issue.path.join('.')}: ${issue.message}`);
  }
  const e = parsed.data;
  if (e.WORKER_LOCK_RENEW_MS >= e.WORKER_LOCK_DURATION_MS) {
    throw new ConfigError('invalid configuration: WORKER_LOCK_RENEW_MS: must be below WORKER_LOCK_DURATION_MS (locks would expire between renewals)');
  }
  const production = e.NODE_ENV.toLowerCase() === 'production';
  if (production && e.MCP_TOOLSETS.includes('testing')) {
    throw new ConfigError('invalid configuration: MCP_TOOLSETS: the testing tool set cannot be enabled when NODE_ENV=production');
  }
  // Authentication and requestState keys are the gateway's: a worker never sees a request.
  const { auth, requestState } =
    o.role === 'worker'
      ? { auth: { apiKeys: [], allowAnonymous: false, anonymous: 'off' as const }, requestState: { keys: Object.freeze([]), ttlSeconds: e.REQUEST_STATE_TTL_S, isDevKey: false } as unknown as RequestStateConfig }
      : loadAuthConfig(cleaned, { nodeEnv: e.NODE_ENV, host: e.HOST, requestStateTtlSeconds: e.REQUEST_STATE_TTL_S });
  const redis = parseRedisConfig(cleaned);
  if ('problem' in redis) throw new ConfigError(`invalid configuration: ${redis.problem}`);
  const webhooks = parseWebhookConfig(cleaned);
  if ('problem' in webhooks) throw new ConfigError(`invalid configuration: ${webhooks.problem}`);
  const admin = o.role === 'worker' ? undefined : parseAdminConfig(cleaned);
  if (admin && 'problem' in admin) throw new ConfigError(`invalid configuration: ${admin.problem}`);
  return {
    env: e.NODE_ENV,
    host: e.HOST,
    port: e.PORT,
    redis,
    toolQueueShards: e.TOOL_QUEUE_SHARDS,
    keyPrefix: e.REDIS_KEY_PREFIX,
    toolsets: e.MCP_TOOLSETS,
    toolModules: e.MCP_TOOL_MODULES,
    task: { ttlMs: e.TASK_TTL_MS, pollIntervalMs: e.TASK_POLL_INTERVAL_MS, inputTimeoutMs: e.TASK_INPUT_TIMEOUT_MS },
    requestState,
    auth,
    worker: {
      concurrency: e.WORKER_CONCURRENCY,
      lockDurationMs: e.WORKER_LOCK_DURATION_MS,
      lockRenewMs: e.WORKER_LOCK_RENEW_MS,
      stalledIntervalMs: e.WORKER_STALLED_INTERVAL_MS,
      maxStalledCount: e.WORKER_MAX_STALLED_COUNT,
      shutdownGraceMs: e.SHUTDOWN_GRACE_MS,
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
    logLevel: e.LOG_LEVEL,
    maxBodyBytes: e.MAX_BODY_BYTES,
    limits: {
      requestsPerMin: e.RATE_LIMIT_REQUESTS_PER_MIN,
      taskCreationsPerMin: e.RATE_LIMIT_TASK_CREATIONS_PER_MIN,
      maxArgumentsBytes: e.MAX_ARGUMENTS_BYTES,
      maxInputResponsesBytes: e.MAX_INPUT_RESPONSES_BYTES,
      listenStreamsPerPrincipal: e.MAX_LISTEN_STREAMS_PER_PRINCIPAL,
      bodyReadTimeoutMs: e.BODY_READ_TIMEOUT_MS,
    },
    allowedOrigins: e.ALLOWED_ORIGINS,
    hotPath: e.HOT_PATH,
    allowedHosts: e.ALLOWED_HOSTS ? (e.ALLOWED_HOSTS.includes('*') ? undefined : e.ALLOWED_HOSTS) : isLoopbackHost(e.HOST) ? LOOPBACK_HOSTS : undefined,
    maxOutstandingTasks: e.MAX_OUTSTANDING_TASKS,
    maxResultBytes: e.MAX_RESULT_BYTES,
    metrics: {
      enabled: e.METRICS_ENABLED,
      ...(e.METRICS_PORT === undefined ? {} : { listen: { host: e.METRICS_HOST ?? e.HOST, port: e.METRICS_PORT } }),
    },
    ...(e.WORKER_HTTP_PORT === 'off' ? {} : { workerHttp: { host: e.WORKER_HTTP_HOST ?? e.HOST, port: e.WORKER_HTTP_PORT } }),
    heartbeatMs: e.WORKER_HEARTBEAT_MS,
    tracing: {
      // OpenTelemetry's convention: an OTLP endpoint turns the exporter on unless it is `none`.
      enabled: e.OTEL_TRACES_EXPORTER === 'otlp' || (e.OTEL_TRACES_EXPORTER === undefined && !!(e.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? e.OTEL_EXPORTER_OTLP_ENDPOINT)),
      protocol: e.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? e.OTEL_EXPORTER_OTLP_PROTOCOL ?? 'http/protobuf',
    },
    webhooks,
    ...(admin ? { admin } : {}),
  };
}
