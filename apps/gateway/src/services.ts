/**
 * The gateway's services, opened once per process after the configuration and the tools: the
 * Redis connections (shared start-up, packages/jobs process-redis.ts), the task store, worker
 * presence, metrics, the queues, task events, the webhook outbox, the Redis health watch and
 * the worker-tools watch.
 */
import type { Config } from '@mcp-tasks/config';
import { createGatewayMetrics, type Logger } from '@mcp-tasks/observability';
import { TaskStore } from '@mcp-tasks/task-store';
import {
  connectProcessRedis,
  JobQueues,
  queueDepthAll,
  startRedisErrorLog,
  TaskEvents,
  warnIfEvicting,
  watchRedis,
  WorkerPresence,
  WebhookOutbox,
} from '@mcp-tasks/jobs';
import type { ToolRegistry } from '@mcp-tasks/tools/internal';
import { WORKERS_REFRESH_MS } from './workers.js';
import { WorkerToolsWatch } from './worker-tools.js';

/** What `openServices` opened; `main` closes it on shutdown (shutdown.ts). */
export type GatewayServices = Awaited<ReturnType<typeof openServices>>;

/**
 * Opens every service of the gateway. A Redis that cannot be reached is one line on stderr and
 * exit 1 (`connectProcessRedis`).
 */
export async function openServices(config: Config, log: Logger, registry: ToolRegistry) {
  // BullMQ's queues (tools, maintenance, webhooks) get a connection of their own (`queue`): BullMQ
  // defines its ~50 scripts on the client it is given, and ioredis copies every defined script
  // onto each pipeline it builds, the automatic per-tick pipeline included. On the request
  // connection that cost ~50 µs per batch of commands, the largest single cost of a poll in a
  // measured profile. For the same reason, task reads (every poll) go through a connection with no
  // script at all (`read`). The clock runs on `redis` (Redis time, case N-11).
  const { clients, clock } = await connectProcessRedis('gateway', config.redis, {
    redis: { role: 'request', name: 'mcp-gateway' },
    sub: { role: 'worker', name: 'mcp-gateway-sub' },
    queueRedis: { role: 'queue', name: 'mcp-gateway-queue' },
    readRedis: { role: 'request', name: 'mcp-gateway-read' },
  });
  const { redis, sub, queueRedis, readRedis } = clients;
  const store = new TaskStore(redis, config.keyPrefix, clock, {
    progressStreamKeepMs: config.sync.progressStreamKeepMs,
    reader: readRedis,
  });
  const presence = new WorkerPresence(redis, config.keyPrefix);
  // Assigned below; the queue's error handler and the gauges need it first.
  let queues: JobQueues;
  const metrics = createGatewayMetrics({
    queueDepth: () => queueDepthAll(queues.toolShards),
    workersAlive: () => presence.count(),
  });
  startRedisErrorLog(metrics.redisErrors, log, [
    { client: redis, connection: 'request', event: 'redis.error' },
    { client: readRedis, connection: 'read', event: 'redis.read_error' },
    { client: sub, connection: 'subscriber', event: 'redis.sub_error' },
  ]);
  await warnIfEvicting(redis, log);

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
    else if (alive !== undefined && (before === 0 || before === undefined))
      log.info({ workers: alive }, 'workers.alive');
  });
  const events = new TaskEvents(sub);
  // Completion webhooks: a task this gateway ends (tasks/cancel) gets its delivery enqueued.
  const webhooks = new WebhookOutbox(queueRedis, config.keyPrefix, store, config.webhooks, log);
  store.onTerminal(webhooks.listener);
  const unknownBudgets = Object.keys(config.sync.budgetMsByTool).filter((name) => !registry.get(name));
  if (unknownBudgets.length)
    log.warn(
      { tools: unknownBudgets },
      'config.sync_budget_unknown_tools: SYNC_BUDGET_MS_BY_TOOL names tools that are not enabled (MCP_TOOLSETS)',
    );
  const redisHealth = watchRedis(redis);
  const workerTools = new WorkerToolsWatch(redis, config.keyPrefix, registry.workerToolNames(), log);
  workerTools.start();
  return {
    redis,
    sub,
    queueRedis,
    readRedis,
    clock,
    store,
    presence,
    metrics,
    queues,
    events,
    webhooks,
    redisHealth,
    workerTools,
  };
}
