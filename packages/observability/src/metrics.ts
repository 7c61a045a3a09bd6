/**
 * Prometheus metrics with prom-client: one registry per process, every metric of
 * the service declared here, so the names below are the whole list (docs/observability.md "Metrics").
 *
 * Both roles (gateway and worker):
 *   mcp_tasks_finished_total{tool,status}        tasks that reached completed | failed | cancelled,
 *                                                counted by the process that wrote the transition
 *                                                (sum over all processes)
 *   mcp_task_duration_seconds{tool,status}       creation → that transition (histogram)
 *   mcp_redis_errors_total{connection}           Redis connection errors (ioredis `error` events)
 *   mcp_queue_jobs{state}                        tools queue: waiting | active | delayed (collected
 *                                                on scrape from Redis: cluster-wide, aggregate with max)
 *   mcp_tasks_input_required                     tasks parked waiting for an answer (on scrape)
 *   mcp_queue_oldest_waiting_seconds             age of the oldest step not started (on scrape)
 *   mcp_workers_alive                            workers whose heartbeat is current (on scrape)
 *   process_*, nodejs_*                          prom-client's default process metrics
 * Gateway:
 *   mcp_requests_total{method,status,outcome}    POST /mcp by JSON-RPC method, HTTP status and
 *                                                outcome (`ok`, the JSON-RPC error code, `error`
 *                                                for an HTTP error without one, `aborted`)
 *   mcp_request_duration_seconds{method}         request → response end (an SSE stream's whole life)
 *   mcp_sse_streams_open{method}                 SSE responses open now
 *   mcp_tasks_created_total{tool,mode}           tasks created (mode `task` or `sync`)
 * Worker:
 *   mcp_steps_total{tool,outcome}                steps run: completed | failed | cancelled |
 *                                                input_required | released | skipped
 *   mcp_step_duration_seconds{tool,outcome}      one step on the worker (histogram)
 *   mcp_worker_concurrency                       jobs this worker runs at once (its capacity)
 *
 * Labels are bounded: `method` is a known MCP method or `other`; `tool` a tool of the
 * registry or `other`; codes outside the JSON-RPC range become `other_error`. No principal,
 * token, task id or argument is ever a label.
 * Gauges read from Redis are collected on scrape, at most once a second (memoized) and within
 * 1.5 s; when Redis fails they are left out of that scrape rather than reported stale.
 */
import { ErrorCode, isReservedErrorCode } from '@mcp-tasks/errors';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

export { Registry };

/** What the Redis-backed gauges read (see packages/jobs queueDepth). */
export interface QueueDepthSample {
  waiting: number;
  active: number;
  delayed: number;
  inputRequired: number;
  /** ms. */
  oldestWaitingMs: number;
}

/** Sources of the gauges collected on scrape; absent ones are not registered. */
export interface MetricSources {
  queueDepth?: () => Promise<QueueDepthSample>;
  workersAlive?: () => Promise<number>;
}

/** Terminal statuses counted by `mcp_tasks_finished_total`. */
export type FinishedStatus = 'completed' | 'failed' | 'cancelled';

/** Buckets (seconds) for durations from milliseconds (polls) to hours (tasks). */
const REQUEST_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];
const TASK_BUCKETS = [0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 24 * 3600];

/** Keeps the last result of `fn` for `ms`, and fails it after `timeoutMs`. */
function memo<T>(fn: () => Promise<T>, ms = 1000, timeoutMs = 1500): () => Promise<T> {
  let at = 0;
  let last: Promise<T> | undefined;
  return () => {
    if (!last || Date.now() - at > ms) {
      at = Date.now();
      let timer: ReturnType<typeof setTimeout> | undefined;
      last = Promise.race([
        fn(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error('metrics source timed out')), timeoutMs);
          timer.unref();
        }),
      ]).finally(() => clearTimeout(timer));
      last.catch(() => {
        at = 0; // try again on the next scrape
      });
    }
    return last;
  };
}

/** The tools queue's gauges (jobs by state, tasks in input_required, oldest waiting step), read at scrape time. */
function queueGauges(registry: Registry, queueDepth: NonNullable<MetricSources['queueDepth']>): void {
  const depth = memo(queueDepth);
  new Gauge({
    name: 'mcp_queue_jobs',
    help: 'Jobs of the tools queue by state (waiting: steps not started; active: running; delayed: input timeouts)',
    labelNames: ['state'] as const,
    registers: [registry],
    async collect() {
      this.reset();
      const d = await depth().catch(() => undefined);
      if (!d) return;
      this.set({ state: 'waiting' }, d.waiting);
      this.set({ state: 'active' }, d.active);
      this.set({ state: 'delayed' }, d.delayed);
    },
  });
  new Gauge({
    name: 'mcp_tasks_input_required',
    help: 'Tasks parked in input_required (waiting for an answer, holding no worker)',
    registers: [registry],
    async collect() {
      this.reset();
      const d = await depth().catch(() => undefined);
      if (d) this.set(d.inputRequired);
    },
  });
  new Gauge({
    name: 'mcp_queue_oldest_waiting_seconds',
    help: 'Age of the oldest step job not started yet (seconds; 0 when none waits)',
    registers: [registry],
    async collect() {
      this.reset();
      const d = await depth().catch(() => undefined);
      if (d) this.set(d.oldestWaitingMs / 1000);
    },
  });
}

/** The metrics both roles have. */
function commonMetrics(registry: Registry, sources: MetricSources) {
  collectDefaultMetrics({ register: registry });
  const tasksFinished = new Counter({
    name: 'mcp_tasks_finished_total',
    help: 'Tasks that reached a terminal status, by tool and status (counted where the transition was written)',
    labelNames: ['tool', 'status'] as const,
    registers: [registry],
  });
  const taskDuration = new Histogram({
    name: 'mcp_task_duration_seconds',
    help: 'Time from task creation to its terminal status (seconds)',
    labelNames: ['tool', 'status'] as const,
    buckets: TASK_BUCKETS,
    registers: [registry],
  });
  const redisErrors = new Counter({
    name: 'mcp_redis_errors_total',
    help: 'Redis connection errors, by connection',
    labelNames: ['connection'] as const,
    registers: [registry],
  });
  if (sources.queueDepth) queueGauges(registry, sources.queueDepth);
  if (sources.workersAlive) {
    const alive = memo(sources.workersAlive);
    new Gauge({
      name: 'mcp_workers_alive',
      help: 'Workers whose heartbeat is current',
      registers: [registry],
      async collect() {
        this.reset();
        const n = await alive().catch(() => undefined);
        if (n !== undefined) this.set(n);
      },
    });
  }
  return {
    tasksFinished,
    taskDuration,
    redisErrors,
    /** Counts a terminal transition; `createdAt` (ms) adds the task's duration. */
    taskFinished(tool: string, status: FinishedStatus, createdAt?: number, now = Date.now()) {
      tasksFinished.inc({ tool, status });
      if (createdAt !== undefined && Number.isFinite(createdAt) && createdAt > 0)
        taskDuration.observe({ tool, status }, Math.max(0, now - createdAt) / 1000);
    },
  };
}

/** The gateway's metrics (see the module doc). */
export function createGatewayMetrics(sources: MetricSources = {}) {
  const registry = new Registry();
  return {
    registry,
    ...commonMetrics(registry, sources),
    requests: new Counter({
      name: 'mcp_requests_total',
      help: 'MCP requests (POST /mcp) by JSON-RPC method, HTTP status and outcome (ok, JSON-RPC error code, error, aborted)',
      labelNames: ['method', 'status', 'outcome'] as const,
      registers: [registry],
    }),
    requestDuration: new Histogram({
      name: 'mcp_request_duration_seconds',
      help: 'MCP request duration until the response ended (an SSE stream: its whole life), seconds',
      labelNames: ['method'] as const,
      buckets: REQUEST_BUCKETS,
      registers: [registry],
    }),
    sseStreams: new Gauge({
      name: 'mcp_sse_streams_open',
      help: 'SSE responses open now, by JSON-RPC method',
      labelNames: ['method'] as const,
      registers: [registry],
    }),
    tasksCreated: new Counter({
      name: 'mcp_tasks_created_total',
      help: 'Tasks created, by tool and mode (task: the client holds a handle; sync: a held synchronous call)',
      labelNames: ['tool', 'mode'] as const,
      registers: [registry],
    }),
  };
}

export type GatewayMetrics = ReturnType<typeof createGatewayMetrics>;

/** The worker's metrics (see the module doc). */
export function createWorkerMetrics(concurrency: number, sources: MetricSources = {}) {
  const registry = new Registry();
  const common = commonMetrics(registry, sources);
  new Gauge({
    name: 'mcp_worker_concurrency',
    help: 'Jobs this worker runs at the same time (WORKER_CONCURRENCY)',
    registers: [registry],
  }).set(concurrency);
  return {
    registry,
    ...common,
    steps: new Counter({
      name: 'mcp_steps_total',
      help: 'Task steps run by this worker, by tool and outcome',
      labelNames: ['tool', 'outcome'] as const,
      registers: [registry],
    }),
    stepDuration: new Histogram({
      name: 'mcp_step_duration_seconds',
      help: 'Duration of one task step on a worker (seconds)',
      labelNames: ['tool', 'outcome'] as const,
      buckets: TASK_BUCKETS,
      registers: [registry],
    }),
  };
}

export type WorkerMetrics = ReturnType<typeof createWorkerMetrics>;

/** MCP methods that are their own `method` label; anything else is `other` (bounded cardinality). */
const KNOWN_METHODS = new Set([
  'initialize',
  'ping',
  'server/discover',
  'tools/list',
  'tools/call',
  'tasks/get',
  'tasks/update',
  'tasks/cancel',
  'tasks/list',
  'tasks/result',
  'prompts/list',
  'prompts/get',
  'resources/list',
  'resources/read',
  'resources/templates/list',
  'resources/subscribe',
  'resources/unsubscribe',
  'completion/complete',
  'logging/setLevel',
  'subscriptions/listen',
]);

/** The `method` label of a JSON-RPC method: itself when known, `notifications` for any notification, `none` without one, else `other`. */
export function methodLabel(method: unknown): string {
  if (typeof method !== 'string') return 'none';
  if (KNOWN_METHODS.has(method)) return method;
  return method.startsWith('notifications/') ? 'notifications' : 'other';
}

/** The `outcome` label of a JSON-RPC error code: the code within the JSON-RPC/MCP range and our -31429, else `other_error`. */
export function codeLabel(code: unknown): string {
  return isReservedErrorCode(code) || code === ErrorCode.LimitExceeded ? String(code) : 'other_error';
}
