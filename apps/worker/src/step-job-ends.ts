/**
 * Ends of a tools-queue job that are not a step's own write:
 *  - `inputTimedOut`: the input-timeout job of a task still `input_required` on that step fails
 *    it (`-32603`, `data.reason: 'input_timeout'`, TASK_INPUT_TIMEOUT_MS);
 *  - `stepJobFailed`: a step job BullMQ failed without the task being written fails the task.
 *    BullMQ's reason can name jobs and keys: the client gets an error id, the log the reason;
 *    a job that stalled more than WORKER_MAX_STALLED_COUNT times (its workers kept dying) is
 *    told apart, `data.reason: 'worker_lost'`.
 * Both release the task's outstanding slot once the task is terminal.
 */
import type { Job } from 'bullmq';
import { newErrorId, type Logger } from '@mcp-tasks/observability';
import { inputTimeout, stepJobFailed as stepJobFailedError } from '@mcp-tasks/errors';
import type { TaskStore } from '@mcp-tasks/task-store';
import { JOB_INPUT_TIMEOUT, type StepJobData } from '@mcp-tasks/jobs';

export interface StepJobEndsDeps {
  store: TaskStore;
  log: Logger;
  inputTimeoutMs: number;
  /** A task ended `failed` here (metrics). */
  onFailed: (tool: string | undefined, createdAt: number | undefined) => void;
}

/** BullMQ's reason for a job its stall check failed (`moveStalledJobsToWait`). */
const STALLED_TOO_OFTEN = 'job stalled more than allowable limit';

/** The two handlers (see the module doc). */
export function stepJobEnds(d: StepJobEndsDeps) {
  const { store, log } = d;
  /** Releases a task's outstanding slot after a terminal write by someone who does not know its owner. */
  const releaseOf = async (taskId: string) => {
    const owner = await store.ownerOf(taskId).catch(() => null);
    if (owner)
      await store
        .releaseOutstanding(owner, taskId)
        .catch((e: Error) => log.warn({ taskId, err: e.message }, 'outstanding.release_failed'));
  };

  async function inputTimedOut(job: Job<StepJobData>): Promise<string> {
    const { taskId, step } = job.data;
    const r = await store.fail(
      taskId,
      { expectStatus: 'input_required', expectStep: step },
      inputTimeout(d.inputTimeoutMs),
      'Timed out waiting for input',
    );
    if (r.code === 'ok' || r.code === 'terminal') await releaseOf(taskId);
    if (r.code === 'ok') d.onFailed(job.data.tool, job.data.createdAt);
    log.info({ taskId, step, outcome: r.code }, 'input.timeout');
    return r.code;
  }

  function stepJobFailed(job: Job<StepJobData> | undefined, err: Error): void {
    if (!job || job.name === JOB_INPUT_TIMEOUT) return;
    const { taskId, step } = job.data;
    const errorId = newErrorId();
    const error = stepJobFailedError(errorId, err.message === STALLED_TOO_OFTEN);
    store
      .fail(taskId, { expectStatus: 'working', expectStep: step }, error, error.message)
      .then(async (r) => {
        if (r.code === 'ok') {
          await releaseOf(taskId);
          d.onFailed(job.data.tool, job.data.createdAt);
        }
        log.warn({ taskId, step, outcome: r.code, err, errorId }, 'step.job_failed');
      })
      .catch(() => undefined);
  }

  return { inputTimedOut, stepJobFailed, releaseOf };
}
