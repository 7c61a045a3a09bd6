/**
 * Worker process: runs tool steps from the `tools` queue (every shard of it, TOOL_QUEUE_SHARDS), the input timeouts, the
 * reconciler (maintenance queue) and completion webhook deliveries (`webhooks` queue,
 * webhook-worker.ts). Never imports Fastify. Publishes a heartbeat (every
 * WORKER_HEARTBEAT_MS, presence.ts) and serves `/metrics`, `/healthz`, `/readyz` on
 * WORKER_HTTP_PORT; exports a span per step when tracing is on (N-14).
 *
 * Signals: SIGTERM/SIGINT → drain.ts: stop fetching, tell running steps (`ctx.drainSignal`) so
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
 */
import { Worker, type Job } from 'bullmq';
import { handleEntryArgs, loadConfigOrExit, startupSummary } from '@mcp-tasks/config';
import { createLogger, createWorkerMetrics, startOpsServer, startTracing } from '@mcp-tasks/observability';
import { Checkpoints, PrincipalShares, TaskStore } from '@mcp-tasks/task-store';
import {
  bullPrefix,
  connectOrExplain,
  connectProcessRedis,
  createRedis,
  JobQueues,
  queueDepthAll,
  startHeartbeat,
  startRedisErrorLog,
  warnIfEvicting,
  type Heartbeat,
  WorkerPresence,
  JOB_INPUT_TIMEOUT,
  JOB_RECONCILE,
  MAINTENANCE_QUEUE,
  newWorkerId,
  TOOLS_QUEUE,
  toolsPrefix,
  WebhookOutbox,
  WorkerToolsAdvert,
  type StepJobData,
} from '@mcp-tasks/jobs';
import { createRegistry, loadToolModules } from '@mcp-tasks/tools/internal';
import { createShareGate } from './principal-share.js';
import { createStepProcessor } from './processor.js';
import { resultDeps } from './result.js';
import { workerReadiness } from './readiness.js';
import { createMaintenanceProcessor } from './maintenance.js';
import { watchContinuity } from './redis-continuity.js';
import { createStepObserver } from './step-observer.js';
import { drainAndExit } from './drain.js';
import { stepJobEnds } from './step-job-ends.js';
import { startLiveness } from './liveness.js';
import { startLostWorkerCheck } from './lost-workers.js';
import { startWebhookWorker } from './webhook-worker.js';

const HELP = `Usage: npm run worker [-- --help | --version]
       node apps/worker/dist/main.js [--help | --version]

An MCP task worker: runs the tools' steps (BullMQ jobs from Redis), the input timeouts and the
reconciler. Start as many as you like, on the Redis of the gateways, with the same tool sets
and tool modules. Its operations port (WORKER_HTTP_PORT; unset: 9464, or a free port when
9464 is taken, logged; off disables it) serves /metrics, /healthz and /readyz. SIGTERM or
Ctrl-C lets running steps finish, then hands the rest to other workers.

  WORKER_CONCURRENCY steps one worker runs at once (50)`;

handleEntryArgs(process.argv.slice(2), 'worker', HELP);

async function main() {
  const config = loadConfigOrExit('worker', 'worker');
  // Tools before Redis: a module that cannot load, or a name defined twice, stops the process
  // with one line before it touches anything.
  let registry;
  try {
    registry = createRegistry(config.toolsets, [], await loadToolModules(config.toolModules));
  } catch (e) {
    console.error(`worker: ${(e as Error).message}`);
    process.exit(1);
  }
  const log = createLogger('worker', config.logLevel);
  const tracing = startTracing('worker', config.tracing, log);
  const { clients, clock } = await connectProcessRedis('worker', config.redis, {
    redis: { role: 'worker', name: 'mcp-worker' },
    sub: { role: 'worker', name: 'mcp-worker-sub' },
  });
  const { redis, sub } = clients;
  const store = new TaskStore(redis, config.keyPrefix, clock, {
    progressStreamKeepMs: config.sync.progressStreamKeepMs,
  });
  // Redis outages as this worker sees them: the reconciler's orphan check waits out one hold
  // period after one.
  const continuity = watchContinuity(redis);
  const presence = new WorkerPresence(redis, config.keyPrefix);
  let shuttingDown = false;
  let queues: JobQueues; // assigned below; its error handler and the gauges need the metrics first
  const metrics = createWorkerMetrics(config.worker.concurrency, {
    queueDepth: () => queueDepthAll(queues.toolShards),
    workersAlive: () => presence.count(),
  });
  startRedisErrorLog(metrics.redisErrors, log, [
    { client: redis, connection: 'worker', event: 'redis.error' },
    { client: sub, connection: 'subscriber', event: 'redis.sub_error' },
  ]);
  await warnIfEvicting(redis, log);

  // Operations port (/metrics, /healthz, /readyz) before anything that takes work or says this
  // worker is alive: a port that cannot be bound stops the process before it fetches a job or
  // writes a heartbeat (readiness.ts says "starting" until then).
  const workerId = newWorkerId();
  let heartbeat: Heartbeat | undefined; // the last step of the start-up
  const readyz = workerReadiness({
    redis,
    workerId,
    isShuttingDown: () => shuttingDown,
    heartbeat: () => heartbeat,
    toolsRunning: () => toolsWorkers.every((w) => w.isRunning()),
  });
  const http = config.workerHttp;
  const ops = http
    ? await startOpsServer({ ...http, registry: metrics.registry, healthz: true, readyz }).catch((e: Error) => {
        console.error(
          `worker: cannot listen on ${http.host}:${http.port} (WORKER_HTTP_PORT; off disables it): ${e.message}`,
        );
        process.exit(1);
      })
    : undefined;
  // WORKER_HTTP_PORT unset and its default taken (another worker on this host): any free port.
  if (ops?.portWasTaken)
    log.warn(
      { wanted: http!.port, port: ops.port },
      'worker.http_port_taken: WORKER_HTTP_PORT is not set and its default is in use; /metrics, /healthz and /readyz are on the port logged here',
    );

  queues = new JobQueues(
    redis,
    config.keyPrefix,
    config.task.ttlMs,
    (err) => {
      metrics.redisErrors.inc({ connection: 'queue' });
      log.warn({ err: err.message }, 'queue.error');
    },
    config.toolQueueShards,
  );
  const toolLabel = (name: string | undefined) => (name && registry.get(name) ? name : 'other');
  const observeStep = createStepObserver({
    metrics,
    toolLabel,
    ...(tracing.enabled ? { tracer: tracing.tracer } : {}),
  });
  // Completion webhooks: every task this process ends gets its delivery enqueued.
  const webhooks = new WebhookOutbox(redis, config.keyPrefix, store, config.webhooks, log);
  store.onTerminal(webhooks.listener);

  // BullMQ duplicates this client for its blocking connection.
  const connection = createRedis(config.redis, 'worker', 'mcp-bull');
  await connectOrExplain(connection, config.redis).catch((e: Error) => {
    console.error(`worker: ${e.message}`);
    process.exit(1);
  });
  connection.on('error', (err: Error) => {
    metrics.redisErrors.inc({ connection: 'bullmq' });
    log.warn({ err: err.message }, 'redis.bull_error');
  });
  const workerOpts = {
    connection,
    prefix: bullPrefix(config.keyPrefix),
    concurrency: config.worker.concurrency,
    lockDuration: config.worker.lockDurationMs,
    // Renewed often, so an outage up to lockDuration − lockRenewTime − the 2 s reconnect
    // back-off (17 s by default) finds every lock still valid when Redis is back.
    lockRenewTime: config.worker.lockRenewMs,
    stalledInterval: config.worker.stalledIntervalMs,
    maxStalledCount: config.worker.maxStalledCount,
  };

  const { inputTimedOut, stepJobFailed } = stepJobEnds({
    store,
    log,
    inputTimeoutMs: config.task.inputTimeoutMs,
    onFailed: (tool, createdAt) => metrics.taskFinished(toolLabel(tool), 'failed', createdAt),
  });

  // One BullMQ Worker per shard of the tools queue (TOOL_QUEUE_SHARDS), sharing the
  // process's WORKER_CONCURRENCY: each runs up to ceil(concurrency / shards) steps at once.
  const toolsWorkers: Worker<StepJobData>[] = [];
  /** Aborts job `jobId` on whichever shard's worker of this process runs it (a no-op elsewhere). */
  const cancelHere = (jobId: string, reason: string) => {
    for (const w of toolsWorkers) w.cancelJob(jobId, reason);
  };
  const checkpoints = new Checkpoints(store);
  const drain = new AbortController();
  const processStep = createStepProcessor({
    store,
    queues,
    registry,
    log,
    settings: { researchPhaseMs: config.demo.researchPhaseMs, ...config.testing },
    inputTimeoutMs: config.task.inputTimeoutMs,
    progressMinIntervalMs: config.sync.progressMinIntervalMs,
    maxResultBytes: config.maxResultBytes,
    ...resultDeps(store, config),
    toolTimeoutMs: config.toolTimeoutMs,
    isShuttingDown: () => shuttingDown,
    cancelLocal: cancelHere,
    checkpoints,
    checkpointMaxBytes: config.worker.checkpointMaxBytes,
    drainSignal: drain.signal,
  });

  // A principal's share of the workers (principal-share.ts): leases as long as a job lock.
  const shareGate = createShareGate({
    shares: new PrincipalShares(store, config.maxRunningStepsPerPrincipal, config.worker.lockDurationMs),
    queues,
    log,
  });
  const runToolJob = async (job: Job<StepJobData>, token?: string, signal?: AbortSignal) => {
    if (job.name === JOB_INPUT_TIMEOUT) return inputTimedOut(job);
    return shareGate(job, token, () => observeStep(job, () => processStep(job, token, signal)));
  };
  const perShard = Math.ceil(config.worker.concurrency / queues.toolShards.length);
  for (let shard = 0; shard < queues.toolShards.length; shard++) {
    const toolsWorker = new Worker<StepJobData>(TOOLS_QUEUE, runToolJob, {
      ...workerOpts,
      prefix: toolsPrefix(config.keyPrefix, shard),
      concurrency: perShard,
    });
    toolsWorkers.push(toolsWorker);
    toolsWorker.on('error', (err) => log.warn({ err: err.message, shard }, 'worker.error'));
    // BullMQ emits `lockRenewalFailed` only for jobs whose lock Redis *answered* is gone or held by
    // another token (extendLocks-1.lua): the lock is really lost, another worker may run the step,
    // so this one stops. A renewal that could not reach Redis (an outage) is an `error` event
    // instead: the command waits for the reconnect (maxRetriesPerRequest null) and the step goes on
    // while its lock is still valid on the server.
    toolsWorker.on('lockRenewalFailed', (ids: string[]) =>
      ids.forEach((id) => {
        log.warn({ jobId: id, shard }, 'step.lock_lost');
        toolsWorker.cancelJob(id, 'lock-lost');
      }),
    );
    toolsWorker.on('failed', (job, err) => stepJobFailed(job, err));
  }

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
      redis,
      keyPrefix: config.keyPrefix,
      shards: queues.toolShards,
      checkpoints,
      continuity,
      lostAfterMs: config.worker.lostAfterMs,
      maxStalledCount: config.worker.maxStalledCount,
      log,
    },
    500,
  );

  // Cancel fan-out: every worker hears every cancel; cancelJob is a no-op where the job is not running.
  await sub.subscribe(store.cancelChannel);
  sub.on('message', (channel: string, jobId: string) => {
    if (channel === store.cancelChannel) cancelHere(jobId, 'cancelled');
  });

  const maintenanceWorker = new Worker(
    MAINTENANCE_QUEUE,
    createMaintenanceProcessor(
      {
        store,
        queues,
        log,
        afterMs: config.worker.reconcileAfterMs,
        inputTimeoutMs: config.task.inputTimeoutMs,
        inputSlotReleaseMs: config.task.inputSlotReleaseMs,
        syncHolderTimeoutMs: config.worker.syncHolderTimeoutMs,
        continuity,
        maxTtlMs: config.task.ttlMs,
        onFinished: (tool, status, createdAt) => metrics.taskFinished(toolLabel(tool), status, createdAt),
        ...(config.webhooks.enabled ? { webhooks } : {}),
      },
      () => clock.now(),
    ),
    { ...workerOpts, concurrency: 1 },
  );
  maintenanceWorker.on('error', (err) => log.warn({ err: err.message }, 'maintenance.error'));
  // Runs even without a webhook target here, so jobs a differently configured process enqueued
  // end (logged as no_target) instead of waiting forever.
  const webhookWorker = startWebhookWorker({ connection, keyPrefix: config.keyPrefix, config: config.webhooks, log });
  // The reconciler's schedule lives in Redis: re-assert it (idempotent) at start, on every
  // reconnect and every minute, so a Redis that lost its data does not stop it for good.
  const ensureReconciler = () =>
    queues.maintenance
      .upsertJobScheduler(
        'reconcile',
        { every: config.worker.reconcileIntervalMs },
        { name: JOB_RECONCILE, opts: { removeOnComplete: { count: 10 }, removeOnFail: { count: 50 } } },
      )
      .catch((err: Error) => log.warn({ err: err.message }, 'reconcile.schedule_failed'));
  await ensureReconciler();
  redis.on('ready', () => void ensureReconciler());
  const reschedule = setInterval(() => void ensureReconciler(), 60_000);
  reschedule.unref();

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

  log.info(
    {
      ...startupSummary(config, 'worker'),
      tools: registry.size,
      concurrency: config.worker.concurrency,
      toolQueueShards: config.toolQueueShards,
      workerId,
      http: ops ? `http://${http!.host}:${ops.port}` : 'off',
      tracing: tracing.enabled,
      webhooks: config.webhooks.enabled,
      redisClockSkewMs: clock.skewMs,
    },
    'worker.ready',
  );

  const shutdown = async (sig: string) => {
    if (shuttingDown) return;
    shuttingDown = true;
    stopLostCheck();
    await drainAndExit(sig, {
      graceMs: config.worker.shutdownGraceMs,
      log,
      toolsWorkers,
      otherWorkers: [maintenanceWorker, webhookWorker],
      drain,
      // It takes no new step from now on: it no longer counts as a live worker, nor in the
      // gateways' mismatch check.
      leave: () => Promise.all([heartbeat.stop(), advert.stop()]),
      finish: async () => {
        continuity.stop();
        clock.stop();
        await liveness.stop();
        await Promise.allSettled([ops?.close(), tracing.shutdown()]);
        await Promise.allSettled([queues.close(), webhooks.close(), sub.quit(), redis.quit(), connection.quit()]);
      },
    });
  };
  process.once('SIGTERM', () => void shutdown('SIGTERM'));
  process.once('SIGINT', () => void shutdown('SIGINT'));
}

main().catch((e) => {
  console.error(`worker: fatal: ${(e as Error).message}`);
  process.exit(1);
});
