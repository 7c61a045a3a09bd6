/**
 * Worker process: runs tool steps from the `tools` queue (every shard of it, TOOL_QUEUE_SHARDS), the input timeouts, the
 * reconciler (maintenance queue) and completion webhook deliveries (`webhooks` queue,
 * webhook-worker.ts). Never imports Fastify. Publishes a heartbeat (every
 * WORKER_HEARTBEAT_MS, presence.ts) and serves `/metrics`, `/healthz`, `/readyz` on
 * WORKER_HTTP_PORT (issue 9 §3, §5); exports a span per step when tracing is on (N-14).
 *
 * Signals: SIGTERM/SIGINT → stop fetching, let active steps finish for SHUTDOWN_GRACE_MS,
 * then release the rest to the queue (another worker restarts them at once, bullmq-notes §4).
 *
 * Start: `--help` / `--version` are answered before anything else (issue 11 §3); then the
 * configuration, the tool modules (MCP_TOOL_MODULES), Redis; any failure is one line on stderr
 * and exit 1. The worker advertises the tools it runs (`<prefix>:workers`, expiring) so that
 * gateways can report tools no worker runs; `worker.ready` names the Redis (credentials
 * redacted), key prefix, tool sets and modules.
 */
import { Worker, type Job } from 'bullmq';
import { ConfigError, handleEntryArgs, loadConfig, startupSummary } from '@mcp-tasks/config';
import { createLogger, createWorkerMetrics, newErrorId, startOpsServer, startTracing, type Readiness } from '@mcp-tasks/observability';
import { TaskStore } from '@mcp-tasks/task-store';
import {
  bullPrefix,
  connectOrExplain,
  createRedis,
  pingAll,
  evictionGuard,
  evictionPolicy,
  JobQueues,
  queueDepthAll,
  RedisClock,
  startHeartbeat,
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
import { createRegistry, loadToolModules } from '@mcp-tasks/tools';
import { createStepProcessor } from './processor.js';
import { reconcileOnce } from './reconcile.js';
import { watchContinuity } from './redis-continuity.js';
import { createStepObserver } from './step-observer.js';
import { startWebhookWorker } from './webhook-worker.js';

const HELP = `Usage: npm run worker [-- --help | --version]
       node apps/worker/dist/main.js [--help | --version]

An MCP task worker: runs the tools' steps (BullMQ jobs from Redis), the input timeouts and the
reconciler. Start as many as you like, on the Redis of the gateways, with the same tool sets
and tool modules. Its operations port (WORKER_HTTP_PORT, 9464; off disables it) serves
/metrics, /healthz and /readyz. SIGTERM or Ctrl-C lets running steps finish, then hands the
rest to other workers.

  WORKER_CONCURRENCY steps one worker runs at once (50)`;

handleEntryArgs(process.argv.slice(2), 'worker', HELP);

async function main() {
  let config;
  try {
    config = loadConfig(process.env, { role: 'worker' });
  } catch (e) {
    if (e instanceof ConfigError) {
      console.error(`worker: ${e.message}`);
      process.exit(1);
    }
    throw e;
  }
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
  const redis = createRedis(config.redis, 'worker', 'mcp-worker');
  const sub = createRedis(config.redis, 'worker', 'mcp-worker-sub');
  try {
    await connectOrExplain(redis, config.redis);
    await connectOrExplain(sub, config.redis);
  } catch (e) {
    console.error(`worker: ${(e as Error).message}`);
    process.exit(1);
  }
  // Redis time for every timestamp and expiry (case N-11): this process' own clock never counts.
  const clock = new RedisClock(redis);
  await clock.start();
  const store = new TaskStore(redis, config.keyPrefix, clock, { progressStreamKeepMs: config.sync.progressStreamKeepMs });
  // Redis outages as this worker sees them: the reconciler's orphan check waits out one hold
  // period after one (issue 9 §6).
  const continuity = watchContinuity(redis);
  const presence = new WorkerPresence(redis, config.keyPrefix);
  let queues: JobQueues; // assigned below; its error handler and the gauges need the metrics first
  const metrics = createWorkerMetrics(config.worker.concurrency, { queueDepth: () => queueDepthAll(queues.toolShards), workersAlive: () => presence.count() });
  redis.on('error', (err) => {
    metrics.redisErrors.inc({ connection: 'worker' });
    log.warn({ err: err.message }, 'redis.error');
  });
  sub.on('error', (err) => {
    metrics.redisErrors.inc({ connection: 'subscriber' });
    log.warn({ err: err.message }, 'redis.sub_error');
  });
  const policy = await evictionPolicy(redis);
  if (policy && policy !== 'noeviction') log.error({ policy }, 'redis.eviction_policy_unsafe: set maxmemory-policy noeviction; /readyz answers 503 until then (case B-15)');

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
  const observeStep = createStepObserver({ metrics, toolLabel, ...(tracing.enabled ? { tracer: tracing.tracer } : {}) });
  // Completion webhooks (issue 11 §5): every task this process ends gets its delivery enqueued.
  const webhooks = new WebhookOutbox(redis, config.keyPrefix, store, config.webhooks, log);
  store.onTerminal(webhooks.listener);
  let shuttingDown = false;

  // BullMQ duplicates this client for its blocking connection.
  const connection = createRedis(config.redis, 'worker', 'mcp-bull');
  await connectOrExplain(connection, config.redis).catch((e: Error) => {
    console.error(`worker: ${e.message}`);
    process.exit(1);
  });
  connection.on('error', (err) => {
    metrics.redisErrors.inc({ connection: 'bullmq' });
    log.warn({ err: err.message }, 'redis.bull_error');
  });
  const workerOpts = {
    connection,
    prefix: bullPrefix(config.keyPrefix),
    concurrency: config.worker.concurrency,
    lockDuration: config.worker.lockDurationMs,
    // Renewed often, so an outage up to lockDuration − lockRenewTime − the 2 s reconnect
    // back-off (17 s by default) finds every lock still valid when Redis is back (issue 9 §6).
    lockRenewTime: config.worker.lockRenewMs,
    stalledInterval: config.worker.stalledIntervalMs,
    maxStalledCount: config.worker.maxStalledCount,
  };

  /** Releases a task's outstanding slot after a terminal write by someone who does not know its owner. */
  const releaseOf = async (taskId: string) => {
    const owner = await store.ownerOf(taskId).catch(() => null);
    if (owner) await store.releaseOutstanding(owner, taskId).catch((e: Error) => log.warn({ taskId, err: e.message }, 'outstanding.release_failed'));
  };

  // One BullMQ Worker per shard of the tools queue (TOOL_QUEUE_SHARDS, issue 9 §7), sharing the
  // process's WORKER_CONCURRENCY: each runs up to ceil(concurrency / shards) steps at once.
  const toolsWorkers: Worker<StepJobData>[] = [];
  /** Aborts job `jobId` on whichever shard's worker of this process runs it (a no-op elsewhere). */
  const cancelHere = (jobId: string, reason: string) => {
    for (const w of toolsWorkers) w.cancelJob(jobId, reason);
  };
  const processStep = createStepProcessor({
    store,
    queues,
    registry,
    log,
    settings: { researchPhaseMs: config.demo.researchPhaseMs, ...config.testing },
    inputTimeoutMs: config.task.inputTimeoutMs,
    progressMinIntervalMs: config.sync.progressMinIntervalMs,
    maxResultBytes: config.maxResultBytes,
    isShuttingDown: () => shuttingDown,
    cancelLocal: cancelHere,
  });

  const runToolJob = async (job: Job<StepJobData>, token?: string, signal?: AbortSignal) => {
    if (job.name === JOB_INPUT_TIMEOUT) {
      const { taskId, step } = job.data;
      const r = await store.fail(
        taskId,
        { expectStatus: 'input_required', expectStep: step },
        { code: -32603, message: `No answer to the input request within ${config.task.inputTimeoutMs} ms`, data: { reason: 'input_timeout' } },
        'Timed out waiting for input',
      );
      if (r.code === 'ok' || r.code === 'terminal') await releaseOf(taskId);
      if (r.code === 'ok') metrics.taskFinished(toolLabel(job.data.tool), 'failed', job.data.createdAt);
      log.info({ taskId, step, outcome: r.code }, 'input.timeout');
      return r.code;
    }
    return observeStep(job, () => processStep(job, token, signal));
  };
  const perShard = Math.ceil(config.worker.concurrency / queues.toolShards.length);
  for (let shard = 0; shard < queues.toolShards.length; shard++) {
    const toolsWorker = new Worker<StepJobData>(TOOLS_QUEUE, runToolJob, { ...workerOpts, prefix: toolsPrefix(config.keyPrefix, shard), concurrency: perShard });
    toolsWorkers.push(toolsWorker);
    toolsWorker.on('error', (err) => log.warn({ err: err.message, shard }, 'worker.error'));
    // BullMQ emits `lockRenewalFailed` only for jobs whose lock Redis *answered* is gone or held by
    // another token (extendLocks-1.lua): the lock is really lost, another worker may run the step,
    // so this one stops. A renewal that could not reach Redis (an outage) is an `error` event
    // instead: the command waits for the reconnect (maxRetriesPerRequest null) and the step goes on
    // while its lock is still valid on the server (issue 9 §6).
    toolsWorker.on('lockRenewalFailed', (ids: string[]) =>
      ids.forEach((id) => {
        log.warn({ jobId: id, shard }, 'step.lock_lost');
        toolsWorker.cancelJob(id, 'lock-lost');
      }),
    );
    toolsWorker.on('failed', (job, err) => {
      // A step job that failed without writing the task (e.g. stalled too often) fails the task.
      // BullMQ's reason can name jobs and keys: the client gets an error id, the log the reason.
      if (!job || job.name === JOB_INPUT_TIMEOUT) return;
      const { taskId, step } = job.data;
      const errorId = newErrorId();
      const message = `The task failed unexpectedly (error id ${errorId})`;
      store
        .fail(taskId, { expectStatus: 'working', expectStep: step }, { code: -32603, message, data: { errorId } }, message)
        .then(async (r) => {
          if (r.code === 'ok') {
            await releaseOf(taskId);
            metrics.taskFinished(toolLabel(job.data.tool), 'failed', job.data.createdAt);
          }
          log.warn({ taskId, step, outcome: r.code, err, errorId }, 'step.job_failed');
        })
        .catch(() => undefined);
    });
  }

  // Cancel fan-out: every worker hears every cancel; cancelJob is a no-op where the job is not running.
  await sub.subscribe(store.cancelChannel);
  sub.on('message', (channel: string, jobId: string) => {
    if (channel === store.cancelChannel) cancelHere(jobId, 'cancelled');
  });

  const maintenanceWorker = new Worker(
    MAINTENANCE_QUEUE,
    async (job) => {
      if (job.name !== JOB_RECONCILE) return 'ignored';
      const counts = await reconcileOnce({
        store,
        queues,
        log,
        afterMs: config.worker.reconcileAfterMs,
        inputTimeoutMs: config.task.inputTimeoutMs,
        syncHolderTimeoutMs: config.worker.syncHolderTimeoutMs,
        continuity,
        maxTtlMs: config.task.ttlMs,
        onFinished: (tool, status, createdAt) => metrics.taskFinished(toolLabel(tool), status, createdAt),
        ...(config.webhooks.enabled ? { webhooks } : {}),
      }, clock.now());
      if (counts.failed || counts.requeued || counts.cancelled) log.info(counts, 'reconcile.done');
      // Finished jobs past their retention age, on a queue where no job finished since (case B-15).
      const cleaned = await queues.cleanFinished().catch((err: Error) => {
        log.warn({ err: err.message }, 'reconcile.clean_failed');
        return { completed: 0, failed: 0 };
      });
      if (cleaned.completed || cleaned.failed) log.info(cleaned, 'reconcile.jobs_cleaned');
      return { ...counts, cleaned };
    },
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

  // Heartbeat: gateways count live workers from these (their readiness, tasks' statusMessage).
  const workerId = newWorkerId();
  const heartbeat = startHeartbeat(presence, workerId, config.heartbeatMs, (err) => log.warn({ err: err.message }, 'heartbeat.failed'));
  await heartbeat.first;

  // Operations port: /metrics, /healthz, /readyz (ready = Redis answering with a safe policy,
  // the tools worker running, a heartbeat written within its lifetime).
  const eviction = evictionGuard(redis);
  const readyz = async (): Promise<Readiness> => {
    const reason = shuttingDown
      ? 'shutting down'
      : !toolsWorkers.every((w) => w.isRunning())
        ? 'worker not running'
        : redis.status !== 'ready'
          ? `redis ${redis.status}`
          : Date.now() - heartbeat.lastOk > heartbeat.ttlMs
            ? 'heartbeat not written (Redis?)'
            : await Promise.race([
                pingAll(redis).then(() => eviction.check()),
                new Promise<string>((r) => setTimeout(() => r('redis not answering'), 1000).unref()),
              ]);
    return reason ? { ready: false, body: { status: 'unavailable', reason } } : { ready: true, body: { status: 'ready', workerId } };
  };
  const http = config.workerHttp;
  const ops = http
    ? await startOpsServer({ ...http, registry: metrics.registry, healthz: true, readyz }).catch((e: Error) => {
        console.error(`worker: cannot listen on ${http.host}:${http.port} (WORKER_HTTP_PORT; off disables it): ${e.message}`);
        process.exit(1);
      })
    : undefined;
  // What this worker runs, for the gateways' mismatch check (packages/jobs worker-tools.ts).
  const advert = new WorkerToolsAdvert(redis, config.keyPrefix, newWorkerId(), registry.workerToolNames(), (err) =>
    log.warn({ err: err.message }, 'worker.advert_failed'),
  );
  await advert.start();

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
    // Stops fetching first, in this tick: close() disconnects BullMQ's blocking connection at
    // once, so a job enqueued from now on is left to another worker (case B-07b). With the
    // heartbeat's and the advert's round trips before it, a loaded worker went on fetching for
    // a while after saying it was draining.
    const closing = Promise.all([...toolsWorkers.map((w) => w.close()), maintenanceWorker.close(), webhookWorker.close()]);
    log.info({ sig, graceMs: config.worker.shutdownGraceMs }, 'worker.draining');
    // It takes no new step from now on: it no longer counts as a live worker.
    await heartbeat.stop();
    await advert.stop(); // no longer counted by gateways' mismatch check
    const timer = (ms: number) => new Promise((r) => setTimeout(r, ms).unref());
    const finished = await Promise.race([closing.then(() => true), timer(config.worker.shutdownGraceMs).then(() => false)]);
    if (!finished) {
      log.info('worker.releasing_active_jobs');
      for (const w of toolsWorkers) w.cancelAllJobs('shutdown');
      await Promise.race([closing, timer(5000)]);
    }
    continuity.stop();
    clock.stop();
    await Promise.allSettled([ops?.close(), tracing.shutdown()]);
    await Promise.allSettled([queues.close(), webhooks.close(), sub.quit(), redis.quit(), connection.quit()]);
    log.info('worker.stopped');
    process.exit(0);
  };
  process.once('SIGTERM', () => void shutdown('SIGTERM'));
  process.once('SIGINT', () => void shutdown('SIGINT'));
}

main().catch((e) => {
  console.error(`worker: fatal: ${(e as Error).message}`);
  process.exit(1);
});
