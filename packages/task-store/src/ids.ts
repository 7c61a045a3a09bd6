/** Task ids (T-45) and the BullMQ job ids of their steps (D5). */
import { randomUUID } from 'node:crypto';

/** Task ids: UUIDv4, 122 random bits (T-45). Anything else is answered as "not found". */
const TASK_ID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** True when `id` has the shape of an id this service mints (cheap check before Redis). */
export function isWellFormedTaskId(id: unknown): id is string {
  return typeof id === 'string' && TASK_ID_RE.test(id);
}

/** Thrown by `create` when the id exists already (never overwritten; the existing task is not ours). */
export class TaskIdTakenError extends Error {
  override name = 'TaskIdTakenError';
  constructor(readonly taskId: string) {
    super(`task id ${taskId} is already taken`);
  }
}

/** A new task id: UUIDv4, 122 random bits (T-45). */
export function newTaskId(): string {
  return randomUUID();
}

/** BullMQ job id of one step of a task: `t.<taskId>.<step>` (deterministic, D5). */
export function stepJobId(taskId: string, step: number): string {
  return `t.${taskId}.${step}`;
}

/** Parses `t.<taskId>.<step>` back; `null` for any other job id. */
export function parseStepJobId(jobId: string): { taskId: string; step: number } | null {
  const m = /^t\.([0-9a-f-]{36})\.(\d+)$/.exec(jobId);
  return m ? { taskId: m[1]!, step: Number(m[2]) } : null;
}
