/**
 * Gateway process: `POST /mcp`, `/healthz`, `/readyz`. Stateless: every request may land on
 * any replica (D7); Redis and BullMQ clients are created once per process.
 *
 * Signals: SIGTERM/SIGINT → drain for SHUTDOWN_DRAIN_DELAY_MS (/readyz fails, responses carry
 * `Connection: close`), stop accepting, let in-flight requests finish for SHUTDOWN_GRACE_MS,
 * then close what is left and exit.
 */
import { authStartupWarnings, ConfigError, loadConfig } from '@mcp-tasks/config';
import { createLogger } from '@mcp-tasks/observability';
import { TaskStore } from '@mcp-tasks/task-store';
import { connectOrExplain, createRedis, evictionPolicy, JobQueues, TaskEvents, watchRedis } from '@mcp-tasks/jobs';
import { createPromptRegistry, createRegistry, createResourceRegistry } from '@mcp-tasks/tools';
import { taskStatusTool } from './task-status.js';
import { buildApp } from './app.js';

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
  const log = createLogger('gateway', config.logLevel);
  for (const w of authStartupWarnings(config)) log.warn({ event: w.event }, w.message);

  const redis = createRedis(config.redisUrl, 'request', 'mcp-gateway');
  const sub = createRedis(config.redisUrl, 'worker', 'mcp-gateway-sub');
  try {
    await connectOrExplain(redis, config.redisUrl);
    await connectOrExplain(sub, config.redisUrl);
  } catch (e) {
    console.error(`gateway: ${(e as Error).message}`);
    process.exit(1);
  }
  redis.on('error', (err) => log.warn({ err: err.message }, 'redis.error'));
  sub.on('error', (err) => log.warn({ err: err.message }, 'redis.sub_error'));
  const policy = await evictionPolicy(redis);
  if (policy && policy !== 'noeviction') log.warn({ policy }, 'redis.eviction_policy_unsafe: set maxmemory-policy noeviction');

  const store = new TaskStore(redis, config.keyPrefix);
  const queues = new JobQueues(redis, config.keyPrefix, config.task.ttlMs, (err) => log.warn({ err: err.message }, 'queue.error'));
  const events = new TaskEvents(sub);
  const registry = createRegistry(config.toolsets, [taskStatusTool]);
  const unknownBudgets = Object.keys(config.sync.budgetMsByTool).filter((name) => !registry.get(name));
  if (unknownBudgets.length) log.warn({ tools: unknownBudgets }, 'config.sync_budget_unknown_tools: SYNC_BUDGET_MS_BY_TOOL names tools that are not enabled (MCP_TOOLSETS)');
  const redisHealth = watchRedis(redis);
  const prompts = createPromptRegistry(config.toolsets);
  const resources = createResourceRegistry(config.toolsets);
  const app = await buildApp({ config, log, store, queues, events, registry, prompts, resources, redis, redisHealth });

  try {
    await app.listen({ host: config.host, port: config.port });
  } catch (e) {
    console.error(`gateway: cannot listen on ${config.host}:${config.port}: ${(e as Error).message}`);
    process.exit(1);
  }
  const addr = app.server.address();
  const port = typeof addr === 'object' && addr ? addr.port : config.port;
  log.info({ url: `http://${config.host}:${port}/mcp`, toolsets: config.toolsets, tools: registry.size, prompts: prompts.size, resources: resources.size }, 'gateway.ready');

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
    const closing = app.close();
    await Promise.race([closing, new Promise((r) => setTimeout(r, config.worker.shutdownGraceMs).unref())]);
    app.handOffSync();
    await Promise.race([closing, new Promise((r) => setTimeout(r, 2000).unref())]);
    await app.closeMcp().catch(() => undefined);
    await Promise.race([closing, new Promise((r) => setTimeout(r, 2000).unref())]);
    redisHealth.stop();
    await Promise.allSettled([queues.close(), sub.quit(), redis.quit()]);
    log.info('gateway.stopped');
    process.exit(0);
  };
  process.once('SIGTERM', () => void shutdown('SIGTERM'));
  process.once('SIGINT', () => void shutdown('SIGINT'));
}

main().catch((e) => {
  console.error(`gateway: fatal: ${(e as Error).message}`);
  process.exit(1);
});
