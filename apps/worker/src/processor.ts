/**
 * Runs one step of a task as a BullMQ job (design D2, D3, D5).
 *
 * claim (new fence) → tool.run(args, ctx) → one fenced write: completed | input_required |
 * failed | cancelled. Every write carries the fence, so a stale worker (lost lock, stall
 * re-run elsewhere) can never change the task. The job's AbortSignal fires on
 *  - `cancelled`: tasks/cancel or a disconnected synchronous caller (PUBLISH on the cancel
 *    channel → worker.cancelJob; backstop: the cancel flag, polled every second and returned
 *    by every progress write). The task is marked `cancelled` at once, fenced.
 *  - `shutdown`: SIGTERM and SHUTDOWN_GRACE_MS passed; the job is released to the queue for
 *    another worker (no stall): `handOverStep` (step-release.ts).
 *  - `lock-lost`: another worker owns the step now; this one stops writing.
 *  - `timeout`: the step ran past its tool's time limit (step-timeout.ts); the task ends
 *    `failed`, fenced, naming the tool and the limit.
 *
 * Durable steps (D14): `ctx.checkpoint` writes fenced (checkpoint.ts), a re-run gets
 * `ctx.lastCheckpoint`; on a drain `ctx.drainSignal` aborts and a `ToolHandOver` (or the
 * AbortError of a wait on that signal) releases the step at once, "Moving to another worker"
 * a `ToolRetry`, or any error of a tool with a `retry` policy, runs the step again later
 * (retry.ts, R-04). The checkpoint is deleted when the step ends.
 *
 * The steps of a run, each in its file: the claim (step-claim.ts), the abort watch
 * (step-abort.ts), the tool's context (step-context.ts), the write of what the tool returned
 * (step-outcome.ts) or the answer to what it threw (step-failure.ts).
 *
 * Every terminal write is followed by `releaseOutstanding` (the principal's outstanding count).
 * The result is serialized once and stored only in the task record, within
 * MAX_RESULT_BYTES and the principal's MAX_RESULT_BYTES_PER_PRINCIPAL (`result.ts`); the job
 * returns a status word, so BullMQ's job hash and events stream never carry a result (N-09).
 * An unexpected exception reaches the client as "Tool <name> failed unexpectedly (error id …)";
 * its message and stack only reach the log, under the same `errorId`.
 */
import { DelayedError, type Job } from 'bullmq';
import type { Logger } from '@mcp-tasks/observability';
import type { Checkpoints, ResultBudget, TaskStore } from '@mcp-tasks/task-store';
import type { JobQueues, StepJobData } from '@mcp-tasks/jobs';
import type { ToolRegistry } from '@mcp-tasks/tools/internal';
import { claimStepRun, type StepRun } from './step-claim.js';
import { watchStepAbort } from './step-abort.js';
import { prepareToolContext } from './step-context.js';
import { writeOutcome } from './step-outcome.js';
import { answerToolError } from './step-failure.js';

export interface ProcessorDeps {
  store: TaskStore;
  queues: JobQueues;
  registry: ToolRegistry;
  log: Logger;
  inputTimeoutMs: number;
  /** Progress writes are coalesced to at most one per this interval (ms, P-04); the last always lands. */
  progressMinIntervalMs: number;
  /** Largest stored result, bytes of serialized JSON (MAX_RESULT_BYTES). */
  maxResultBytes: number;
  /** The principals' budgets of stored result bytes (MAX_RESULT_BYTES_PER_PRINCIPAL). */
  resultBudget: ResultBudget;
  /** Single Redis or Sentinel: the completion and what follows it in one script (result.ts `StoreResultDeps`). */
  completeInOneScript?: { dropFromIndex: boolean };
  /** Time limit of a run of a step whose tool sets no `timeoutMs` (ms, TOOL_TIMEOUT_MS; step-timeout.ts). */
  toolTimeoutMs: number;
  isShuttingDown: () => boolean;
  /** Step checkpoints (D14, R-01) and their largest size (bytes of JSON, CHECKPOINT_MAX_BYTES). */
  checkpoints: Checkpoints;
  checkpointMaxBytes: number;
  /** Aborted (reason: a `ToolHandOver`) when this worker starts draining: `ctx.drainSignal`. */
  drainSignal: AbortSignal;
  /** Aborts the job locally (BullMQ worker.cancelJob). */
  cancelLocal: (jobId: string, reason: string) => void;
}

/** Creates the BullMQ processor for step jobs; it returns the job's status word (never a result). */
export function createStepProcessor(deps: ProcessorDeps) {
  return async function processStep(
    job: Job<StepJobData>,
    token: string | undefined,
    signal?: AbortSignal,
  ): Promise<string> {
    const run = await claimStepRun(deps, job, token);
    if (typeof run === 'string') return run;
    return runTool(run, signal);
  };
}

/** Runs the claimed step's tool until it returns, throws or its signal aborts, and writes the end. */
async function runTool(run: StepRun, signal: AbortSignal | undefined): Promise<string> {
  const { tool, claim } = run;
  const abort = watchStepAbort(run, signal);
  const { ctx, progress } = await prepareToolContext(run, abort);
  const aborted = abort.aborted();
  try {
    const pending = tool.run(claim.args as never, ctx);
    pending.catch(() => undefined); // an abandoned run may reject later
    const outcome = await Promise.race([pending, aborted]);
    if (outcome === 'aborted' || abort.signal.aborted) return await abort.afterAbort();
    await progress.flush();
    if (abort.signal.aborted) return await abort.afterAbort();
    return await writeOutcome(run, outcome);
  } catch (e) {
    if (e instanceof DelayedError) throw e; // released on shutdown by afterAbort(): not a tool error
    if (abort.signal.aborted) return await abort.afterAbort();
    return await answerToolError(run, e, progress.flush);
  } finally {
    abort.stop();
    progress.stop();
  }
}
