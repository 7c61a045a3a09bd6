/**
 * "Is any worker running?" as clients see it. Workers publish heartbeats
 * (packages/jobs presence.ts); the gateway keeps the live count fresh in the background
 * (`WorkerPresence.watch`, one Redis call every WORKERS_REFRESH_MS whatever the request rate),
 * and a task that is `working` while no worker is alive is shown with NO_WORKER_MESSAGE as its
 * `statusMessage` (`tasks/get`, the `CreateTaskResult`, `task_status`). Only the answer is
 * decorated: the record keeps the tool's own message, which comes back once a worker runs.
 */
import type { DetailedTask, TaskRecord } from '@mcp-tasks/task-store';

/** The `statusMessage` of a `working` task while no worker is alive. */
export const NO_WORKER_MESSAGE = 'Waiting for a worker: none is running';

/** How often a gateway re-counts live workers (ms). */
export const WORKERS_REFRESH_MS = 2000;

/**
 * `rec` as a client should see it given `alive` live workers: unchanged unless the task is
 * `working` and `alive` is 0 (an unknown count, `undefined`, changes nothing).
 */
export function withWorkerNotice(rec: TaskRecord, alive: number | undefined): TaskRecord {
  return rec.status === 'working' && alive === 0 ? { ...rec, statusMessage: NO_WORKER_MESSAGE } : rec;
}

/**
 * The same notice set on `task`, a wire task this caller just built (a `tasks/get` result, which
 * nobody else holds), instead of on a copy of its record: `statusMessage` is then its last key,
 * where `toDetailedTask` puts it for a `working` task. Returns `task`.
 */
export function setWorkerNotice(task: DetailedTask, alive: number | undefined): DetailedTask {
  if (task.status === 'working' && alive === 0) task.statusMessage = NO_WORKER_MESSAGE;
  return task;
}
