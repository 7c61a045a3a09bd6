/**
 * Worker process: runs tool steps from the `tools` queue (every shard of it, TOOL_QUEUE_SHARDS), the input timeouts, the
 * reconciler (maintenance queue) and completion webhook deliveries (`webhooks` queue,
 * webhook-worker.ts). Never imports Fastify. Publishes a heartbeat (every
 * WORKER_HEARTBEAT_MS, presence.ts) and serves `/metrics`, `/healthz`, `/readyz` on
 * WORKER_HTTP_PORT; exports a span per step when tracing is on (N-14).
 *
 * Signals: SIGTERM/SIGINT/SIGHUP → drain.ts: stop fetching, tell running steps (`ctx.drainSignal`) so
 * that they checkpoint and move to another worker at once, release the rest after
 * SHUTDOWN_GRACE_MS; the process exits within SHUTDOWN_GRACE_MS + 3 s whatever Redis does.
 * A liveness key refreshed from a worker thread (liveness.ts) lets the other workers move the
 * steps of a killed worker back to the queue within seconds (lost-workers.ts, R-03).
 *
 * Start: `--help` / `--version` are answered before anything else; then the
 * configuration, the tool modules (MCP_TOOL_MODULES), Redis; any failure is one line on stderr
 * and exit 1. The worker advertises the tools it runs (`<prefix>:workers`, expiring) so that
 * gateways can report tools no worker runs; `worker.ready` names the Redis (credentials
 * redacted), key prefix, tool sets and modules.
 *
 * The start-up, in this order: tools, Redis and the task store, metrics, the operations port
 * (ops-port.ts), the queues, the BullMQ connection (bull-connection.ts), the tools workers of
 * every shard (tools-workers.ts), the liveness and the lost-worker check, the cancel fan-out,
 * the maintenance and webhooks workers and the reconciler's schedule (maintenance-workers.ts),
 * the tools advert, the heartbeat last; then the signal handlers (shutdown.ts).
 */
import { handleEntryArgs, loadConfigOrExit, startupSummary, type Config } from '@mcp-tasks/config';
import {
  createLogger,
  createWorkerMetrics,
  startTracing,
  type Logger,
  type OpsServer,
  type Tracing,
  type WorkerMetrics,
} from '@mcp-tasks/observability';
import { Checkpoints, TaskStore } from '@mcp-tasks/task-store';
import {
  connectProcessRedis,
  JobQueues,
  queueDepthAll,
  startHeartbeat,
  startRedisErrorLog,
  warnIfEvicting,
  type Heartbeat,
  type RedisClient,
  type RedisClock,
  WorkerPresence,
  newWorkerId,
  WebhookOutbox,
  WorkerToolsAdvert,
} from '@mcp-tasks/jobs';
import { createRegistry, loadToolModules, type ToolRegistry } from '@mcp-tasks/tools/internal';
import { watchContinuity } from './redis-continuity.js';
import { createStepObserver } from './step-observer.js';
import { startLiveness } from './liveness.js';
import { startLostWorkerCheck } from './lost-workers.js';
import { startOperationsPort } from './ops-port.js';
import { connectBullOrExit } from './bull-connection.js';
import { startToolsWorkers } from './tools-workers.js';
import { startMaintenanceWorkers } from './maintenance-workers.js';
import { onShutdownSignals } from './shutdown.js';

const HELP = `Usage: npm run worker [-- --help | --version]
       node apps/worker/dist/main.js [--help | --version]

An MCP task worker: runs the tools' steps (BullMQ jobs from Redis), the input timeouts and the
reconciler. Start as many as you like, on the Redis of the gateways, with the same tool sets
and tool modules. Its operations port (WORKER_HTTP_PORT; unset: 9464, or a free port when
9464 is taken, logged; off disables it) serves /metrics, /healthz and /readyz. SIGTERM,
Ctrl-C or SIGHUP lets running steps finish, then hands the rest to other workers.

  WORKER_CONCURRENCY steps one worker runs at once (50)`;

handleEntryArgs(process.argv.slice(2), 'worker', HELP);

/** Starts the worker (the steps in the module doc's order); exits on a failure before `worker.ready`. */
async function main() {
  const config = loadConfigOrExit('worker', 'worker');
  const registry = await loadRegistryOrExit(config);
  const log = createLogger('worker', config.logLevel);
  const tracing = startTracing('worker', config.tracing, log);
  const { redis, sub, clock, store } = await openTaskStore(config);
  // Redis outages as this worker sees them: the reconciler's orphan check waits out one hold
  // period after one.
  const continuity = watchContinuity(redis);
  const presence = new WorkerPresence(redis, config.keyPrefix);
  /** `shuttingDown`: set by the first SIGTERM / SIGINT (shutdown.ts). */
  const lifecycle = { shuttingDown: false };
  let queues: JobQueues; // assigned below; its error handler and the gauges need the metrics first
  const metrics = startMetrics(config, { redis, sub, presence, queues: () => queues }, log);
  await warnIfEvicting(redis, log);

  // Operations port (/metrics, /healthz, /readyz) before anything that takes work or says this
  // worker is alive: a port that cannot be bound stops the process before it fetches a job or
  // writes a heartbeat (readiness.ts says "starting" until then).
  const workerId = newWorkerId();
  let heartbeat: Heartbeat | undefined; // the last step of the start-up
  const ops = await startOperationsPort({
    http: config.workerHttp,
    metrics,
    log,
    readiness: {
      redis,
      workerId,
      isShuttingDown: () => lifecycle.shuttingDown,
      heartbeat: () => heartbeat,
      toolsRunning: () => toolsWorkers.every((w) => w.isRunning()),
    },
  });

  queues = openQueues(config, redis, metrics, log);
  const toolLabel = (name: string | undefined) => (name && registry.get(name) ? name : 'other');
  const observeStep = createStepObserver({
    metrics,
    toolLabel,
    ...(tracing.enabled ? { tracer: tracing.tracer } : {}),
  });
  // Completion webhooks: every task this process ends gets its delivery enqueued.
  const webhooks = new WebhookOutbox(redis, config.keyPrefix, store, config.webhooks, log);
  store.onTerminal(webhooks.listener);
  const bull = await connectBullOrExit(config, metrics, log);

  const checkpoints = new Checkpoints(store);
  const drain = new AbortController();
  const shared = { config, store, queues, log, metrics, toolLabel };
  const { toolsWorkers, cancelHere } = startToolsWorkers({
    ...shared,
    registry,
    observeStep,
    workerOpts: bull.workerOpts,
    checkpoints,
    drain,
    isShuttingDown: () => lifecycle.shuttingDown,
  });
  const lost = { redis, queues, checkpoints, continuity, log };
  const { liveness, stopLostCheck } = await startLostWorkerWatch(config, lost, toolsWorkers);

  // Cancel fan-out: every worker hears every cancel; cancelJob is a no-op where the job is not running.
  await sub.subscribe(store.cancelChannel);
  sub.on('message', (channel: string, jobId: string) => {
    if (channel === store.cancelChannel) cancelHere(jobId, 'cancelled');
  });
  const background = { ...shared, ...bull, continuity, webhooks, clock, redis };
  const { maintenanceWorker, webhookWorker } = await startMaintenanceWorkers(background);

  // What this worker runs, for the gateways' mismatch check (packages/jobs worker-tools.ts).
  const advert = new WorkerToolsAdvert(redis, config.keyPrefix, newWorkerId(), registry.workerToolNames(), (err) =>
    log.warn({ err: err.message }, 'worker.advert_failed'),
  );
  await advert.start();

  // Heartbeat, last: gateways count live workers from these (their readiness, tasks'
  // statusMessage), so nothing that can stop the start-up comes after the first one; a worker
  // that exits while starting is never counted.
  heartbeat = startHeartbeat(presence, workerId, config.heartbeatMs, (err) =>
    log.warn({ err: err.message }, 'heartbeat.failed'),
  );
  await heartbeat.first;
  logReady({ config, registry, log, workerId, ops, tracing, clock });

  const otherWorkers = [maintenanceWorker, webhookWorker];
  const closing = { heartbeat, advert, continuity, clock, liveness, ops, tracing, queues, webhooks, sub, redis };
  onShutdownSignals({
    ...closing,
    lifecycle,
    graceMs: config.worker.shutdownGraceMs,
    log,
    stopLostCheck,
    toolsWorkers,
    otherWorkers,
    drain,
    connection: bull.connection,
  });
}

/**
 * Loads the tool modules (MCP_TOOL_MODULES) and the tool sets, before Redis: a module that
 * cannot load, or a name defined twice, stops the process with one line before it touches anything.
 */
async function loadRegistryOrExit(config: Config): Promise<ToolRegistry> {
  // Tools before Redis: a module that cannot load, or a name defined twice, stops the process
  // with one line before it touches anything.
  try {
    return createRegistry(config.toolsets, config, [], await loadToolModules(config.toolModules));
  } catch (e) {
    console.error(`worker: ${(e as Error).message}`);
    process.exit(1);
  }
}

/** Connects the main and subscriber Redis clients (or exits) and opens the task store on them. */
async function openTaskStore(config: Config) {
  const { clients, clock } = await connectProcessRedis('worker', config.redis, {
    redis: { role: 'worker', name: 'mcp-worker' },
    sub: { role: 'worker', name: 'mcp-worker-sub' },
  });
  const { redis, sub } = clients;
  const store = new TaskStore(redis, config.keyPrefix, clock, {
    progressStreamKeepMs: config.sync.progressStreamKeepMs,
  });
  return { redis, sub, clock, store };
}

/**
 * The worker's metrics (`/metrics`): the gauges read the tools queue's depth (every shard) and the
 * live workers; errors of the main and subscriber Redis clients are logged and counted.
 */
function startMetrics(
  config: Config,
  d: { redis: RedisClient; sub: RedisClient; presence: WorkerPresence; queues: () => JobQueues },
  log: Logger,
): WorkerMetrics {
  const { redis, sub, presence } = d;
  const metrics = createWorkerMetrics(config.worker.concurrency, {
    queueDepth: () => queueDepthAll(d.queues().toolShards),
    workersAlive: () => presence.count(),
  });
  startRedisErrorLog(metrics.redisErrors, log, [
    { client: redis, connection: 'worker', event: 'redis.error' },
    { client: sub, connection: 'subscriber', event: 'redis.sub_error' },
  ]);
  return metrics;
}

/** The queues (every shard of the tools queue, maintenance); their errors are logged and counted (`connection: 'queue'`). */
function openQueues(config: Config, redis: RedisClient, metrics: WorkerMetrics, log: Logger): JobQueues {
  return new JobQueues(
    redis,
    config.keyPrefix,
    config.task.ttlMs,
    (err) => {
      metrics.redisErrors.inc({ connection: 'queue' });
      log.warn({ err: err.message }, 'queue.error');
    },
    config.toolQueueShards,
  );
}

/**
 * Starts this worker's liveness key, refreshed from a worker thread (liveness.ts), and awaits its
 * first write; then the check, every 500 ms, that moves the steps of a lost worker back to the
 * queue (lost-workers.ts, R-03). Returns the liveness (to stop on shutdown) and the check's stop.
 */
async function startLostWorkerWatch(
  config: Config,
  d: {
    redis: RedisClient;
    queues: JobQueues;
    checkpoints: Checkpoints;
    continuity: ReturnType<typeof watchContinuity>;
    log: Logger;
  },
  toolsWorkers: { id: string }[],
) {
  // Liveness from a worker thread, and the check that moves a lost worker's steps.
  const liveness = startLiveness({
    redis: config.redis,
    keyPrefix: config.keyPrefix,
    ids: toolsWorkers.map((w) => w.id),
    lostAfterMs: config.worker.lostAfterMs,
    knownForMs: 2 * config.worker.lockDurationMs,
  });
  await liveness.first;
  const stopLostCheck = startLostWorkerCheck(
    {
      redis: d.redis,
      keyPrefix: config.keyPrefix,
      shards: d.queues.toolShards,
      checkpoints: d.checkpoints,
      continuity: d.continuity,
      lostAfterMs: config.worker.lostAfterMs,
      maxStalledCount: config.worker.maxStalledCount,
      log: d.log,
    },
    500,
  );
  return { liveness, stopLostCheck };
}

/** Logs `worker.ready`: the start-up summary (Redis with credentials redacted, key prefix, tool sets and modules) and this worker's settings. */
function logReady(o: {
  config: Config;
  registry: ToolRegistry;
  log: Logger;
  workerId: string;
  ops: OpsServer | undefined;
  tracing: Tracing;
  clock: RedisClock;
}): void {
  const { config, registry, ops, clock } = o;
  const http = config.workerHttp;
  o.log.info(
    {
      ...startupSummary(config, 'worker'),
      tools: registry.size,
      concurrency: config.worker.concurrency,
      toolQueueShards: config.toolQueueShards,
      workerId: o.workerId,
      http: ops ? `http://${http!.host}:${ops.port}` : 'off',
      tracing: o.tracing.enabled,
      webhooks: config.webhooks.enabled,
      redisClockSkewMs: clock.skewMs,
    },
    'worker.ready',
  );
}

main().catch((e) => {
  console.error(`worker: fatal: ${(e as Error).message}`);
  process.exit(1);
});
