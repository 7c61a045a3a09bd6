/**
 * The maintenance queue's processor: a `reconcile` job (scheduled every RECONCILE_INTERVAL_MS)
 * runs one reconciler pass (reconcile.ts, case B-16) and then removes finished jobs past their
 * retention age (case B-15). Other job names are ignored.
 */
import type { Job } from 'bullmq';
import { JOB_RECONCILE } from '@mcp-tasks/jobs';
import { reconcileOnce, type ReconcileDeps } from './reconcile.js';

/** Builds the processor; `now` is the Redis clock (case N-11). */
export function createMaintenanceProcessor(deps: ReconcileDeps, now: () => number) {
  const { log, queues } = deps;
  return async (job: Job) => {
    if (job.name !== JOB_RECONCILE) return 'ignored';
    const counts = await reconcileOnce(deps, now());
    if (counts.failed || counts.requeued || counts.cancelled) log.info(counts, 'reconcile.done');
    // Finished jobs past their retention age, on a queue where no job finished since (case B-15).
    const cleaned = await queues.cleanFinished().catch((err: Error) => {
      log.warn({ err: err.message }, 'reconcile.clean_failed');
      return { completed: 0, failed: 0 };
    });
    if (cleaned.completed || cleaned.failed) log.info(cleaned, 'reconcile.jobs_cleaned');
    return { ...counts, cleaned };
  };
}
