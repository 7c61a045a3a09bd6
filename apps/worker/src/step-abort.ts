/**
 * Why a running step stops, and what its task says then. The tool's signal (`ctx.signal`) is
 * aborted, with the reason as the abort reason, on:
 *  - `cancelled`: the job's signal (tasks/cancel or a disconnected synchronous caller: worker.cancelJob)
 *    or the cancel flag, polled every second as a backstop for a lost cancel message. The task
 *    is marked `cancelled` at once, fenced;
 *  - `shutdown`: the job's signal after SIGTERM and SHUTDOWN_GRACE_MS; the job is released to
 *    the queue for another worker (`handOverStep`, step-release.ts);
 *  - `lock-lost`: the job's signal, or a write refused as `fenced`: another worker owns the
 *    step now; this one stops writing;
 *  - `timeout` (`STEP_TIMEOUT`): the run passed its tool's time limit (step-timeout.ts); the task
 *    ends `failed` (`-32603`, `data.reason: 'tool_timeout'`), fenced, naming the tool and the limit (ms).
 */
import { toolTimeoutError } from '@mcp-tasks/errors';
import { capStatusMessage as short, type WriteOutcome } from '@mcp-tasks/task-store';
import { STEP_TIMEOUT, startStepTimeout, stepTimeoutMs } from './step-timeout.js';
import { handOverStep } from './step-release.js';
import type { StepRun } from './step-claim.js';

/** A running step's abort: its signal, and the end that follows an abort. */
export interface StepAbort {
  /** The tool's signal (`ctx.signal`). */
  signal: AbortSignal;
  /** Aborts the run because a write was refused: `fenced` → `lock-lost`, else `cancelled`. */
  refused: (code: WriteOutcome['code']) => void;
  /** Resolves `'aborted'` when the signal aborts (at once if it has). */
  aborted: () => Promise<'aborted'>;
  /** Writes the task's end for the abort's reason; returns the job's status word (or throws `DelayedError`). */
  afterAbort: () => Promise<string>;
  /** Stops the timer, the cancel poll and the job signal's listener. */
  stop: () => void;
}

/** Starts watching `run`: the job's `signal`, its tool's time limit (from now) and the cancel flag. */
export function watchStepAbort(run: StepRun, signal: AbortSignal | undefined): StepAbort {
  const { deps, job, token, taskId, fence, tool, ended, log: jobLog } = run;
  const { store } = deps;
  // The tool's signal: aborted by the job's signal (cancel / shutdown / lock lost).
  const ac = new AbortController();
  let cancelWrite: Promise<unknown> | undefined;
  const onAbort = () => {
    const reason = String(signal?.reason ?? 'cancelled');
    if (reason === 'cancelled' && !cancelWrite) {
      cancelWrite = ended(store.markCancelled(taskId, fence, 'Cancelled by client request')).catch((e) =>
        jobLog.error({ err: e }, 'cancel.write_failed'),
      );
    }
    ac.abort(reason);
  };
  signal?.addEventListener('abort', onAbort, { once: true });
  if (signal?.aborted) onAbort();
  // The tool's time limit, from now (step-timeout.ts): afterAbort() fails the task.
  const timeoutMs = stepTimeoutMs(tool, deps.toolTimeoutMs);
  const timeoutError = toolTimeoutError(tool.name, timeoutMs);
  const stopTimeout = startStepTimeout(timeoutMs, () => ac.abort(STEP_TIMEOUT));

  // Backstop for a lost cancel message: poll the flag every second.
  const poll = setInterval(() => {
    store
      .isCancelRequested(taskId)
      .then((yes) => yes && !ac.signal.aborted && deps.cancelLocal(job.id!, 'cancelled'))
      .catch(() => undefined);
  }, 1000);

  async function afterAbort(): Promise<string> {
    const reason = String(ac.signal.reason);
    if (reason === 'shutdown') {
      jobLog.info('step.released');
      return handOverStep(store, taskId, fence, job, token);
    }
    if (reason === STEP_TIMEOUT) {
      await ended(store.fail(taskId, { fence }, timeoutError, short(timeoutError.message)));
      jobLog.warn({ timeoutMs }, 'step.timed_out');
      return 'failed';
    }
    if (reason === 'cancelled') {
      if (!cancelWrite) cancelWrite = ended(store.markCancelled(taskId, fence, 'Cancelled by client request'));
      await cancelWrite;
      jobLog.info('step.cancelled');
      return 'cancelled';
    }
    jobLog.warn({ reason }, 'step.abandoned');
    return reason;
  }

  return {
    signal: ac.signal,
    refused: (code) => !ac.signal.aborted && ac.abort(code === 'fenced' ? 'lock-lost' : 'cancelled'),
    aborted: () =>
      new Promise<'aborted'>((resolve) => {
        if (ac.signal.aborted) resolve('aborted');
        ac.signal.addEventListener('abort', () => resolve('aborted'), { once: true });
      }),
    afterAbort,
    stop: () => {
      stopTimeout();
      clearInterval(poll);
      signal?.removeEventListener('abort', onAbort);
    },
  };
}
