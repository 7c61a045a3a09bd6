/**
 * Gateway process: `POST /mcp`, `/healthz`, `/readyz`, `/metrics` (on METRICS_PORT when set).
 * Traces are exported when OpenTelemetry is configured (N-14). Stateless: every request may land on
 * any replica (D7); Redis and BullMQ clients are created once per process.
 *
 * Start: `--help` / `--version` are answered before anything else (issue 11 §3); then the
 * configuration, the tool modules (MCP_TOOL_MODULES), Redis; any failure is one line on stderr
 * and exit 1. The `gateway.ready` line names the Redis (credentials redacted), key prefix, tool
 * sets, modules and authentication modes.
 *
 * Signals: SIGTERM/SIGINT → drain for SHUTDOWN_DRAIN_DELAY_MS (/readyz fails, responses carry
 * `Connection: close`), stop accepting, let in-flight requests finish for SHUTDOWN_GRACE_MS,
 * then close what is left and exit.
 */
import { authStartupWarnings, ConfigError, handleEntryArgs, loadConfig, startupSummary } from '@mcp-tasks/config';
import { createGatewayMetrics, createLogger, startOpsServer, startTracing } from '@mcp-tasks/observability';
import { TaskStore } from '@mcp-tasks/task-store';
import { connectOrExplain, createRedis, evictionPolicy, JobQueues, queueDepthAll, RedisClock, TaskEvents, watchRedis, WorkerPresence, WebhookOutbox } from '@mcp-tasks/jobs';
import { createPromptRegistry, createRegistry, createResourceRegistry, loadToolModules } from '@mcp-tasks/tools';
import { taskStatusTool } from './task-status.js';
import { buildApp } from './app.js';
import { WORKERS_REFRESH_MS } from './workers.js';
import { startAdmin, type AdminServer } from './admin.js';
import { WorkerToolsWatch } from './worker-tools.js';

const HELP = `Usage: npm run gateway [-- --help | --version]
       node apps/gateway/dist/main.js [--help | --version]

The MCP gateway: POST /mcp (MCP 2026-07-28, the Tasks extension), GET /healthz, GET /readyz.
Stateless: start as many as you like, on one Redis, with workers (npm run worker) to run the
tools. It stops gracefully on SIGTERM or Ctrl-C.

  HOST, PORT         where it listens (127.0.0.1, 3000)
  AUTH_API_KEYS, AUTH_JWT_*, AUTH_ALLOW_ANONYMOUS
                     who may call (docs/security.md); none on a loopback HOST = anonymous
  REQUEST_STATE_KEYS signing keys of MRTR requestState, the same on every gateway`;

handleEntryArgs(process.argv.slice(2), 'gateway', HELP);

async function main() {
  let config;
  try {
    config = loadConfig();
  } catch (e) {
    if (e instanceof ConfigError) {
      console.error(`gateway: ${e.message}`);
      process.exit(1);
    }
    throw e;
  }
  // Tools before Redis: a module that cannot load, or a name defined twice, stops the process
  // with one line before it touches anything.
  let registry, prompts, resources;
  try {
    const modules = await loadToolModules(config.toolModules);
    registry = createRegistry(config.toolsets, [taskStatusTool], modules);
    prompts = createPromptRegistry(config.toolsets, modules);
    resources = createResourceRegistry(config.toolsets, modules);
  } catch (e) {
    console.error(`gateway: ${(e as Error).message}`);
    process.exit(1);
  }
  const log = createLogger('gateway', config.logLevel);
  for (const w of authStartupWarnings(config)) log.warn({ event: w.event }, w.message);
  // Before anything else, so every span of this process goes through the provider.
  const tracing = startTracing('gateway', config.tracing, log);

  const redis = createRedis(config.redis, 'request', 'mcp-gateway');
  const sub = createRedis(config.redis, 'worker', 'mcp-gateway-sub');
  // BullMQ's queues (tools, maintenance, webhooks) get a connection of their own: BullMQ defines
  // its ~50 scripts on the client it is given, and ioredis copies every defined script onto each
  // pipeline it builds, the automatic per-tick pipeline included. On the request connection that
  // cost ~50 µs per batch of commands, the largest single cost of a poll (issue 8 §6 profile).
  const queueRedis = createRedis(config.redis, 'queue', 'mcp-gateway-queue');
  // For the same reason, task reads (every poll) go through a connection with no script at all.
  const readRedis = createRedis(config.redis, 'request', 'mcp-gateway-read');
  try {
    await connectOrExplain(redis, config.redis);
    await connectOrExplain(sub, config.redis);
    await connectOrExplain(queueRedis, config.redis);
    await connectOrExplain(readRedis, config.redis);
  } catch (e) {
    console.error(`gateway: ${(e as Error).message}`);
    process.exit(1);
  }
  // Redis time for every timestamp and expiry (case N-11): a replica's own clock never counts.
  const clock = new RedisClock(redis);
  await clock.start();
  const store = new TaskStore(redis, config.keyPrefix, clock, { progressStreamKeepMs: config.sync.progressStreamKeepMs, reader: readRedis });
  const presence = new WorkerPresence(redis, config.keyPrefix);
  // Assigned below; the queue's error handler and the gauges need it first.
  let queues: JobQueues;
  const metrics = createGatewayMetrics({ queueDepth: () => queueDepthAll(queues.toolShards), workersAlive: () => presence.count() });
  redis.on('error', (err) => {
    metrics.redisErrors.inc({ connection: 'request' });
    log.warn({ err: err.message }, 'redis.error');
  });
  readRedis.on('error', (err) => {
    metrics.redisErrors.inc({ connection: 'read' });
    log.warn({ err: err.message }, 'redis.read_error');
  });
  sub.on('error', (err) => {
    metrics.redisErrors.inc({ connection: 'subscriber' });
    log.warn({ err: err.message }, 'redis.sub_error');
  });
  const policy = await evictionPolicy(redis);
  if (policy && policy !== 'noeviction') log.error({ policy }, 'redis.eviction_policy_unsafe: set maxmemory-policy noeviction; /readyz answers 503 until then (case B-15)');

  queues = new JobQueues(
    queueRedis,
    config.keyPrefix,
    config.task.ttlMs,
    (err) => {
      metrics.redisErrors.inc({ connection: 'queue' });
      log.warn({ err: err.message }, 'queue.error');
    },
    config.toolQueueShards,
  );
  await presence.watch(WORKERS_REFRESH_MS, (alive, before) => {
    if (alive === 0) log.warn({ workers: 0 }, 'workers.none: no worker is running; tasks wait until one starts');
    else if (alive !== undefined && (before === 0 || before === undefined)) log.info({ workers: alive }, 'workers.alive');
  });
  const events = new TaskEvents(sub);
  // Completion webhooks (issue 11 §5): a task this gateway ends (tasks/cancel) gets its delivery enqueued.
  const webhooks = new WebhookOutbox(queueRedis, config.keyPrefix, store, config.webhooks, log);
  store.onTerminal(webhooks.listener);
  const unknownBudgets = Object.keys(config.sync.budgetMsByTool).filter((name) => !registry.get(name));
  if (unknownBudgets.length) log.warn({ tools: unknownBudgets }, 'config.sync_budget_unknown_tools: SYNC_BUDGET_MS_BY_TOOL names tools that are not enabled (MCP_TOOLSETS)');
  const redisHealth = watchRedis(redis);
  const workerTools = new WorkerToolsWatch(redis, config.keyPrefix, registry.workerToolNames(), log);
  workerTools.start();
  const app = await buildApp({
    config,
    log,
    store,
    queues,
    events,
    registry,
    prompts,
    resources,
    redis,
    redisHealth,
    metrics,
    presence,
    workerTools,
    ...(tracing.enabled ? { tracer: tracing.tracer } : {}),
  });

  try {
    await app.listen({ host: config.host, port: config.port });
  } catch (e) {
    console.error(`gateway: cannot listen on ${config.host}:${config.port}: ${(e as Error).message}`);
    process.exit(1);
  }
  const addr = app.server.address();
  const port = typeof addr === 'object' && addr ? addr.port : config.port;
  // METRICS_PORT: /metrics on a listener of its own (e.g. an internal address), not on the MCP port.
  const metricsListen = config.metrics.enabled ? config.metrics.listen : undefined;
  const ops = metricsListen
    ? await startOpsServer({ ...metricsListen, registry: metrics.registry }).catch((e: Error) => {
        console.error(`gateway: cannot listen on ${metricsListen.host}:${metricsListen.port} (METRICS_PORT): ${e.message}`);
        process.exit(1);
      })
    : undefined;
  // The queue view (issue 11 §4): its own listener, only with ADMIN_API_KEYS.
  let admin: AdminServer | undefined;
  if (config.admin) {
    try {
      admin = await startAdmin({
        config: config.admin,
        log,
        store,
        queues: [
          ...queues.toolShards.map((queue, shard) =>
            shard === 0
              ? { queue, description: `Task steps (t.<taskId>.<step>) and input timeouts${queues.toolShards.length > 1 ? ', shard 0' : ''}` }
              : { queue, description: `Task steps and input timeouts, shard ${shard}`, prefix: `shard-${shard}.` },
          ),
          { queue: webhooks.queue, description: 'Completion webhook deliveries (wh.<taskId>)' },
          { queue: queues.maintenance, description: 'Reconciler runs' },
        ],
      });
      log.info({ url: admin.url, readOnly: config.admin.readOnly }, 'admin.ready');
    } catch (e) {
      console.error(`gateway: cannot start the admin view on ${config.admin.host}:${config.admin.port}: ${(e as Error).message} (set ADMIN_PORT to a free port, or unset ADMIN_API_KEYS on all but one gateway of this host)`);
      process.exit(1);
    }
  }
  log.info(
    {
      url: `http://${config.host}:${port}/mcp`,
      ...startupSummary(config, 'gateway'),
      tools: registry.size,
      prompts: prompts.size,
      resources: resources.size,
      metrics: !config.metrics.enabled ? 'off' : ops ? `http://${metricsListen!.host}:${ops.port}/metrics` : `http://${config.host}:${port}/metrics`,
      tracing: tracing.enabled,
      workers: presence.alive,
      webhooks: config.webhooks.enabled,
      admin: admin?.url,
      // Redis' clock minus this host's: what case N-11 protects against, for operators to see.
      redisClockSkewMs: clock.skewMs,
    },
    'gateway.ready',
  );

  let stopping = false;
  const shutdown = async (sig: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ sig, drainDelayMs: config.worker.drainDelayMs }, 'gateway.draining');
    app.startDrain();
    await new Promise((r) => setTimeout(r, config.worker.drainDelayMs).unref());
    // Listen streams never finish by themselves: end them cleanly (final result, spec
    // transport §5) so clients reopen them on another replica. Then stop accepting and let
    // in-flight requests finish for up to SHUTDOWN_GRACE_MS. A synchronous call still running
    // then ends with the hand-off result (its work continues as a task, followed with
    // task_status) instead of being cancelled; whatever is left after that is aborted.
    app.closeListens();
    void admin?.close().catch(() => undefined);
    const closing = app.close();
    await Promise.race([closing, new Promise((r) => setTimeout(r, config.worker.shutdownGraceMs).unref())]);
    app.handOffSync();
    await Promise.race([closing, new Promise((r) => setTimeout(r, 2000).unref())]);
    await app.closeMcp().catch(() => undefined);
    await Promise.race([closing, new Promise((r) => setTimeout(r, 2000).unref())]);
    redisHealth.stop();
    presence.stop();
    workerTools.stop();
    await Promise.allSettled([ops?.close(), tracing.shutdown()]);
    clock.stop();
    await Promise.allSettled([queues.close(), webhooks.close(), sub.quit(), queueRedis.quit(), readRedis.quit(), redis.quit()]);
    log.info('gateway.stopped');
    // Lines are written asynchronously (createLogger): the last ones go out before the exit.
    log.flush(() => process.exit(0));
    setTimeout(() => process.exit(0), 1000).unref();
  };
  process.once('SIGTERM', () => void shutdown('SIGTERM'));
  process.once('SIGINT', () => void shutdown('SIGINT'));
}

main().catch((e) => {
  console.error(`gateway: fatal: ${(e as Error).message}`);
  process.exit(1);
});
