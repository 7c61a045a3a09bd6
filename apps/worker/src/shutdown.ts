/**
 * The worker's SIGTERM / SIGINT handler: once, it stops the lost-worker check, then
 * drains (drain.ts) with what this process leaves first (the heartbeat and the tools advert:
 * it takes no new step from then on) and what it closes last, in this order: the Redis
 * continuity watch and clock, the liveness thread, the operations port and tracing, then the
 * queues, the webhook outbox and the Redis connections. drain.ts bounds it to SHUTDOWN_GRACE_MS
 * + 3 s whatever Redis does.
 */
import type { Worker } from 'bullmq';
import type { Logger, OpsServer, Tracing } from '@mcp-tasks/observability';
import type { Heartbeat, JobQueues, RedisClient, RedisClock, WebhookOutbox, WorkerToolsAdvert } from '@mcp-tasks/jobs';
import { drainAndExit } from './drain.js';
import type { startLiveness } from './liveness.js';

export interface ShutdownDeps {
  /** Set here at the first signal; read by the processor and `/readyz`. */
  lifecycle: { shuttingDown: boolean };
  /** SHUTDOWN_GRACE_MS (ms). */
  graceMs: number;
  log: Logger;
  stopLostCheck: () => void;
  toolsWorkers: Worker[];
  /** The maintenance and webhooks workers. */
  otherWorkers: { close(): Promise<void> }[];
  /** Aborted at once with a `ToolHandOver`: every step's `ctx.drainSignal`. */
  drain: AbortController;
  heartbeat: Heartbeat;
  advert: WorkerToolsAdvert;
  continuity: { stop(): void };
  clock: RedisClock;
  liveness: ReturnType<typeof startLiveness>;
  ops: OpsServer | undefined;
  tracing: Tracing;
  queues: JobQueues;
  webhooks: WebhookOutbox;
  /** The subscriber, main and BullMQ Redis clients. */
  sub: RedisClient;
  redis: RedisClient;
  connection: RedisClient;
}

/** Handles SIGTERM, SIGINT and SIGHUP (the first one of them; later ones are ignored). */
export function onShutdownSignals(d: ShutdownDeps): void {
  const { heartbeat, advert, continuity, clock, liveness, ops, tracing } = d;
  const shutdown = async (sig: string) => {
    if (d.lifecycle.shuttingDown) return;
    d.lifecycle.shuttingDown = true;
    d.stopLostCheck();
    await drainAndExit(sig, {
      graceMs: d.graceMs,
      log: d.log,
      toolsWorkers: d.toolsWorkers,
      otherWorkers: d.otherWorkers,
      drain: d.drain,
      // It takes no new step from now on: it no longer counts as a live worker, nor in the
      // gateways' mismatch check.
      leave: () => Promise.all([heartbeat.stop(), advert.stop()]),
      finish: async () => {
        continuity.stop();
        clock.stop();
        await liveness.stop();
        await Promise.allSettled([ops?.close(), tracing.shutdown()]);
        await Promise.allSettled([
          d.queues.close(),
          d.webhooks.close(),
          d.sub.quit(),
          d.redis.quit(),
          d.connection.quit(),
        ]);
      },
    });
  };
  // SIGHUP: the terminal closed (npm start in a shell): a graceful stop too, not Node's default exit.
  for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.once(sig, () => void shutdown(sig));
}
