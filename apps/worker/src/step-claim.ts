/**
 * The start of a step job's run (design D3): a worker that is shutting down releases the job
 * untouched; otherwise the step is claimed (a new fence, step-release.ts and processor.ts say
 * why every write carries it). A step that may not run (cancelled, terminal, stale, gone) is
 * skipped, and a cancelled or terminal one no longer counts in its principal's outstanding
 * tasks. A tool this worker does not have fails the task at once (`-32603`,
 * `data.reason: 'tool_not_on_worker'`). What the rest of the run shares is a `StepRun`.
 */
import type { Job } from 'bullmq';
import type { Logger } from '@mcp-tasks/observability';
import { toolNotOnWorker } from '@mcp-tasks/errors';
import type { StepClaim, WriteOutcome } from '@mcp-tasks/task-store';
import type { StepJobData } from '@mcp-tasks/jobs';
import type { ToolDefinition } from '@mcp-tasks/tools';
import type { ProcessorDeps } from './processor.js';
import { releaseToQueue } from './step-release.js';

/** A claimed run of a step: what the steps of `processStep` share. */
export interface StepRun {
  deps: ProcessorDeps;
  job: Job<StepJobData>;
  /** The job's lock token (BullMQ), for releasing the job to the queue. */
  token: string | undefined;
  taskId: string;
  step: number;
  claim: StepClaim;
  /** The claim's fence: every write of this run carries it. */
  fence: string;
  /** The task's principal. */
  owner: string;
  tool: ToolDefinition;
  /** The job's logger (taskId, jobId, step). */
  log: Logger;
  /** Releases the task from `owner`'s outstanding count (no-op for ''); a failure is logged. */
  releaseSlot: (owner: string) => Promise<void>;
  /** Awaits a terminal write; once it landed (or found the task ended) the principal's slot is released. */
  ended: <T extends WriteOutcome>(write: Promise<T>) => Promise<T>;
}

/** Outcomes of a terminal write after which the task is terminal (or gone): its outstanding slot is released. */
const ENDED = new Set<WriteOutcome['code']>(['ok', 'terminal', 'cancelled', 'gone']);

/**
 * Claims `job`'s step: the run, or the status word the job returns when the step does not run
 * (`cancelled`, `terminal`, `stale`, `gone`, `failed`). Throws BullMQ's `DelayedError` after
 * releasing the job when this worker is shutting down.
 */
export async function claimStepRun(
  deps: ProcessorDeps,
  job: Job<StepJobData>,
  token: string | undefined,
): Promise<StepRun | string> {
  const { store, registry, log } = deps;
  const { taskId, step } = job.data;
  const jobLog = log.child({ taskId, jobId: job.id, step });
  if (deps.isShuttingDown()) await releaseToQueue(job, token);
  const releaseSlot = async (owner: string): Promise<void> => {
    if (!owner) return;
    // A lost release is repaired by the next reservation at the limit (TaskStore.repairOutstanding).
    await store
      .releaseOutstanding(owner, taskId)
      .catch((e: Error) => jobLog.warn({ err: e.message }, 'outstanding.release_failed'));
  };
  const claim = await store.claimStep(taskId, step, token ?? '');
  if (claim.code !== 'ok') {
    // Ended (a cancel found at the claim) or already terminal: make sure it no longer counts.
    if (claim.code === 'cancelled' || claim.code === 'terminal') await releaseSlot(claim.owner);
    jobLog.info({ outcome: claim.code }, 'step.skipped');
    return claim.code;
  }
  const { fence, owner } = claim;
  /** Awaits a terminal write; once it landed (or found the task ended) the principal's slot is released. */
  const ended = async <T extends WriteOutcome>(write: Promise<T>): Promise<T> => {
    const r = await write;
    if (ENDED.has(r.code)) {
      await releaseSlot(owner);
      await deps.checkpoints.remove(taskId).catch(() => undefined); // its step ended
    }
    return r;
  };
  const tool = registry.get(claim.tool);
  if (!tool) {
    // Gateways and workers load different tools (MCP_TOOLSETS / MCP_TOOL_MODULES): fail the
    // task at once with an error that says so, rather than leave it waiting.
    jobLog.error(
      { tool: claim.tool },
      'step.tool_not_enabled: this worker does not have the tool; give gateways and workers the same MCP_TOOLSETS and MCP_TOOL_MODULES',
    );
    await ended(store.fail(taskId, { fence }, toolNotOnWorker(claim.tool), 'Tool not available on the worker'));
    return 'failed';
  }
  // attempt > 1: a re-run of this step (its worker stopped or lost the lock); the claim also
  // set the task's statusMessage to say so.
  jobLog.info({ tool: tool.name, reruns: claim.reruns, attempt: claim.attempt }, 'step.started');
  return { deps, job, token, taskId, step, claim, fence, owner, tool, log: jobLog, releaseSlot, ended };
}
