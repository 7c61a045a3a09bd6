/** The validated configuration's shape (`loadConfig`, load-config.ts). */
import type { AuthConfig, RequestStateConfig } from './auth.js';
import type { WebhookConfig } from './webhooks.js';
import type { AdminConfig } from './admin.js';
import type { RedisConfig } from './redis.js';
import type { Toolset } from './env-schema.js';

/** The validated configuration. Durations are milliseconds unless the name says otherwise. */
export interface Config {
  env: string;
  host: string;
  port: number;
  /** The Redis topology: one Redis, a Cluster or Sentinel (redis.ts). */
  redis: RedisConfig;
  /** TOOL_QUEUE_SHARDS: shards of the tools queue (1 = unsharded). */
  toolQueueShards: number;
  keyPrefix: string;
  toolsets: Toolset[];
  /** MCP_TOOL_MODULES as written (paths, `file:` URLs or package names), de-duplicated, in order. */
  toolModules: string[];
  task: {
    ttlMs: number;
    pollIntervalMs: number;
    inputTimeoutMs: number;
    /** An unpolled, unanswered `input_required` task frees its outstanding slot after this (ms). */
    inputSlotReleaseMs: number;
  };
  /** 2025-era sessions (apps/gateway/src/sessions.ts). */
  sessions: { idleTimeoutMs: number };
  /** Accept a missing (never a mismatched) `Mcp-Name` on `tasks/get|update|cancel` (ACCEPT_MISSING_MCP_NAME). */
  acceptMissingMcpName: boolean;
  /** MRTR `requestState` key ring, shared by every replica (D7, M-05); auth.ts. */
  requestState: RequestStateConfig;
  /** Authentication (D9); auth.ts. */
  auth: AuthConfig;
  worker: {
    concurrency: number;
    /** BullMQ lock duration (ms); outage bound = this − lockRenewMs − 2 s (17 s by default). */
    lockDurationMs: number;
    /** BullMQ `lockRenewTime` (ms). */
    lockRenewMs: number;
    stalledIntervalMs: number;
    maxStalledCount: number;
    shutdownGraceMs: number;
    /** Largest checkpoint, bytes of JSON (CHECKPOINT_MAX_BYTES). */
    checkpointMaxBytes: number;
    /** A worker's liveness key lives this long (ms, WORKER_LOST_AFTER_MS); refreshed every fifth of it. */
    lostAfterMs: number;
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
    /** Characters of an `Idempotency-Key` value. */
    idempotencyKeyMaxChars: number;
    /** ms. */
    bodyReadTimeoutMs: number;
    /** Bytes; a request read without credentials (MAX_UNAUTHENTICATED_BODY_BYTES). */
    maxUnauthenticatedBodyBytes: number;
    /** Object keys in one body (MAX_JSON_KEYS). */
    maxJsonKeys: number;
    /** 401s per client address and minute before 429 (RATE_LIMIT_AUTH_FAILURES_PER_MIN). */
    authFailuresPerMin: number;
  };
  /** Origins (`scheme://host[:port]`) or host names allowed in an `Origin` header (H-03); empty = none. */
  allowedOrigins: string[];
  /** TRUST_PROXY: addresses, CIDR ranges or names of proxies whose `X-Forwarded-For` is believed; empty = none. */
  trustProxy: string[];
  /** Hostnames allowed in the `Host` header; `undefined` = any (DNS rebinding defence). */
  allowedHosts: string[] | undefined;
  /** `tasks/*` and task-creating `tools/call` take the hot path (apps/gateway/src/hot-path.ts, HOT_PATH). */
  hotPath: boolean;
  /** Non-terminal tasks one principal may hold, counted in Redis (MAX_OUTSTANDING_TASKS). */
  maxOutstandingTasks: number;
  /** Largest stored tool result, bytes of serialized JSON (MAX_RESULT_BYTES, N-09). */
  maxResultBytes: number;
  /** Bytes of result JSON one principal may have stored at once (MAX_RESULT_BYTES_PER_PRINCIPAL, N-09). */
  maxResultBytesPerPrincipal: number;
  /** Steps of one principal that run at once across all workers (MAX_RUNNING_STEPS_PER_PRINCIPAL, D9). */
  maxRunningStepsPerPrincipal: number;
  /** Longest run of a step of a tool without its own `timeoutMs` (ms, TOOL_TIMEOUT_MS). */
  toolTimeoutMs: number;
  /** Prometheus metrics. */
  metrics: {
    /** Gateway: `/metrics` served at all. */
    enabled: boolean;
    /** Gateway: a separate listener for `/metrics` (`undefined` = on the MCP port). */
    listen?: { host: string; port: number };
  };
  /**
   * Worker: the operations port (`/metrics`, `/healthz`, `/readyz`); `undefined` = off.
   * `freePortIfTaken`: WORKER_HTTP_PORT was not set, so a taken `port` means any free one.
   */
  workerHttp?: { host: string; port: number; freePortIfTaken: boolean };
  /** Worker heartbeat interval (ms); a worker is alive for 3 intervals after its last heartbeat. */
  heartbeatMs: number;
  /** Traces (case N-14): exported over OTLP/HTTP only when `enabled`. */
  tracing: { enabled: boolean; protocol: 'http/protobuf' | 'http/json' };
  /** Completion webhooks; webhooks.ts. */
  webhooks: WebhookConfig;
  /** The queue view's admin listener, gateway only; `undefined` = off. admin.ts. */
  admin?: AdminConfig;
}
