/**
 * The environment schema (zod) of the core settings: every variable, its default and its
 * bounds (docs/configuration.md, `.env.example`). Auth, webhooks, admin and Redis have their own
 * (auth.ts, webhooks.ts, admin.ts, redis.ts). `loadConfig` (load-config.ts) applies it.
 */
import { isIP } from 'node:net';
import { z } from 'zod';

/** Tool sets a deployment can enable through `MCP_TOOLSETS`. */
export const TOOLSETS = ['demo', 'conformance', 'testing'] as const;
export type Toolset = (typeof TOOLSETS)[number];

/** The worker's operations port when WORKER_HTTP_PORT is not set (Prometheus' usual exporter range). */
export const DEFAULT_WORKER_HTTP_PORT = 9464;

const intMs = (def: number, min = 0) => z.coerce.number().int().min(min).default(def);

/** Largest TOOL_TIMEOUT_MS and tool `timeoutMs` (ms): 7 days, well within a Node timer's range (2^31 - 1 ms). */
export const MAX_TOOL_TIMEOUT_MS = 604_800_000;

/** The core settings' schema; `Env` is what it parses to. */
export const envSchema = z.object({
  /** Run mode, exactly one of these (a typo such as `prod` must not start a development gateway). */
  NODE_ENV: z
    .enum(['production', 'development', 'test'], { error: 'must be exactly production, development or test' })
    .default('development'),
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
      const list = v
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean);
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
    .transform((v) => [
      ...new Set(
        v
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean),
      ),
    ]),
  /**
   * `ttlMs` given to new tasks, counted from `createdAt` (T-24). Default 24 h. The record and its
   * result key expire then; finished BullMQ step jobs are kept no longer (at most 1 day
   * completed, 7 days failed; and at most the last 1,000 / 5,000, `jobRetention`). Redis memory
   * is about this many ms of finished tasks (docs/deploying.md "Redis settings that matter").
   */
  TASK_TTL_MS: intMs(86_400_000, 1000),
  /** `pollIntervalMs` suggested to clients (T-17). Default 2000 ms. */
  TASK_POLL_INTERVAL_MS: intMs(2000, 100),
  /** How long a task may wait in `input_required` before it ends `failed` (case B-05). Default 6 h. */
  TASK_INPUT_TIMEOUT_MS: intMs(21_600_000, 500),
  /**
   * An `input_required` task (`task` mode) that nobody polls (`tasks/get`, `task_status`) or
   * answers for this long stops counting against its principal's MAX_OUTSTANDING_TASKS; it still
   * waits for its answer until TASK_INPUT_TIMEOUT_MS. Default 15 min (at most 1 h).
   */
  TASK_INPUT_SLOT_RELEASE_MS: z.coerce.number().int().min(1000).max(3_600_000).default(900_000),
  /**
   * 2025-era sessions (`Mcp-Session-Id`, issued at `initialize`): a session unused this long
   * expires (404 afterwards; the client starts a new one). Default 24 h.
   */
  SESSION_IDLE_TIMEOUT_MS: intMs(86_400_000, 10_000),
  /**
   * Accept a `tasks/get|update|cancel` that omits the `Mcp-Name` header (some task clients do);
   * a header that disagrees with the body is always refused (H-15). Default false.
   */
  ACCEPT_MISSING_MCP_NAME: z
    .enum(['true', 'false'])
    .default('false')
    .transform((v) => v === 'true'),
  /** Lifetime of a minted `requestState`, in seconds. */
  REQUEST_STATE_TTL_S: z.coerce.number().int().min(1).default(600),
  WORKER_CONCURRENCY: z.coerce.number().int().min(1).max(10_000).default(50),
  /**
   * Shards of the tools queue: 1 = one queue, `<prefix>:{jobs}:tools` (the layout
   * before sharding); more add `<prefix>:{jobs-1}:tools`, `{jobs-2}`, … (one per further shard), each its own Redis
   * Cluster slot. A task's jobs go to shard FNV-1a(taskId) mod N. The same on every gateway and
   * worker. Max 64.
   */
  TOOL_QUEUE_SHARDS: z.coerce.number().int().min(1).max(64).default(1),
  /**
   * BullMQ job lock duration. A worker renews its locks every
   * WORKER_LOCK_RENEW_MS, so a Redis outage shorter than lock duration − renew interval − the
   * reconnect back-off (2 s) keeps every lock and restarts no running step: 17 s with the
   * defaults. A killed worker's step restarts elsewhere after about lock duration +
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
  /**
   * Largest checkpoint a tool may store with `ctx.checkpoint(value)` (bytes of UTF-8 JSON,
   * docs/writing-tools.md "Checkpoints"). Default 64 KiB.
   */
  CHECKPOINT_MAX_BYTES: z.coerce
    .number()
    .int()
    .min(64)
    .max(16 * 1024 * 1024)
    .default(65_536),
  /**
   * A worker whose liveness key (refreshed every WORKER_LOST_AFTER_MS / 5 from a worker thread)
   * is this long gone counts as lost: the steps it held are moved back to the queue at once,
   * for another worker to resume from their checkpoints (docs/deploying.md). Default 2.5 s.
   */
  WORKER_LOST_AFTER_MS: intMs(2500, 500),
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
  /**
   * What a browser `Origin` may be (H-03); requests without `Origin` are not affected. Comma
   * list of origins (`https://app.example.com`, `http://localhost:6274`: scheme, host and port
   * must match) or bare host names (`localhost`: any scheme and port). Default: the loopback
   * names outside production; none in production (every request carrying an Origin is refused
   * until its origin is listed). `none` = no origin, in any mode.
   */
  ALLOWED_ORIGINS: z
    .string()
    .optional()
    .transform((v, ctx) => {
      if (v === undefined) return undefined;
      const list = v
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean);
      if (list.length === 1 && list[0] === 'none') return [];
      for (const entry of list) {
        if (!entry.includes('://')) continue;
        let origin: string | undefined;
        try {
          origin = new URL(entry).origin;
        } catch {
          origin = undefined;
        }
        if (origin !== entry.replace(/\/$/, '')) {
          ctx.addIssue({
            code: 'custom',
            message: `"${entry.slice(0, 100)}" is not an origin (scheme://host[:port], nothing after it) nor a host name`,
          });
          return z.NEVER;
        }
      }
      return list.map((e) => e.replace(/\/$/, ''));
    }),
  /**
   * Hostnames the `Host` header may name (DNS rebinding defence), comma list; `*` = any. Default:
   * the loopback names when HOST is a loopback address, else any. A malformed `Host` is always 400.
   */
  ALLOWED_HOSTS: z
    .string()
    .optional()
    .transform((v) =>
      v === undefined
        ? undefined
        : v
            .split(',')
            .map((s) => s.trim())
            .filter(Boolean),
    ),
  /**
   * Proxies whose `X-Forwarded-For` names the client (Fastify `trustProxy`): comma list of IP
   * addresses, CIDR ranges (`10.0.0.0/8`) and the names `loopback`, `linklocal`, `uniquelocal`.
   * Empty (default) = none: the client is the TCP peer. Per-address limits and logs use it.
   */
  TRUST_PROXY: z
    .string()
    .default('')
    .transform((v, ctx) => {
      const list = v
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean);
      for (const entry of list) {
        if (!isProxyAddress(entry)) {
          ctx.addIssue({
            code: 'custom',
            message: `"${entry.slice(0, 64)}" is not an IP address, a CIDR range or one of loopback, linklocal, uniquelocal`,
          });
          return z.NEVER;
        }
      }
      return list;
    }),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** Largest accepted request body, in bytes (413 above it). */
  MAX_BODY_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .default(4 * 1024 * 1024),
  // --- Limits per principal (issue "Safe to expose"; counted in Redis, so they hold across replicas) ---
  /**
   * Largest body of a request read without credentials (an unauthenticated `server/discover`,
   * the only one), in bytes (413 above it). Requests with credentials get MAX_BODY_BYTES.
   */
  MAX_UNAUTHENTICATED_BODY_BYTES: z.coerce.number().int().min(1024).default(16_384),
  /** Most object keys in one request body, counted while it is parsed (400 above it). */
  MAX_JSON_KEYS: z.coerce.number().int().min(100).default(20_000),
  /**
   * Failed authentications (401) one client address may cause per minute before its further
   * failures are answered 429 + Retry-After (counted in Redis; valid credentials are never refused).
   */
  RATE_LIMIT_AUTH_FAILURES_PER_MIN: z.coerce.number().int().min(1).default(60),
  /** Requests one principal may send per minute (429 + Retry-After above it). */
  RATE_LIMIT_REQUESTS_PER_MIN: z.coerce.number().int().min(1).default(3600),
  /** Tasks (and synchronous calls) one principal may start per minute. */
  RATE_LIMIT_TASK_CREATIONS_PER_MIN: z.coerce.number().int().min(1).default(120),
  /** Largest `params.arguments` of a tools/call, serialized JSON bytes (-32602 above it). */
  MAX_ARGUMENTS_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .default(256 * 1024),
  /** Largest `inputResponses` of a tasks/update or MRTR retry, serialized JSON bytes (-32602 above it). */
  MAX_INPUT_RESPONSES_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .default(64 * 1024),
  /**
   * Longest `Idempotency-Key` value (characters of the key itself, without the quotes of its
   * structured-field form); a longer one is refused with -32602 (HTTP 400).
   */
  IDEMPOTENCY_KEY_MAX_CHARS: z.coerce.number().int().min(16).max(1024).default(255),
  /** Task listen streams (`subscriptions/listen` with taskIds) one principal may hold open, across all gateways. */
  MAX_LISTEN_STREAMS_PER_PRINCIPAL: z.coerce.number().int().min(1).default(16),
  /**
   * `tasks/get|update|cancel` and a `tools/call` that becomes a task take the gateway's hot
   * path (no per-request SDK server, same answers). `false` sends them through the SDK like
   * every other method (benchmarks, tests).
   */
  HOT_PATH: z
    .enum(['true', 'false'])
    .default('true')
    .transform((v) => v === 'true'),
  /** A request whose headers and body have not fully arrived after this is cut (slow-body clients). */
  BODY_READ_TIMEOUT_MS: intMs(10_000, 1000),
  /** Non-terminal tasks one principal may hold at once, counted in Redis across replicas. */
  MAX_OUTSTANDING_TASKS: z.coerce.number().int().min(1).max(1_000_000).default(100),
  /** Largest tool result stored, in bytes of serialized JSON; a larger one ends the task failed (-32603, N-09). */
  MAX_RESULT_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .max(512 * 1024 * 1024)
    .default(1_048_576),
  /**
   * Steps of one principal that run at once across all workers (design D9, case N-08); the
   * others wait, holding no worker slot, and start as those end. Keep it well below the total
   * slots (WORKER_CONCURRENCY × workers) so no principal can take them all. Default 10. The same
   * on every worker.
   */
  MAX_RUNNING_STEPS_PER_PRINCIPAL: z.coerce.number().int().min(1).max(1_000_000).default(10),
  /**
   * Longest one run of a tool's step may take on a worker, in ms (a tool's `timeoutMs` overrides
   * it); past it the task ends `failed` (-32603 naming the tool and the limit). Time queued or
   * parked for input does not count. Default 1 h; at most 7 days.
   */
  TOOL_TIMEOUT_MS: z.coerce.number().int().min(1000).max(MAX_TOOL_TIMEOUT_MS).default(3_600_000),
  /**
   * Bytes of result JSON one principal's completed tasks may keep stored at once, counted in
   * Redis until each result expires with its task (case N-09); a result that does not fit ends
   * its task `failed` (-32603). At least MAX_RESULT_BYTES. Default 64 MiB.
   */
  MAX_RESULT_BYTES_PER_PRINCIPAL: z.coerce
    .number()
    .int()
    .min(1024)
    .max(64 * 1024 * 1024 * 1024)
    .default(64 * 1024 * 1024),
  // --- Operations: metrics, worker heartbeats and health port, traces ---
  /** Gateway: serve Prometheus `/metrics` (no credentials). */
  METRICS_ENABLED: z.stringbool({ truthy: ['true'], falsy: ['false'], error: 'must be true or false' }).default(true),
  /** Gateway: serve `/metrics` on this port of METRICS_HOST instead of the MCP port (unset = the MCP port). */
  METRICS_PORT: z.coerce.number().int().min(0).max(65535).optional(),
  /** Gateway: address of the METRICS_PORT listener (default HOST). */
  METRICS_HOST: z.string().min(1).optional(),
  /**
   * Worker: port of `/metrics`, `/healthz`, `/readyz` (`off` = none; 0 = any free port, logged).
   * Unset: DEFAULT_WORKER_HTTP_PORT, or any free port when that one is taken (a second worker on
   * the same host); a port set explicitly and taken stops the worker.
   */
  WORKER_HTTP_PORT: z
    .union([z.literal('off'), z.coerce.number().int().min(0).max(65535)], {
      error: 'must be a port number (0-65535) or off',
    })
    .optional(),
  /** Worker: address of that port (default HOST). */
  WORKER_HTTP_HOST: z.string().min(1).optional(),
  /** Worker: heartbeat interval; a worker counts as alive for 3 intervals after its last heartbeat. */
  WORKER_HEARTBEAT_MS: intMs(5000, 100),
  /** OpenTelemetry (read by the SDK too): `otlp` or `none`; unset = `otlp` when an OTLP endpoint is set. */
  OTEL_TRACES_EXPORTER: z
    .enum(['otlp', 'none'], { error: 'must be otlp or none (this service exports traces over OTLP/HTTP only)' })
    .optional(),
  OTEL_EXPORTER_OTLP_ENDPOINT: z.string().url().optional(),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: z.string().url().optional(),
  /** OTLP/HTTP body encoding; `grpc` is not supported. Default `http/protobuf` (the OpenTelemetry default). */
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: z
    .enum(['http/protobuf', 'http/json'], { error: 'must be http/protobuf or http/json (grpc is not supported)' })
    .optional(),
  OTEL_EXPORTER_OTLP_PROTOCOL: z
    .enum(['http/protobuf', 'http/json'], { error: 'must be http/protobuf or http/json (grpc is not supported)' })
    .optional(),
});

/** The parsed core settings (`envSchema`'s output). */
export type Env = z.infer<typeof envSchema>;

/** An entry of TRUST_PROXY: an IP address, `address/prefix`, or a proxy-addr range name. */
function isProxyAddress(entry: string): boolean {
  if (['loopback', 'linklocal', 'uniquelocal'].includes(entry)) return true;
  const [addr, prefix, ...rest] = entry.split('/');
  const family = isIP(addr ?? '');
  if (!family || rest.length) return false;
  if (prefix === undefined) return true;
  return /^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128);
}
