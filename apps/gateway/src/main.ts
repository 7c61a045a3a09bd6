/**
 * Gateway process: `POST /mcp`, `/healthz`, `/readyz`, `/metrics` (on METRICS_PORT when set).
 * Traces are exported when OpenTelemetry is configured (N-14). Stateless: every request may land on
 * any replica (D7); Redis and BullMQ clients are created once per process.
 *
 * Start: `--help` / `--version` are answered before anything else; then the
 * configuration, the tool modules (MCP_TOOL_MODULES), Redis; any failure is one line on stderr
 * and exit 1. The `gateway.ready` line names the Redis (credentials redacted), key prefix, tool
 * sets, modules and authentication modes.
 *
 * Signals: SIGTERM/SIGINT/SIGHUP → drain for SHUTDOWN_DRAIN_DELAY_MS (/readyz fails, responses carry
 * `Connection: close`), stop accepting, let in-flight requests finish for SHUTDOWN_GRACE_MS,
 * then hand off, close what is left and exit, within SHUTDOWN_MARGIN_MS more whatever Redis
 * does (shutdown.ts).
 */
import { authStartupWarnings, handleEntryArgs, loadConfigOrExit, startupSummary, type Config } from '@mcp-tasks/config';
import {
  createLogger,
  startOpsServer,
  startTracing,
  type Logger,
  type OpsServer,
  type OpsServerOptions,
} from '@mcp-tasks/observability';
import {
  createPromptRegistry,
  createRegistry,
  createResourceRegistry,
  loadToolModules,
} from '@mcp-tasks/tools/internal';
import { taskStatusTool } from './task-status.js';
import { buildApp, type GatewayApp } from './app.js';
import { startAdmin, type AdminServer } from './admin.js';
import { gatewayShutdown } from './shutdown.js';
import { openServices, type GatewayServices } from './services.js';

const HELP = `Usage: npm run gateway [-- --help | --version]
       node apps/gateway/dist/main.js [--help | --version]

The MCP gateway: POST /mcp (MCP 2026-07-28, the Tasks extension), GET /healthz, GET /readyz.
Stateless: start as many as you like, on one Redis, with workers (npm run worker) to run the
tools. It stops gracefully on SIGTERM, Ctrl-C or SIGHUP.

  HOST, PORT         where it listens (127.0.0.1, 3000)
  AUTH_API_KEYS, AUTH_JWT_*, AUTH_ALLOW_ANONYMOUS
                     who may call (docs/security.md); none on a loopback HOST = anonymous
  REQUEST_STATE_KEYS signing keys of MRTR requestState, the same on every gateway`;

handleEntryArgs(process.argv.slice(2), 'gateway', HELP);

async function main() {
  const config = loadConfigOrExit('gateway', 'gateway');
  const { registry, prompts, resources } = await loadToolsOrExit(config);
  const log = createLogger('gateway', config.logLevel);
  for (const w of authStartupWarnings(config)) log.warn({ event: w.event }, w.message);
  // Before anything else, so every span of this process goes through the provider.
  const tracing = startTracing('gateway', config.tracing, log);
  const services = await openServices(config, log, registry);
  const { store, queues, events, metrics, presence, workerTools, redis, redisHealth } = services;
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
  const port = await listenOrExit(app, config);
  const ops = await startMetricsListenerOrExit(config, metrics.registry);
  const admin = await startAdminOrExit(config, log, services);
  const sizes = { tools: registry.size, prompts: prompts.size, resources: resources.size };
  logReady(config, log, services, { port, sizes, tracing: tracing.enabled, ops, admin });

  const { clock, sub, queueRedis, readRedis, webhooks } = services;
  const shutdown = gatewayShutdown({
    app,
    log,
    drainDelayMs: config.worker.drainDelayMs,
    shutdownGraceMs: config.worker.shutdownGraceMs,
    stopLoops: () => {
      redisHealth.stop();
      presence.stop();
      workerTools.stop();
      clock.stop();
    },
    closeServices: () => [
      admin?.close() ?? Promise.resolve(),
      ops?.close() ?? Promise.resolve(),
      tracing.shutdown(),
      queues.close(),
      webhooks.close(),
    ],
    redis: [sub, queueRedis, readRedis, redis],
    exit: (code) => process.exit(code),
  });
  // SIGHUP: the terminal closed (npm start in a shell): a graceful stop too, not Node's default exit.
  for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.once(sig, () => void shutdown(sig));
}

/**
 * Tools before Redis: a module that cannot load, or a name defined twice, stops the process
 * with one line before it touches anything.
 */
async function loadToolsOrExit(config: Config) {
  try {
    const modules = await loadToolModules(config.toolModules);
    return {
      registry: createRegistry(config.toolsets, config, [taskStatusTool], modules),
      prompts: createPromptRegistry(config.toolsets, config, modules),
      resources: createResourceRegistry(config.toolsets, config, modules),
    };
  } catch (e) {
    console.error(`gateway: ${(e as Error).message}`);
    process.exit(1);
  }
}

/** Listens on HOST:PORT; a port that cannot be bound is one line on stderr and exit 1. @returns the bound port. */
async function listenOrExit(app: GatewayApp, config: Config): Promise<number> {
  try {
    await app.listen({ host: config.host, port: config.port });
  } catch (e) {
    console.error(`gateway: cannot listen on ${config.host}:${config.port}: ${(e as Error).message}`);
    process.exit(1);
  }
  const addr = app.server.address();
  return typeof addr === 'object' && addr ? addr.port : config.port;
}

/**
 * METRICS_PORT: `/metrics` on a listener of its own (e.g. an internal address), not on the MCP
 * port; `undefined` when not configured. A port that cannot be bound is one line and exit 1.
 */
async function startMetricsListenerOrExit(
  config: Config,
  registry: OpsServerOptions['registry'],
): Promise<OpsServer | undefined> {
  const metricsListen = config.metrics.enabled ? config.metrics.listen : undefined;
  if (!metricsListen) return undefined;
  return startOpsServer({ ...metricsListen, registry }).catch((e: Error) => {
    console.error(`gateway: cannot listen on ${metricsListen.host}:${metricsListen.port} (METRICS_PORT): ${e.message}`);
    process.exit(1);
  });
}

/** The queue view on its own listener, only with ADMIN_API_KEYS; a failure to start is one line and exit 1. */
async function startAdminOrExit(
  config: Config,
  log: Logger,
  { store, queues, webhooks }: GatewayServices,
): Promise<AdminServer | undefined> {
  if (!config.admin) return undefined;
  let admin: AdminServer;
  try {
    admin = await startAdmin({
      config: config.admin,
      log,
      store,
      queues: [
        ...queues.toolShards.map((queue, shard) =>
          shard === 0
            ? {
                queue,
                description: `Task steps (t.<taskId>.<step>) and input timeouts${queues.toolShards.length > 1 ? ', shard 0' : ''}`,
              }
            : { queue, description: `Task steps and input timeouts, shard ${shard}`, prefix: `shard-${shard}.` },
        ),
        { queue: webhooks.queue, description: 'Completion webhook deliveries (wh.<taskId>)' },
        { queue: queues.maintenance, description: 'Reconciler runs' },
      ],
    });
    log.info({ url: admin.url, readOnly: config.admin.readOnly }, 'admin.ready');
  } catch (e) {
    console.error(
      `gateway: cannot start the admin view on ${config.admin.host}:${config.admin.port}: ${(e as Error).message} (set ADMIN_PORT to a free port, or unset ADMIN_API_KEYS on all but one gateway of this host)`,
    );
    process.exit(1);
  }
  return admin;
}

/** The `gateway.ready` line: where it listens and what it serves (startupSummary: no secret). */
function logReady(
  config: Config,
  log: Logger,
  { presence, clock }: GatewayServices,
  o: {
    port: number;
    sizes: { tools: number; prompts: number; resources: number };
    tracing: boolean;
    ops: { port: number } | undefined;
    admin: AdminServer | undefined;
  },
): void {
  const port = o.port;
  const metricsListen = config.metrics.enabled ? config.metrics.listen : undefined;
  log.info(
    {
      url: `http://${config.host}:${port}/mcp`,
      ...startupSummary(config, 'gateway'),
      ...o.sizes,
      metrics: !config.metrics.enabled
        ? 'off'
        : o.ops
          ? `http://${metricsListen!.host}:${o.ops.port}/metrics`
          : `http://${config.host}:${port}/metrics`,
      tracing: o.tracing,
      workers: presence.alive,
      webhooks: config.webhooks.enabled,
      admin: o.admin?.url,
      // Redis' clock minus this host's: what case N-11 protects against, for operators to see.
      redisClockSkewMs: clock.skewMs,
    },
    'gateway.ready',
  );
}

main().catch((e) => {
  console.error(`gateway: fatal: ${(e as Error).message}`);
  process.exit(1);
});
