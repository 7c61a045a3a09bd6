/**
 * A step's tool threw (and its signal had not aborted). In order:
 *  - a `ToolHandOver`, or the AbortError of a wait on `ctx.drainSignal` while draining: the step
 *    is released at once, "Moving to another worker";
 *  - a `ToolRetry`: the step runs again later (retry.ts, R-04);
 *  - a `ToolCancelled`: the task ends `cancelled` with the tool's message;
 *  - a `ToolProtocolError`: the task fails with the tool's own code and message (for the client);
 *  - anything else is unexpected: the client reads "Tool <name> failed unexpectedly (error id …)"
 *    (`-32603`); its message and stack only reach the log, under the same `errorId`. A tool with a
 *    `retry` policy runs the step again instead, while runs remain.
 * Every write is fenced; each ends the task through `StepRun.ended`.
 */
import { newErrorId } from '@mcp-tasks/observability';
import { unexpectedToolError } from '@mcp-tasks/errors';
import { capStatusMessage as short } from '@mcp-tasks/task-store';
import { ToolCancelled, ToolHandOver, ToolProtocolError, ToolRetry } from '@mcp-tasks/tools';
import { retryOrFail } from './retry.js';
import { handOverStep } from './step-release.js';
import type { StepRun } from './step-claim.js';

/**
 * Answers error `e` thrown by `run`'s tool (see the module doc); `flushProgress` lands pending
 * progress before a hand-over. Returns the job's status word, or throws BullMQ's `DelayedError`
 * when the job went back to the queue.
 */
export async function answerToolError(run: StepRun, e: unknown, flushProgress: () => Promise<void>): Promise<string> {
  const { deps, job, token, taskId, fence, tool, ended, log: jobLog } = run;
  const { store, drainSignal } = deps;
  if (e instanceof ToolHandOver || (drainSignal.aborted && (e as Error)?.name === 'AbortError')) {
    await flushProgress();
    jobLog.info('step.handed_over');
    return await handOverStep(store, taskId, fence, job, token);
  }
  const retry = { job, token, store, fence, tool, ended, log: jobLog };
  if (e instanceof ToolRetry) return await retryOrFail({ ...retry, message: e.message, afterMs: e.afterMs });
  if (e instanceof ToolCancelled) {
    await ended(store.markCancelled(taskId, fence, short(e.message)));
    jobLog.info({ reason: e.message }, 'step.cancelled_by_tool');
    return 'cancelled';
  }
  if (e instanceof ToolProtocolError) {
    // Deliberate: the tool's own code and message are for the client.
    const error = { code: e.code, message: e.message, ...(e.data === undefined ? {} : { data: e.data }) };
    await ended(store.fail(taskId, { fence }, error, short(error.message)));
    jobLog.info({ code: error.code, message: error.message }, 'step.failed');
    return 'failed';
  }
  // Unexpected: the client gets a generic message and the id; the log gets the error.
  const errorId = newErrorId();
  const error = unexpectedToolError(tool.name, errorId);
  if (tool.retry) {
    jobLog.warn({ err: e, errorId, tool: tool.name }, 'step.error_retried');
    return await retryOrFail({ ...retry, message: error.message, afterMs: undefined });
  }
  await ended(store.fail(taskId, { fence }, error, short(error.message)));
  jobLog.error({ err: e, errorId, tool: tool.name }, 'step.failed');
  return 'failed';
}
