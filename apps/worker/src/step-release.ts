/**
 * Hands a step job back to the queue without counting an attempt (R-02, R-04): on a drain
 * (another worker resumes it at once) or for a retry (after a delay). `moveToDelayed` with the
 * job's lock token, so only the holder of the lock can move it (BullMQ refuses another token),
 * then the `DelayedError` that tells BullMQ the job was moved.
 *
 * `moveToDelayed(now)`, not `moveToWait`: BullMQ 6.7's moveJobFromActiveToWait puts a
 * prioritized job (every step job is, for the fair share) back without the queue marker idle
 * workers block on, so they only saw it after their `drainDelay` (5 s, measured in
 * test/e2e/topology.test.ts). A due delayed job sets the marker; the next worker's fetch
 * promotes it with its priority.
 */
import { DelayedError, type Job } from 'bullmq';
import type { TaskStore } from '@mcp-tasks/task-store';

/** What the task says while its step moves to another worker. */
export const MOVING_MESSAGE = 'Moving to another worker';

/** Moves `job` back to the queue, due in `delayMs` (0 = at once); always throws `DelayedError`. */
export async function releaseToQueue(job: Job, token: string | undefined, delayMs = 0): Promise<never> {
  await job.moveToDelayed(Date.now() + delayMs, token);
  throw new DelayedError();
}

/**
 * Says on the task that its step is moving (fenced: a stale run writes nothing), then releases
 * the job at once. A failed status write does not stop the release.
 */
export async function handOverStep(
  store: TaskStore,
  taskId: string,
  fence: string,
  job: Job,
  token: string | undefined,
): Promise<never> {
  await store.reportProgress(taskId, fence, { statusMessage: MOVING_MESSAGE }).catch(() => undefined);
  return releaseToQueue(job, token);
}
