/**
 * The BullMQ workers of the tools queue: one per shard (TOOL_QUEUE_SHARDS), sharing the
 * process's WORKER_CONCURRENCY (each runs up to ceil(concurrency / shards) steps at once). A
 * job is an input timeout (step-job-ends.ts) or a step: admitted by its principal's share of
 * the workers (principal-share.ts), observed (step-observer.ts: metrics, a span) and run by the
 * step processor (processor.ts). A lock BullMQ could not renew because another token holds it
 * aborts the step (`lock-lost`); a job BullMQ failed without a task write fails its task.
 */
import { Worker, type Job } from 'bullmq';
import type { Config } from '@mcp-tasks/config';
import type { Logger, WorkerMetrics } from '@mcp-tasks/observability';
import { PrincipalShares, type Checkpoints, type TaskStore } from '@mcp-tasks/task-store';
import { JOB_INPUT_TIMEOUT, TOOLS_QUEUE, toolsPrefix, type JobQueues, type StepJobData } from '@mcp-tasks/jobs';
import type { ToolRegistry } from '@mcp-tasks/tools/internal';
import type { BullConnection } from './bull-connection.js';
import { createShareGate } from './principal-share.js';
import { createStepProcessor } from './processor.js';
import type { createStepObserver } from './step-observer.js';
import { stepJobEnds } from './step-job-ends.js';
import { resultDeps } from './result.js';

export interface ToolsWorkersDeps {
  config: Config;
  store: TaskStore;
  queues: JobQueues;
  registry: ToolRegistry;
  log: Logger;
  metrics: WorkerMetrics;
  /** The tool's name for metrics: a tool this process runs, else `other`. */
  toolLabel: (name: string | undefined) => string;
  observeStep: ReturnType<typeof createStepObserver>;
  workerOpts: BullConnection['workerOpts'];
  checkpoints: Checkpoints;
  /** Aborted when this worker starts draining: every step's `ctx.drainSignal`. */
  drain: AbortController;
  isShuttingDown: () => boolean;
}

/**
 * Starts one Worker per shard. Returns them, and `cancelHere(jobId, reason)`, which aborts job
 * `jobId` on whichever shard's worker of this process runs it (a no-op elsewhere).
 */
export function startToolsWorkers(d: ToolsWorkersDeps) {
  const { config, store, queues, log, metrics, toolLabel } = d;
  const { inputTimedOut, stepJobFailed } = stepJobEnds({
    store,
    log,
    inputTimeoutMs: config.task.inputTimeoutMs,
    onFailed: (tool, createdAt) => metrics.taskFinished(toolLabel(tool), 'failed', createdAt),
  });

  // One BullMQ Worker per shard of the tools queue (TOOL_QUEUE_SHARDS), sharing the
  // process's WORKER_CONCURRENCY: each runs up to ceil(concurrency / shards) steps at once.
  const toolsWorkers: Worker<StepJobData>[] = [];
  /** Aborts job `jobId` on whichever shard's worker of this process runs it (a no-op elsewhere). */
  const cancelHere = (jobId: string, reason: string) => {
    for (const w of toolsWorkers) w.cancelJob(jobId, reason);
  };
  const runStep = toolJobRunner(d, cancelHere);
  const runToolJob = async (job: Job<StepJobData>, token?: string, signal?: AbortSignal) => {
    if (job.name === JOB_INPUT_TIMEOUT) return inputTimedOut(job);
    return runStep(job, token, signal);
  };
  const perShard = Math.ceil(config.worker.concurrency / queues.toolShards.length);
  for (let shard = 0; shard < queues.toolShards.length; shard++) {
    const toolsWorker = new Worker<StepJobData>(TOOLS_QUEUE, runToolJob, {
      ...d.workerOpts,
      prefix: toolsPrefix(config.keyPrefix, shard),
      concurrency: perShard,
    });
    toolsWorkers.push(toolsWorker);
    toolsWorker.on('error', (err) => log.warn({ err: err.message, shard }, 'worker.error'));
    // BullMQ emits `lockRenewalFailed` only for jobs whose lock Redis *answered* is gone or held by
    // another token (extendLocks-1.lua): the lock is really lost, another worker may run the step,
    // so this one stops. A renewal that could not reach Redis (an outage) is an `error` event
    // instead: the command waits for the reconnect (maxRetriesPerRequest null) and the step goes on
    // while its lock is still valid on the server.
    toolsWorker.on('lockRenewalFailed', (ids: string[]) =>
      ids.forEach((id) => {
        log.warn({ jobId: id, shard }, 'step.lock_lost');
        toolsWorker.cancelJob(id, 'lock-lost');
      }),
    );
    toolsWorker.on('failed', (job, err) => stepJobFailed(job, err));
  }
  return { toolsWorkers, cancelHere };
}

/** The step processor behind the principal's share gate and the step observer. */
function toolJobRunner(d: ToolsWorkersDeps, cancelHere: (jobId: string, reason: string) => void) {
  const { config, store, queues, registry, log } = d;
  const processStep = createStepProcessor({
    store,
    queues,
    registry,
    log,
    inputTimeoutMs: config.task.inputTimeoutMs,
    progressMinIntervalMs: config.sync.progressMinIntervalMs,
    maxResultBytes: config.maxResultBytes,
    ...resultDeps(store, config),
    toolTimeoutMs: config.toolTimeoutMs,
    isShuttingDown: d.isShuttingDown,
    cancelLocal: cancelHere,
    checkpoints: d.checkpoints,
    checkpointMaxBytes: config.worker.checkpointMaxBytes,
    drainSignal: d.drain.signal,
  });

  // A principal's share of the workers (principal-share.ts): leases as long as a job lock.
  const shareGate = createShareGate({
    shares: new PrincipalShares(store, config.maxRunningStepsPerPrincipal, config.worker.lockDurationMs),
    queues,
    log,
  });
  return (job: Job<StepJobData>, token: string | undefined, signal: AbortSignal | undefined) =>
    shareGate(job, token, () => d.observeStep(job, () => processStep(job, token, signal)));
}
