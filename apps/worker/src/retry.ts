/**
 * Retries of a step for transient failures: a tool throws `ToolRetry(message, {afterMs})`
 * or, with a `retry` policy, any unexpected error. While runs remain (the policy's `attempts`,
 * default 3), the task says "Retrying in N s: <message>" (fenced) and the job goes back to the
 * queue, due after the delay (BullMQ's delayed set: `moveToDelayed` with the lock token, no
 * attempt counted by BullMQ, the retry count in the job's data); the next run gets the step's
 * checkpoint. After the last run the task ends `failed` with the message (`retriesExhausted`)
 * (`data.reason: 'retries_exhausted'`, `data.attempts`).
 */
import type { Job } from 'bullmq';
import { retriesExhausted } from '@mcp-tasks/errors';
import type { Logger } from '@mcp-tasks/observability';
import { capStatusMessage, type TaskStore, type WriteOutcome } from '@mcp-tasks/task-store';
import type { StepJobData } from '@mcp-tasks/jobs';
import { DEFAULT_RETRY_ATTEMPTS, retryDelayMs, type ToolDefinition } from '@mcp-tasks/tools';
import { releaseToQueue } from './step-release.js';

/** "30 s", "1.5 s", "2 min": how long until the retry, for the statusMessage. */
export function formatDelay(ms: number): string {
  if (ms < 10_000) return `${Math.round(ms / 100) / 10} s`;
  if (ms < 120_000) return `${Math.round(ms / 1000)} s`;
  return `${Math.round(ms / 60_000)} min`;
}

export interface RetryArgs {
  job: Job<StepJobData>;
  token: string | undefined;
  store: TaskStore;
  fence: string;
  tool: ToolDefinition;
  /** What the client reads ("Retrying in 30 s: <message>", and the final error's message). */
  message: string;
  /** The delay the tool asked for (ms), if any. */
  afterMs: number | undefined;
  /** The processor's terminal-write wrapper (releases the principal's slot). */
  ended: <T extends WriteOutcome>(write: Promise<T>) => Promise<T>;
  log: Logger;
}

/**
 * Schedules the next run of the step, or fails the task when none is left.
 * @returns `'failed'` (or the fence outcome) when the task was ended here; otherwise throws
 *          BullMQ's `DelayedError` (the job was moved).
 */
export async function retryOrFail(a: RetryArgs): Promise<string> {
  const { job, store, fence, tool, message } = a;
  const { taskId } = job.data;
  const retries = job.data.retries ?? 0;
  const attempts = tool.retry?.attempts ?? DEFAULT_RETRY_ATTEMPTS;
  if (retries + 1 >= attempts) {
    const error = retriesExhausted(tool.name, attempts, message);
    const r = await a.ended(store.fail(taskId, { fence }, error, capStatusMessage(error.message)));
    a.log.info({ attempts, outcome: r.code }, 'step.retries_exhausted');
    return r.code === 'ok' ? 'failed' : r.code;
  }
  const delayMs = retryDelayMs(retries + 1, tool.retry, a.afterMs);
  const statusMessage = capStatusMessage(`Retrying in ${formatDelay(delayMs)}: ${message}`);
  const w = await store.reportProgress(taskId, fence, { statusMessage });
  if (w.code !== 'ok') {
    a.log.info({ outcome: w.code }, 'step.retry_refused');
    return w.code;
  }
  await job.updateData({ ...job.data, retries: retries + 1 });
  a.log.info({ retry: retries + 1, attempts, delayMs }, 'step.retry_scheduled');
  return releaseToQueue(job, a.token, delayMs);
}
