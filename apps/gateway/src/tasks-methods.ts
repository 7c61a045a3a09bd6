/**
 * `tasks/get`, `tasks/update`, `tasks/cancel` (Tasks extension §7, §9, §10) as plain functions
 * of the caller's principal and the params, so the SDK handlers (server-factory.ts) and any
 * other path share one implementation. Also the answering of a task's questions, shared with
 * synchronous MRTR retries (sync-call.ts) and `task_status` (task-status.ts).
 *
 * Order of checks: the extension gate first (T-05; before any lookup, so an unknown id from a
 * non-declaring client still gets `-32021`), then the id's shape, one read, the owner and mode
 * (someone else's task, or a synchronous call's, is "not found": `-32602`, T-44), then one Lua
 * script.
 */
import { ProtocolError } from '@modelcontextprotocol/server';
import {
  isWellFormedTaskId,
  toDetailedTask,
  type ApplyOutcome,
  type DetailedTask,
  type TaskMode,
  type TaskRecord,
} from '@mcp-tasks/task-store';
import type { Gateway } from './context.js';
import type { Era } from './classify.js';
import { acceptedAnswers, alreadyAnswered, answeredDifferently } from './answers.js';
import { firstCheckMs } from './task-create.js';
import { ErrorCode, invalidParams, taskNotFound, tasksExtensionRequired } from './errors.js';
import { setWorkerNotice } from './workers.js';

/**
 * The Tasks extension gate, before any lookup (T-05): under 2025-11-25 there are no tasks here
 * (we do not offer the legacy tasks capability, T-07) → `-32601`; a 2026 request that does not
 * declare the extension → `-32021`.
 */
export function gateTasks(era: Era, declaresTasks: boolean, method: string): void {
  if (era === 'legacy')
    throw new ProtocolError(
      ErrorCode.MethodNotFound,
      `Method not found: ${method} (no tasks under protocol 2025-11-25)`,
    );
  if (!declaresTasks) throw tasksExtensionRequired(method);
}

/** Reads a task the caller may see; `-32602` for unknown, expired, malformed or foreign ids (T-44). */
export async function ownTask(gw: Gateway, principal: string, taskId: unknown): Promise<TaskRecord> {
  if (!isWellFormedTaskId(taskId)) throw taskNotFound();
  const rec = await gw.store.get(taskId);
  if (!rec || rec.mode !== 'task' || rec.owner !== principal) throw taskNotFound();
  return rec;
}

/**
 * `tasks/get` (T-21, T-22): a pure read, one Redis command while the task is unfinished (its
 * record) and a second, its result key, only once the record says it finished (`TaskStore.get`).
 * A `working` task while no worker is alive says so in its `statusMessage` (workers.ts; the count is read in the background).
 */
export async function getTask(gw: Gateway, principal: string, taskId: unknown): Promise<DetailedTask> {
  const rec = await ownTask(gw, principal, taskId);
  notePolled(gw, rec);
  return setWorkerNotice(toDetailedTask(rec), gw.presence?.alive);
}

/**
 * A client looked at `rec`: an `input_required` task it still follows keeps its outstanding slot
 * (TASK_INPUT_SLOT_RELEASE_MS). Written at most four times per release period (the record says
 * when it was last seen), without waiting: a poll stays one read.
 */
export function notePolled(gw: Gateway, rec: TaskRecord): void {
  if (rec.status !== 'input_required' || rec.mode !== 'task') return;
  const seen = Math.max(rec.lastUpdatedAt, rec.polledAt ?? 0);
  if (gw.store.clock.now() - seen < gw.config.task.inputSlotReleaseMs / 4) return;
  gw.store.notePoll(rec.taskId).catch(() => undefined);
}

/**
 * `tasks/update` (T-27..T-32): answers applied atomically before the ack (read-your-writes).
 * @param rawResponses `params.inputResponses` exactly as sent (must be an object, T-27).
 * @param droppedKeys keys the SDK dropped because their value was not a bare response.
 */
export async function updateTask(
  gw: Gateway,
  principal: string,
  taskId: unknown,
  rawResponses: unknown,
  droppedKeys: string[] = [],
): Promise<Record<string, never>> {
  const rec = await ownTask(gw, principal, taskId);
  const dropped = droppedKeys.filter((k) => k in rec.inputRequests);
  if (dropped.length) throw invalidParams(`inputResponses["${dropped[0]}"] is not a valid response`);
  if (rec.status !== 'input_required') {
    acceptedAnswers({}, rawResponses, gw.config.limits.maxInputResponsesBytes); // still -32602 when it is not an object (T-27)
    // Answered a moment ago by another request (the task already resumed): the same answer is
    // acked, a different one refused (case B-05).
    const conflict = answeredDifferently(rec.inputRequests, rec.inputResponses, rawResponses);
    if (conflict !== undefined) throw alreadyAnswered(conflict);
    return {};
  }
  const r = await answerTask(gw, rec, rawResponses, principal);
  const unknown = Object.keys(rawResponses as Record<string, unknown>).filter((k) => !(k in rec.inputRequests));
  if (unknown.length)
    gw.log.warn({ taskId: rec.taskId, keys: unknown.slice(0, 10), count: unknown.length }, 'task.update_unknown_keys');
  gw.log.info({ taskId: rec.taskId, outcome: r.code }, 'task.updated');
  return {};
}

/** `tasks/cancel` (T-35..T-38): ack at once; a terminal task acks unchanged. */
export async function cancelTask(gw: Gateway, principal: string, taskId: unknown): Promise<Record<string, never>> {
  const rec = await ownTask(gw, principal, taskId);
  // The owner is checked again inside the script (T-44: a gateway-side check alone can be raced).
  const r = await gw.store.requestCancel(rec.taskId, undefined, { owner: principal, mode: 'task' });
  if (r.code === 'gone') throw taskNotFound();
  if (r.code === 'cancelled') {
    // Ended here (parked, or not started): no worker will count it, and its input timeout has nothing left to do.
    await gw.store.releaseOutstanding(principal, rec.taskId).catch(() => undefined);
    gw.metrics?.taskFinished(rec.tool, 'cancelled', rec.createdAt);
    if (rec.status === 'input_required') gw.queues.cancelInputTimeout(rec.taskId, rec.step).catch(() => undefined);
  }
  gw.log.info({ taskId: rec.taskId, outcome: r.code }, 'task.cancel');
  return {};
}

/**
 * Answers a task's open questions for `principal` (tasks/update, an MRTR retry of a synchronous
 * call, task_status): validates them against the requests issued (E-05, `-32602`), keeps only
 * what they asked for, applies them atomically — the script checks the owner and mode again
 * (T-44) — and enqueues the next step once the last one is in (D2). A question answered already
 * with a different response is refused, `-32602` (case B-05); the same response is ignored.
 */
export async function answerTask(
  gw: Gateway,
  rec: TaskRecord,
  responses: unknown,
  principal: string,
  mode: TaskMode = 'task',
): Promise<ApplyOutcome> {
  const answers = acceptedAnswers(rec.inputRequests, responses, gw.config.limits.maxInputResponsesBytes);
  // A key answered already, as read: the same answer is left alone, a different one refused.
  // The script decides the same for an answer that lands between the read and the write.
  const conflict = answeredDifferently(rec.inputRequests, rec.inputResponses, responses);
  if (conflict !== undefined) throw alreadyAnswered(conflict);
  const r = await gw.store.applyInputResponses(rec.taskId, answers, { owner: principal, mode });
  if (r.code === 'conflict') throw alreadyAnswered(r.key);
  if (r.code === 'resumed') {
    // Its slot was released while nobody looked (reconciler): the task runs again, so it counts
    // again — even past MAX_OUTSTANDING_TASKS, by this one task.
    if (rec.slotReleasedStep === rec.step) {
      await gw.store
        .reserveOutstanding(principal, rec.taskId, Number.MAX_SAFE_INTEGER, rec.createdAt + rec.ttlMs)
        .catch(() => undefined);
      gw.log.info({ taskId: rec.taskId, step: rec.step }, 'task.input_slot_retaken');
    }
    await resumeStep(gw, rec.taskId, r.step, principal, mode, rec);
  }
  return r;
}

/**
 * Enqueues the next step after the last answer (D2), at the owner's fair-share priority (its
 * outstanding count); the reconciler covers a lost enqueue. `rec` (the task as read) gives the
 * job its tool, creation time and trace context (metrics, N-14).
 */
export async function resumeStep(
  gw: Gateway,
  taskId: string,
  step: number,
  owner: string,
  mode: TaskMode = 'task',
  rec?: TaskRecord,
): Promise<void> {
  const { queues, store, log, config } = gw;
  const extras = rec ? { tool: rec.tool, createdAt: rec.createdAt, ...(rec.trace ? { trace: rec.trace } : {}) } : {};
  try {
    await queues.enqueueStep(taskId, step, { priority: await store.outstandingCount(owner), ...extras });
  } catch (e) {
    log.error({ err: (e as Error).message, taskId, step }, 'task.resume_enqueue_failed');
  }
  queues.cancelInputTimeout(taskId, step - 1).catch(() => undefined);
  store.scheduleReconcile(taskId, firstCheckMs(gw, mode), config.task.ttlMs).catch(() => undefined);
}
