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
 * Every terminal write is followed by `releaseOutstanding` (the principal's outstanding count);
 * a completion on a single Redis or Sentinel does it, and the rest, in its own script (result.ts).
 * The result is serialized once and stored only in the task record, within
 * MAX_RESULT_BYTES and the principal's MAX_RESULT_BYTES_PER_PRINCIPAL (`result.ts`); the job
 * returns a status word, so BullMQ's job hash and events stream never carry a result (N-09). An unexpected exception reaches the client as
 * "Tool <name> failed unexpectedly (error id …)"; its message and stack only reach the log,
 * under the same `errorId`.
 */
import { DelayedError, type Job } from 'bullmq';
import { newErrorId, type Logger } from '@mcp-tasks/observability';
import { toolContractBroken, toolNotOnWorker, toolTimeoutError, unexpectedToolError } from '@mcp-tasks/errors';
import {
  capStatusMessage,
  type Checkpoints,
  type ResultBudget,
  type TaskStore,
  type WriteOutcome,
} from '@mcp-tasks/task-store';
import type { JobQueues, StepJobData } from '@mcp-tasks/jobs';
import {
  abortableSleep,
  isInputRequired,
  ToolCancelled,
  ToolHandOver,
  ToolProtocolError,
  ToolRetry,
  type InputResponse,
  type ToolContext,
  type ToolSettings,
  unreadableFacts,
} from '@mcp-tasks/tools';
import type { ToolRegistry } from '@mcp-tasks/tools/internal';
import { serializeResult, storeResult } from './result.js';
import { STEP_TIMEOUT, startStepTimeout, stepTimeoutMs } from './step-timeout.js';
import { checkpointWriter, readLastCheckpoint } from './checkpoint.js';
import { retryOrFail } from './retry.js';
import { handOverStep, releaseToQueue } from './step-release.js';
import { progressWriter } from './progress-writer.js';

export interface ProcessorDeps {
  store: TaskStore;
  queues: JobQueues;
  registry: ToolRegistry;
  log: Logger;
  settings: ToolSettings;
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

/** Suffix that makes a tool's logical input key unique for the task's life (T-29). */
export const wireKey = (key: string, step: number) => `${key}.${step}`;

function fromWireKeys(responses: Record<string, unknown>, prevStep: number): Record<string, InputResponse> {
  const out: Record<string, InputResponse> = {};
  const suffix = `.${prevStep}`;
  for (const [k, v] of Object.entries(responses)) {
    out[k.endsWith(suffix) ? k.slice(0, -suffix.length) : k] = v as InputResponse;
  }
  return out;
}

/** Truncates a status message (and a progress event's message) to what clients show. */
const short = capStatusMessage;

/** Outcomes of a terminal write after which the task is terminal (or gone): its outstanding slot is released. */
const ENDED = new Set<WriteOutcome['code']>(['ok', 'terminal', 'cancelled', 'gone']);

/** Creates the BullMQ processor for step jobs. */
export function createStepProcessor(deps: ProcessorDeps) {
  const { store, queues, registry, log } = deps;

  return async function processStep(
    job: Job<StepJobData>,
    token: string | undefined,
    signal?: AbortSignal,
  ): Promise<string> {
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

    // Progress: coalesced, in order, flushed before the final write (progress-writer.ts).
    const refusedAbort = (code: WriteOutcome['code']) =>
      !ac.signal.aborted && ac.abort(code === 'fenced' ? 'lock-lost' : 'cancelled');
    const progress = progressWriter({
      store,
      taskId,
      fence,
      minIntervalMs: deps.progressMinIntervalMs,
      stopped: () => ac.signal.aborted,
      onCancelRequested: () => deps.cancelLocal(job.id!, 'cancelled'),
      onRefused: refusedAbort,
      log: jobLog,
    });
    const flushProgress = progress.flush;
    const lastCheckpoint =
      claim.attempt > 1 ? await readLastCheckpoint(deps.checkpoints, taskId, step, jobLog) : undefined;
    const checkpoint = checkpointWriter({
      checkpoints: deps.checkpoints,
      taskId,
      step,
      fence,
      maxBytes: deps.checkpointMaxBytes,
      onRefused: refusedAbort,
      log: jobLog,
    });
    if ((job.data.retries ?? 0) > 0)
      await store
        .reportProgress(taskId, fence, { statusMessage: `Retrying (run ${claim.attempt})` })
        .catch(() => undefined);
    const drainSignal = deps.drainSignal;
    const ctx: ToolContext = {
      signal: ac.signal,
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
      settings: deps.settings,
      sleep: (ms) => abortableSleep(ms, ac.signal),
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
      progress: progress.report,
    };

    const aborted = new Promise<'aborted'>((resolve) => {
      if (ac.signal.aborted) resolve('aborted');
      ac.signal.addEventListener('abort', () => resolve('aborted'), { once: true });
    });
    try {
      const run = tool.run(claim.args as never, ctx);
      run.catch(() => undefined); // an abandoned run may reject later
      const outcome = await Promise.race([run, aborted]);
      if (outcome === 'aborted' || ac.signal.aborted) return await afterAbort();
      await flushProgress();
      if (ac.signal.aborted) return await afterAbort();
      if (isInputRequired(outcome) && Object.keys(outcome.inputRequests).length === 0) {
        await ended(
          store.fail(taskId, { fence }, toolContractBroken(tool.name, { kind: 'no_input_requests' }), 'Internal error'),
        );
        return 'failed';
      }
      if (isInputRequired(outcome)) {
        const requests = Object.fromEntries(
          Object.entries(outcome.inputRequests).map(([k, v]) => [wireKey(k, step), v]),
        );
        const r = await store.parkForInput(
          taskId,
          fence,
          requests,
          outcome.state ?? null,
          short(outcome.statusMessage ?? 'Waiting for input'),
        );
        if (r.code === 'key_reused') {
          await ended(
            store.fail(
              taskId,
              { fence },
              toolContractBroken(tool.name, { kind: 'input_key_reused', key: r.key }),
              'Internal error',
            ),
          );
          return 'failed';
        }
        if (r.code === 'cancelled' || r.code === 'terminal' || r.code === 'gone') await releaseSlot(owner);
        if (r.code === 'ok') {
          await queues.scheduleInputTimeout(taskId, step, deps.inputTimeoutMs, {
            tool: tool.name,
            createdAt: job.data.createdAt,
          });
          await deps.checkpoints.remove(taskId).catch(() => undefined); // the step ended
        }
        jobLog.info({ outcome: r.code, keys: Object.keys(requests) }, 'step.parked');
        return r.code === 'ok' ? 'input_required' : r.code;
      }
      const serialized = serializeResult(tool.name, outcome, deps.maxResultBytes);
      if (!serialized.ok) {
        if ('unserializable' in serialized) throw serialized.unserializable; // answered as an unexpected error below
        await ended(store.fail(taskId, { fence }, serialized.error, short(serialized.error.message)));
        jobLog.warn({ tool: tool.name, data: serialized.error.data }, 'step.result_refused');
        return 'failed';
      }
      // The principal's budget of stored result bytes (result.ts): counted with, or before, the
      // write; a result over it fails the task.
      const result = { owner, taskId, fence, tool: tool.name, ...serialized, isError: outcome.isError === true };
      const r = await storeResult(deps, result, ended, jobLog);
      if (!r) return 'failed';
      jobLog.info({ outcome: r.code, isError: outcome.isError === true, bytes: serialized.bytes }, 'step.completed');
      // D11: a model shown only structuredContent (Claude Code) would miss what the text says.
      // For the tool's author; the count only (a result's text may be anything).
      const unreadable = unreadableFacts(outcome).length;
      if (unreadable > 0)
        jobLog.warn(
          { tool: tool.name, unreadable },
          'step.result_unreadable: put the facts of content into structuredContent (structuredResult)',
        );
      return r.code === 'ok' ? 'completed' : r.code;
    } catch (e) {
      if (e instanceof DelayedError) throw e; // released on shutdown by afterAbort(): not a tool error
      if (ac.signal.aborted) return await afterAbort();
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
    } finally {
      stopTimeout();
      clearInterval(poll);
      progress.stop();
      signal?.removeEventListener('abort', onAbort);
    }

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
  };
}
