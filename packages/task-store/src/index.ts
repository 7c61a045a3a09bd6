/**
 * @mcp-tasks/task-store: the task record in Redis (design D3, D4). The store is store.ts; the
 * key layout is layout.ts. This file only re-exports.
 */
export { TaskStore } from './store.js';
export type { TerminalListener } from './store-core.js';
export { OUTSTANDING_CREATE_GRACE_MS, OUTSTANDING_REPAIR_EVERY_MS } from './slots.js';
export { isWellFormedTaskId, newTaskId, stepJobId, parseStepJobId, TaskIdTakenError } from './ids.js';
export { STATUS_MESSAGE_MAX_CHARS, capStatusMessage, canonicalJson, parseRecord } from './task-record.js';
export type { TaskMode, TaskRecord, ProgressEvent, CreateTaskInput } from './task-record.js';
export type {
  ActAs,
  StepClaim,
  WriteOutcome,
  CancelOutcome,
  ApplyOutcome,
  Reservation,
  CompletionCounts,
  CountedCompletion,
} from './outcomes.js';

export { principalTag } from './principal.js';
export { IdempotencyKeys, fingerprintOf, IDEMPOTENCY_CLAIM_GRACE_MS } from './idempotency.js';
export type { IdempotencyEntry, IdempotencyClaim } from './idempotency.js';

export { toDetailedTask, toCreateTaskResult, isTerminal } from './wire.js';
export { isoTime } from './iso-time.js';
export * from './principal-share.js';
export * from './result-budget.js';
export * from './checkpoint.js';
export type { DetailedTask, TaskStatus } from './wire.js';
