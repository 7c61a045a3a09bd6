/**
 * Runs one step of a task as a BullMQ job (design D2, D3, D5).
 *
 * claim (new fence) → tool.run(args, ctx) → one fenced write: completed | input_required |
 * failed | cancelled. Every write carries the fence, so a stale worker (lost lock, stall
 * re-run elsewhere) can never change the task. The job's AbortSignal fires on
 *  - `cancelled`: tasks/cancel or a disconnected synchronous caller (PUBLISH on the cancel
 *    channel → worker.cancelJob; backstop: the cancel flag, polled every second and returned
 *    by every progress write). The task is marked `cancelled` at once, fenced.
 *  - `shutdown`: SIGTERM; the job is released to the queue for another worker (no stall):
 *    `releaseToQueue` below.
 *  - `lock-lost`: another worker owns the step now; this one stops writing.
 *
 * Every terminal write is followed by `releaseOutstanding` (the principal's outstanding count,
 * issue 10 §4). The result is serialized once and stored only in the task record, within
 * MAX_RESULT_BYTES (`result.ts`); the job returns a status word, so BullMQ's job hash and events
 * stream never carry a result (N-09). An unexpected exception reaches the client as
 * "Tool <name> failed unexpectedly (error id …)"; its message and stack only reach the log,
 * under the same `errorId` (issue 10 §5).
 */
import { DelayedError, type Job } from 'bullmq';
import { newErrorId, type Logger } from '@mcp-tasks/observability';
import { capStatusMessage, unexpectedToolError, type TaskStore, type WriteOutcome } from '@mcp-tasks/task-store';
import type { JobQueues, StepJobData } from '@mcp-tasks/jobs';
import {
  abortableSleep,
  isInputRequired,
  ToolCancelled,
  ToolProtocolError,
  type InputResponse,
  type ToolContext,
  type ToolRegistry,
  type ToolSettings,
  unreadableFacts,
} from '@mcp-tasks/tools';
import { serializeResult } from './result.js';

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
  isShuttingDown: () => boolean;
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

/**
 * Hands a job this worker holds back to the queue (SIGTERM), for another worker to start at
 * once; throws the error that tells BullMQ the job was moved. `moveToDelayed(now)`, not
 * `moveToWait`: BullMQ 6.7's moveJobFromActiveToWait puts a prioritized job (every step job
 * is, for the fair share) back without the queue marker idle workers block on, so they only
 * saw it after their `drainDelay` (5 s, measured in test/e2e/topology.test.ts). A due delayed
 * job sets the marker; the next worker's fetch promotes it with its priority. Not an attempt.
 */
async function releaseToQueue(job: Job, token: string | undefined): Promise<never> {
  await job.moveToDelayed(Date.now(), token);
  throw new DelayedError();
}

/** Creates the BullMQ processor for step jobs. */
export function createStepProcessor(deps: ProcessorDeps) {
  const { store, queues, registry, log } = deps;

  return async function processStep(job: Job<StepJobData>, token: string | undefined, signal?: AbortSignal): Promise<string> {
    const { taskId, step } = job.data;
    const jobLog = log.child({ taskId, jobId: job.id, step });
    if (deps.isShuttingDown()) await releaseToQueue(job, token);
    const releaseSlot = async (owner: string): Promise<void> => {
      if (!owner) return;
      // A lost release is repaired by the next reservation at the limit (TaskStore.repairOutstanding).
      await store.releaseOutstanding(owner, taskId).catch((e: Error) => jobLog.warn({ err: e.message }, 'outstanding.release_failed'));
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
      if (ENDED.has(r.code)) await releaseSlot(owner);
      return r;
    };
    const tool = registry.get(claim.tool);
    if (!tool) {
      // Gateways and workers load different tools (MCP_TOOLSETS / MCP_TOOL_MODULES): fail the
      // task at once with an error that says so, rather than leave it waiting (issue 11 §1).
      jobLog.error({ tool: claim.tool }, 'step.tool_not_enabled: this worker does not have the tool; give gateways and workers the same MCP_TOOLSETS and MCP_TOOL_MODULES');
      const message = `Tool ${claim.tool} is not available on the worker that took this task: the service's gateways and workers load different tools (MCP_TOOLSETS / MCP_TOOL_MODULES)`;
      await ended(store.fail(taskId, { fence }, { code: -32603, message, data: { reason: 'tool_not_on_worker', tool: claim.tool } }, 'Tool not available on the worker'));
      return 'failed';
    }
    // attempt > 1: a re-run of this step (its worker stopped or lost the lock); the claim also
    // set the task's statusMessage to say so (issue 9 §6).
    jobLog.info({ tool: tool.name, reruns: claim.reruns, attempt: claim.attempt }, 'step.started');

    // The tool's signal: aborted by the job's signal (cancel / shutdown / lock lost).
    const ac = new AbortController();
    let cancelWrite: Promise<unknown> | undefined;
    const onAbort = () => {
      const reason = String(signal?.reason ?? 'cancelled');
      if (reason === 'cancelled' && !cancelWrite) {
        cancelWrite = ended(store.markCancelled(taskId, fence, 'Cancelled by client request')).catch((e) => jobLog.error({ err: e }, 'cancel.write_failed'));
      }
      ac.abort(reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    if (signal?.aborted) onAbort();

    // Backstop for a lost cancel message: poll the flag every second.
    const poll = setInterval(() => {
      store
        .isCancelRequested(taskId)
        .then((yes) => yes && !ac.signal.aborted && deps.cancelLocal(job.id!, 'cancelled'))
        .catch(() => undefined);
    }, 1000);

    // Progress: coalesced to one write per `progressMinIntervalMs` (leading edge, and the last
    // value always lands); writes are chained so they reach Redis in order, and the pending one
    // is flushed before the step's final write, so a synchronous caller gets every progress
    // event before the result (case B-12e).
    let lastProgressAt = 0;
    let pending: { done: number; total?: number; message?: string } | undefined;
    let trailing: ReturnType<typeof setTimeout> | undefined;
    let chain: Promise<void> = Promise.resolve();
    const writeProgress = async (p: { done: number; total?: number; message?: string }) => {
      const { done, total, message } = p;
      const statusMessage = short(message ?? (total ? `${done} of ${total}` : `${done}`));
      const progress = total === undefined ? { progress: done } : { progress: done, total };
      const event = { ...progress, ...(message ? { message: short(message) } : {}) };
      const r = await store.reportProgress(taskId, fence, { statusMessage, progress, event });
      if (r.code === 'ok' && r.cancelRequested && !ac.signal.aborted) deps.cancelLocal(job.id!, 'cancelled');
      if (r.code !== 'ok' && !ac.signal.aborted) ac.abort(r.code === 'fenced' ? 'lock-lost' : 'cancelled');
    };
    const flushProgress = (): Promise<void> => {
      if (trailing) clearTimeout(trailing);
      trailing = undefined;
      const p = pending;
      pending = undefined;
      if (p) {
        lastProgressAt = Date.now();
        chain = chain.then(() => writeProgress(p)).catch((e) => jobLog.warn({ err: (e as Error).message }, 'progress.write_failed'));
      }
      return chain;
    };
    const ctx: ToolContext = {
      signal: ac.signal,
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
        const at = level === 'debug' ? 'debug' : level === 'info' || level === 'notice' ? 'info' : level === 'warning' ? 'warn' : 'error';
        jobLog[at]({ toolLevel: level, data }, 'tool.log');
      },
      async progress(done, total, message) {
        if (ac.signal.aborted || !Number.isFinite(done)) return;
        pending = { done, ...(total === undefined ? {} : { total }), ...(message === undefined ? {} : { message }) };
        const wait = deps.progressMinIntervalMs - (Date.now() - lastProgressAt);
        if (wait <= 0) return flushProgress();
        trailing ??= setTimeout(() => void flushProgress(), wait);
      },
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
        await ended(store.fail(taskId, { fence }, { code: -32603, message: `Tool ${tool.name} asked for input without any input request` }, 'Internal error'));
        return 'failed';
      }
      if (isInputRequired(outcome)) {
        const requests = Object.fromEntries(Object.entries(outcome.inputRequests).map(([k, v]) => [wireKey(k, step), v]));
        const r = await store.parkForInput(taskId, fence, requests, outcome.state ?? null, short(outcome.statusMessage ?? 'Waiting for input'));
        if (r.code === 'key_reused') {
          await ended(store.fail(taskId, { fence }, { code: -32603, message: `Tool reused input key ${r.key}` }, 'Internal error'));
          return 'failed';
        }
        if (r.code === 'cancelled' || r.code === 'terminal' || r.code === 'gone') await releaseSlot(owner);
        if (r.code === 'ok') await queues.scheduleInputTimeout(taskId, step, deps.inputTimeoutMs, { tool: tool.name, createdAt: job.data.createdAt });
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
      const r = await ended(store.complete(taskId, fence, serialized.json, outcome.isError ? 'Finished with a tool error' : 'Done'));
      jobLog.info({ outcome: r.code, isError: outcome.isError === true, bytes: serialized.bytes }, 'step.completed');
      // D11: a model shown only structuredContent (Claude Code) would miss what the text says.
      // For the tool's author; the count only (a result's text may be anything).
      const unreadable = unreadableFacts(outcome).length;
      if (unreadable > 0) jobLog.warn({ tool: tool.name, unreadable }, 'step.result_unreadable: put the facts of content into structuredContent (structuredResult)');
      return r.code === 'ok' ? 'completed' : r.code;
    } catch (e) {
      if (e instanceof DelayedError) throw e; // released on shutdown by afterAbort(): not a tool error
      if (ac.signal.aborted) return await afterAbort();
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
      await ended(store.fail(taskId, { fence }, error, short(error.message)));
      jobLog.error({ err: e, errorId, tool: tool.name }, 'step.failed');
      return 'failed';
    } finally {
      clearInterval(poll);
      if (trailing) clearTimeout(trailing);
      signal?.removeEventListener('abort', onAbort);
    }

    async function afterAbort(): Promise<string> {
      const reason = String(ac.signal.reason);
      if (reason === 'shutdown') {
        jobLog.info('step.released');
        return releaseToQueue(job, token);
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
