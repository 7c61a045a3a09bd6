/**
 * The JSON-RPC errors a task ends `failed` with (T-14), and the messages the service writes
 * for its own failures. Plain objects (`{code, message, data?}`): the task store keeps them in
 * the record, the gateway sends them as they are. Every failure that is the service's, not the
 * caller's, is `-32603` (`ErrorCode.InternalError`); the worker's own limits name themselves in
 * `data.reason` (`FAILURE_REASONS`, the second table of docs/errors.md). No message carries an
 * exception's text, a stack, a path or a Redis key: an unexpected failure gets an `errorId` the
 * log has too.
 */
import { ErrorCode } from './codes.js';

/** A JSON-RPC error object: the `error` of a `failed` task (T-14) or of a response. */
export interface JsonRpcErrorObject {
  code: number;
  message: string;
  data?: unknown;
}

/** The `data.reason` values of the worker's own failures (docs/errors.md, second table). */
export const FAILURE_REASONS = [
  'result_too_large',
  'binary_result',
  'result_budget_exceeded',
  'tool_timeout',
  'input_timeout',
  'tool_not_on_worker',
  'job_lost',
  'worker_lost',
  'retries_exhausted',
] as const;

/** One of `FAILURE_REASONS`. */
export type FailureReason = (typeof FAILURE_REASONS)[number];

/** The message of `-32603` while Redis cannot be reached or refused a write (HTTP 503 + Retry-After). */
export const STORE_UNAVAILABLE_MESSAGE = 'Task store unavailable; retry later';

/** `-32603` "Task store unavailable; retry later" (D10): Redis unreachable, slow, or refusing a write. */
export function storeUnavailableError(): JsonRpcErrorObject {
  return { code: ErrorCode.InternalError, message: STORE_UNAVAILABLE_MESSAGE };
}

/** The error of a `failed` record that has none stored: `-32603` "Task failed". */
export function taskFailed(): JsonRpcErrorObject {
  return { code: ErrorCode.InternalError, message: 'Task failed' };
}

/**
 * The error of a tool that failed unexpectedly: a generic message with a correlation id,
 * nothing of the exception itself (no message, stack, path or key name); the full error goes
 * to the log with the same `errorId`. `-32603`. A deliberate failure (`ToolProtocolError`)
 * keeps its own code and message instead.
 */
export function unexpectedToolError(tool: string, errorId: string): JsonRpcErrorObject {
  return {
    code: ErrorCode.InternalError,
    message: `Tool ${tool} failed unexpectedly (error id ${errorId})`,
    data: { errorId },
  };
}

/**
 * The error of a step that ran longer than its tool's limit (`defineTool({ timeoutMs })`, else
 * TOOL_TIMEOUT_MS): `-32603`, naming the tool and the limit (ms); `data: {reason: 'tool_timeout',
 * tool, timeoutMs}`.
 */
export function toolTimeoutError(tool: string, timeoutMs: number): JsonRpcErrorObject {
  return {
    code: ErrorCode.InternalError,
    message: `Tool ${tool} ran longer than its time limit of ${timeoutMs} ms and was stopped`,
    data: { reason: 'tool_timeout', tool, timeoutMs },
  };
}

/**
 * The error of a result that does not fit its principal's budget of stored result bytes
 * (MAX_RESULT_BYTES_PER_PRINCIPAL): `-32603` naming the sizes and when room frees up (the
 * oldest stored result expires), `data: {reason: 'result_budget_exceeded', bytes, storedBytes,
 * limitBytes, retryAfterS}`. Sizes in bytes of JSON.
 */
export function resultBudgetError(
  tool: string,
  r: { bytes: number; storedBytes: number; limitBytes: number; retryAfterS: number },
): JsonRpcErrorObject {
  return {
    code: ErrorCode.InternalError,
    message: `Result not stored: tool ${tool} returned ${r.bytes} bytes of JSON, and the results of this principal's tasks already stored take ${r.storedBytes} of at most ${r.limitBytes} bytes; the oldest expires in ${r.retryAfterS} s`,
    data: { reason: 'result_budget_exceeded', ...r },
  };
}

/**
 * A result larger than MAX_RESULT_BYTES (case N-09): `-32603` naming the size and the limit
 * (bytes of UTF-8 JSON); `data: {reason: 'result_too_large', bytes, limitBytes}`.
 */
export function resultTooLarge(tool: string, bytes: number, limitBytes: number): JsonRpcErrorObject {
  return {
    code: ErrorCode.InternalError,
    message: `Result too large: tool ${tool} returned ${bytes} bytes of JSON; the limit is ${limitBytes} bytes`,
    data: { reason: 'result_too_large', bytes, limitBytes },
  };
}

/**
 * A result holding binary data (a Node `Buffer`, a typed array): `-32603` saying where (`kind`:
 * the constructor's name, `at`: the field) and how to send it instead; `data: {reason: 'binary_result'}`.
 */
export function binaryResult(tool: string, kind: string, at: string): JsonRpcErrorObject {
  return {
    code: ErrorCode.InternalError,
    message: `Tool ${tool} returned binary data (a ${kind} in field ${at}); results must be JSON text: send binary content as base64 (an image, audio or resource content block)`,
    data: { reason: 'binary_result' },
  };
}

/**
 * A task parked in `input_required` that got no answer within TASK_INPUT_TIMEOUT_MS (`ms`):
 * `-32603`, `data: {reason: 'input_timeout'}`. Written by the input-timeout job and, when that
 * job was lost, by the reconciler.
 */
export function inputTimeout(ms: number): JsonRpcErrorObject {
  return {
    code: ErrorCode.InternalError,
    message: `No answer to the input request within ${ms} ms`,
    data: { reason: 'input_timeout' },
  };
}

/**
 * A step whose tool asked for a retry (`ToolRetry`, or any error under its `retry` policy) on
 * its last allowed run: `-32603` with the tool's message, `data: {reason:
 * 'retries_exhausted', attempts}`.
 */
export function retriesExhausted(tool: string, attempts: number, message: string): JsonRpcErrorObject {
  return {
    code: ErrorCode.InternalError,
    message: `Tool ${tool} failed after ${attempts} attempts: ${message}`,
    data: { reason: 'retries_exhausted', attempts },
  };
}

/**
 * A step job that BullMQ failed without the step writing the task: `-32603` with an error id;
 * BullMQ's reason (which can name jobs and keys) goes to the log only. `workerLost`: the job
 * stalled more often than WORKER_MAX_STALLED_COUNT allows (the workers running it kept dying),
 * said in the message and as `data.reason: 'worker_lost'`.
 */
export function stepJobFailed(errorId: string, workerLost = false): JsonRpcErrorObject {
  if (workerLost)
    return {
      code: ErrorCode.InternalError,
      message: `The task failed: the worker running it stopped unexpectedly (crashed or was killed) more often than allowed, so it was not run again (error id ${errorId})`,
      data: { reason: 'worker_lost', errorId },
    };
  return {
    code: ErrorCode.InternalError,
    message: `The task failed unexpectedly (error id ${errorId})`,
    data: { errorId },
  };
}

/**
 * A `working` task whose step job is gone (found by the reconciler): `-32603`,
 * `data: {reason: 'job_lost', errorId}`.
 */
export function jobLost(errorId: string): JsonRpcErrorObject {
  return {
    code: ErrorCode.InternalError,
    message: `The task stopped: its work was lost before it finished (error id ${errorId})`,
    data: { reason: 'job_lost', errorId },
  };
}

/**
 * A step for a tool this worker did not load (gateways and workers were given different
 * MCP_TOOLSETS / MCP_TOOL_MODULES): `-32603` saying so, `data: {reason: 'tool_not_on_worker', tool}`.
 */
export function toolNotOnWorker(tool: string): JsonRpcErrorObject {
  return {
    code: ErrorCode.InternalError,
    message: `Tool ${tool} is not available on the worker that took this task: the service's gateways and workers load different tools (MCP_TOOLSETS / MCP_TOOL_MODULES)`,
    data: { reason: 'tool_not_on_worker', tool },
  };
}

/** How a tool broke the kit's contract: asked for input with no request, or reused an input key. */
export type ToolContractBreach = { kind: 'no_input_requests' } | { kind: 'input_key_reused'; key: string };

/** A tool that broke the kit's contract (`ToolContractBreach`): `-32603` saying how. */
export function toolContractBroken(tool: string, breach: ToolContractBreach): JsonRpcErrorObject {
  const message =
    breach.kind === 'no_input_requests'
      ? `Tool ${tool} asked for input without any input request`
      : `Tool reused input key ${breach.key}`;
  return { code: ErrorCode.InternalError, message };
}
