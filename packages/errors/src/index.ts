/**
 * `@mcp-tasks/errors`: the JSON-RPC error codes and the task errors of every process (gateway,
 * worker, task store, CLI). docs/errors.md is the table of when each is sent.
 */
export { ErrorCode, isKnownErrorCode, isReservedErrorCode, RESERVED_CODE_MAX, RESERVED_CODE_MIN } from './codes.js';
export type { ErrorCodeValue } from './codes.js';
export {
  binaryResult,
  FAILURE_REASONS,
  inputTimeout,
  jobLost,
  resultBudgetError,
  resultTooLarge,
  retriesExhausted,
  STORE_UNAVAILABLE_MESSAGE,
  stepJobFailed,
  storeUnavailableError,
  taskFailed,
  toolContractBroken,
  toolNotOnWorker,
  toolTimeoutError,
  unexpectedToolError,
} from './task-errors.js';
export { RETRY_AFTER_S } from './retry-after.js';
export type { FailureReason, JsonRpcErrorObject, ToolContractBreach } from './task-errors.js';
