/**
 * The worker's background queues: the maintenance queue's worker (one job at a time: the
 * reconciler and the clean-up of finished jobs, maintenance.ts), the completion webhooks' worker
 * (webhook-worker.ts), and the reconciler's schedule (every RECONCILE_INTERVAL_MS), which lives
 * in Redis and is re-asserted here.
 */
import { Worker } from 'bullmq';
import type { Config } from '@mcp-tasks/config';
import type { Logger, WorkerMetrics } from '@mcp-tasks/observability';
import type { TaskStore } from '@mcp-tasks/task-store';
import {
  JOB_RECONCILE,
  MAINTENANCE_QUEUE,
  type JobQueues,
  type RedisClient,
  type RedisClock,
  type WebhookOutbox,
} from '@mcp-tasks/jobs';
import type { BullConnection } from './bull-connection.js';
import { createMaintenanceProcessor } from './maintenance.js';
import type { watchContinuity } from './redis-continuity.js';
import { startWebhookWorker } from './webhook-worker.js';

export interface MaintenanceWorkersDeps extends BullConnection {
  config: Config;
  store: TaskStore;
  queues: JobQueues;
  log: Logger;
  metrics: WorkerMetrics;
  /** The tool's name for metrics: a tool this process runs, else `other`. */
  toolLabel: (name: string | undefined) => string;
  continuity: ReturnType<typeof watchContinuity>;
  webhooks: WebhookOutbox;
  /** The Redis clock (case N-11). */
  clock: RedisClock;
  /** The process's main Redis client: the schedule is re-asserted on each of its reconnects. */
  redis: RedisClient;
}

/**
 * Starts the maintenance and webhooks workers, then asserts the reconciler's schedule (awaited
 * once; again on every reconnect and every minute). Returns the two workers, to close on shutdown.
 */
export async function startMaintenanceWorkers(d: MaintenanceWorkersDeps) {
  const { config, store, queues, log, metrics, toolLabel, continuity, webhooks, clock, connection } = d;
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
    { ...d.workerOpts, concurrency: 1 },
  );
  maintenanceWorker.on('error', (err) => log.warn({ err: err.message }, 'maintenance.error'));
  // Runs even without a webhook target here, so jobs a differently configured process enqueued
  // end (logged as no_target) instead of waiting forever.
  const webhookWorker = startWebhookWorker({ connection, keyPrefix: config.keyPrefix, config: config.webhooks, log });
  await scheduleReconciler(d);
  return { maintenanceWorker, webhookWorker };
}

/** Asserts the reconciler's repeatable job now, on every reconnect of `redis` and every 60 s (a failure is logged). */
async function scheduleReconciler({ config, queues, log, redis }: MaintenanceWorkersDeps): Promise<void> {
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
}
