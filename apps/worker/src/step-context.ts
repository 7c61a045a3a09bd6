/**
 * What a step's tool gets (`ToolContext`, kit.ts): its signal (step-abort.ts), progress writes
 * (progress-writer.ts, coalesced to one per PROGRESS_MIN_INTERVAL_MS, P-04), checkpoints and the
 * last one on a re-run (checkpoint.ts, D14, R-01), the drain signal, the answers to the
 * previous step's input requests under its own keys (input-keys.ts, T-29), and a log that goes
 * to this service's log only. A re-run after a retry first says "Retrying (run N)".
 */
import { abortableSleep, type ToolContext } from '@mcp-tasks/tools';
import { checkpointWriter, readLastCheckpoint } from './checkpoint.js';
import { progressWriter } from './progress-writer.js';
import { fromWireKeys } from './input-keys.js';
import type { StepAbort } from './step-abort.js';
import type { StepRun } from './step-claim.js';

/** The run's progress writer: `flush` before the final write, `stop` when the run ends. */
type ProgressWriter = ReturnType<typeof progressWriter>;

/** Builds `run`'s tool context; the progress writer comes with it (flushed and stopped by the processor). */
export async function prepareToolContext(
  run: StepRun,
  abort: StepAbort,
): Promise<{ ctx: ToolContext; progress: ProgressWriter }> {
  const { deps, job, taskId, step, claim, fence, log: jobLog } = run;
  const { store } = deps;
  // Progress: coalesced, in order, flushed before the final write (progress-writer.ts).
  const progress = progressWriter({
    store,
    taskId,
    fence,
    minIntervalMs: deps.progressMinIntervalMs,
    stopped: () => abort.signal.aborted,
    onCancelRequested: () => deps.cancelLocal(job.id!, 'cancelled'),
    onRefused: abort.refused,
    log: jobLog,
  });
  const lastCheckpoint =
    claim.attempt > 1 ? await readLastCheckpoint(deps.checkpoints, taskId, step, jobLog) : undefined;
  const checkpoint = checkpointWriter({
    checkpoints: deps.checkpoints,
    taskId,
    step,
    fence,
    maxBytes: deps.checkpointMaxBytes,
    onRefused: abort.refused,
    log: jobLog,
  });
  if ((job.data.retries ?? 0) > 0)
    await store
      .reportProgress(taskId, fence, { statusMessage: `Retrying (run ${claim.attempt})` })
      .catch(() => undefined);
  const ctx = toolContext(run, abort.signal, { checkpoint, lastCheckpoint, progress: progress.report });
  return { ctx, progress };
}

/** The `ToolContext` of `run`, given its signal and the writers made for it. */
function toolContext(
  run: StepRun,
  signal: AbortSignal,
  writers: Pick<ToolContext, 'checkpoint' | 'lastCheckpoint' | 'progress'>,
): ToolContext {
  const { deps, taskId, step, claim, log: jobLog } = run;
  const { checkpoint, lastCheckpoint, progress } = writers;
  const drainSignal = deps.drainSignal;
  return {
    signal,
    checkpoint,
    lastCheckpoint,
    drainSignal,
    get draining() {
      return drainSignal.aborted;
    },
    mode: claim.mode,
    step,
    attempt: claim.attempt,
    taskId,
    inputResponses: fromWireKeys(claim.inputResponses, step - 1),
    state: claim.state,
    clientCapabilities: claim.clientCapabilities,
    principal: claim.owner,
    sleep: (ms) => abortableSleep(ms, signal),
    // Worker steps have no response stream: a tool's log lines go to this service's log only
    // (kit.ts `ToolContext.log`).
    async log(level, data) {
      const at =
        level === 'debug'
          ? 'debug'
          : level === 'info' || level === 'notice'
            ? 'info'
            : level === 'warning'
              ? 'warn'
              : 'error';
      jobLog[at]({ toolLevel: level, data }, 'tool.log');
    },
    progress,
  };
}
