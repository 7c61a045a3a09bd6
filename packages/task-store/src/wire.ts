/**
 * Wire shapes of the Tasks extension (spec/tasks-extension.md §4), built from a task record.
 * Objects are built field by field: a key that does not apply is absent, never `undefined`
 * (the conformance checks use `'key' in obj`).
 */
import { taskFailed } from '@mcp-tasks/errors';
import type { TaskRecord } from './task-record.js';
import { isoTime } from './iso-time.js';

export type TaskStatus = 'working' | 'input_required' | 'completed' | 'failed' | 'cancelled';

export function isTerminal(status: string): boolean {
  return status === 'completed' || status === 'failed' || status === 'cancelled';
}

/** `DetailedTask` (T-21): the base task plus the field its status calls for. */
export type DetailedTask = Record<string, unknown> & {
  taskId: string;
  status: TaskStatus;
  createdAt: string;
  lastUpdatedAt: string;
  ttlMs: number | null;
  pollIntervalMs?: number;
};

function baseTask(rec: TaskRecord): DetailedTask {
  const t: DetailedTask = {
    taskId: rec.taskId,
    status: rec.status,
    createdAt: isoTime(rec.createdAt),
    lastUpdatedAt: isoTime(rec.lastUpdatedAt),
    ttlMs: rec.ttlMs,
    pollIntervalMs: rec.pollIntervalMs,
  };
  if (rec.statusMessage) t.statusMessage = rec.statusMessage;
  return t;
}

/**
 * The `tasks/get` result body (without `resultType`, which the SDK stamps, T-22):
 * `input_required` → all outstanding `inputRequests`; `completed` → `result` (a CallToolResult
 * carrying `resultType: "complete"`, which the official ext-tasks client requires);
 * `failed` → `error`.
 */
export function toDetailedTask(rec: TaskRecord): DetailedTask {
  const t = baseTask(rec);
  if (rec.status === 'input_required') t.inputRequests = rec.inputRequests;
  if (rec.status === 'completed') t.result = { resultType: 'complete', ...(rec.result ?? { content: [] }) };
  if (rec.status === 'failed') t.error = rec.error ?? taskFailed();
  return t;
}

/** `CreateTaskResult` (T-11): the flat task with `resultType: "task"`, no payload keys. */
export function toCreateTaskResult(rec: TaskRecord): DetailedTask & { resultType: 'task' } {
  return { resultType: 'task', ...baseTask(rec) };
}
