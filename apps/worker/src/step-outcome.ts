/**
 * What a step's tool returned, written to its task, fenced:
 *  - "input required": the task is parked in `input_required` with the requests under their wire
 *    keys (input-keys.ts, T-29) and an input-timeout job (TASK_INPUT_TIMEOUT_MS); no requests, or a
 *    key the task used before, breaks the tool's contract (`-32603`, "Internal error" for the task);
 *  - a result: serialized once and stored only in the task record, within MAX_RESULT_BYTES and the
 *    principal's MAX_RESULT_BYTES_PER_PRINCIPAL (result.ts; `-32603` with `data.reason`
 *    `result_too_large` / `result_budget_exceeded` / `binary_result` otherwise); the job returns a
 *    status word, so BullMQ's job hash and events stream never carry a result (N-09). A completion
 *    on a single Redis or Sentinel also releases the slot and the checkpoint in its own script.
 * The step's checkpoint is deleted when the step ended.
 */
import { toolContractBroken } from '@mcp-tasks/errors';
import { capStatusMessage as short } from '@mcp-tasks/task-store';
import {
  isInputRequired,
  unreadableFacts,
  type InputRequired,
  type StepOutcome,
  type ToolResult,
} from '@mcp-tasks/tools';
import { serializeResult, storeResult } from './result.js';
import { wireKey } from './input-keys.js';
import type { StepRun } from './step-claim.js';

/**
 * Writes `outcome` (see the module doc); returns the job's status word (`input_required`,
 * `completed`, `failed`, or the write's refusal code). Throws a result that cannot be serialized,
 * for the processor to answer as an unexpected error.
 */
export async function writeOutcome(run: StepRun, outcome: StepOutcome): Promise<string> {
  if (isInputRequired(outcome)) return parkForInput(run, outcome);
  return completeStep(run, outcome);
}

/** Parks the task for the input `outcome` asks for. */
async function parkForInput(run: StepRun, outcome: InputRequired): Promise<string> {
  const { deps, job, taskId, step, fence, owner, tool, ended, releaseSlot, log: jobLog } = run;
  const { store } = deps;
  if (Object.keys(outcome.inputRequests).length === 0) {
    await ended(
      store.fail(taskId, { fence }, toolContractBroken(tool.name, { kind: 'no_input_requests' }), 'Internal error'),
    );
    return 'failed';
  }
  const requests = Object.fromEntries(Object.entries(outcome.inputRequests).map(([k, v]) => [wireKey(k, step), v]));
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
    await deps.queues.scheduleInputTimeout(taskId, step, deps.inputTimeoutMs, {
      tool: tool.name,
      createdAt: job.data.createdAt,
    });
    await deps.checkpoints.remove(taskId).catch(() => undefined); // the step ended
  }
  jobLog.info({ outcome: r.code, keys: Object.keys(requests) }, 'step.parked');
  return r.code === 'ok' ? 'input_required' : r.code;
}

/** Stores `outcome` as the task's result and completes it. */
async function completeStep(run: StepRun, outcome: ToolResult): Promise<string> {
  const { deps, taskId, fence, owner, tool, ended, log: jobLog } = run;
  const { store } = deps;
  const serialized = serializeResult(tool.name, outcome, deps.maxResultBytes);
  if (!serialized.ok) {
    if ('unserializable' in serialized) throw serialized.unserializable; // answered as an unexpected error by the processor
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
}
