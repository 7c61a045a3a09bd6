/**
 * The reconciler (design D5, case B-16): a BullMQ repeatable job on the maintenance queue
 * (one run at a time across all workers) that looks at live tasks whose "next check" time
 * has come (zset `<prefix>:tasks:reconcile`) and repairs what messages and crashes can lose:
 *  - a `working` task whose step job is gone: unclaimed resume (step > 1) → re-enqueued;
 *    otherwise → `failed` ("job lost");
 *  - a `working` task whose step job ended (completed/failed) without a task write → `failed`;
 *  - an `input_required` task whose input-timeout job was lost → `failed` after the timeout;
 *  - an `input_required` task (`task` mode) nobody polled or answered for
 *    TASK_INPUT_SLOT_RELEASE_MS → its outstanding slot is released (it keeps waiting);
 *  - a synchronous call whose gateway stopped renewing its hold (killed) → cancelled (C-01),
 *    but not within one hold period after a Redis outage (nobody could renew then);
 *  - terminal or expired tasks → dropped from the index, after the completion webhook of a
 *    terminal one is enqueued if its process died before doing so.
 * Tasks that reported progress recently are not checked (they are alive).
 * Every task it ends, and every terminal task it drops, is released from its principal's
 * outstanding count; a re-enqueued step gets its fair-share priority. Messages
 * written for clients say what happened and carry an error id; job states and the like go
 * only to the log.
 */
import { inputTimeout, jobLost } from '@mcp-tasks/errors';
import { newErrorId, type FinishedStatus, type Logger } from '@mcp-tasks/observability';
import { isTerminal, type TaskRecord, type TaskStore } from '@mcp-tasks/task-store';
import type { JobQueues, WebhookOutbox } from '@mcp-tasks/jobs';

export interface ReconcileDeps {
  store: TaskStore;
  queues: JobQueues;
  log: Logger;
  /** A working task untouched this long is checked against its job (ms). */
  afterMs: number;
  inputTimeoutMs: number;
  /**
   * A `task`-mode task waiting in `input_required` that nobody polled or answered this long
   * stops holding its principal's outstanding slot (TASK_INPUT_SLOT_RELEASE_MS); absent = never.
   */
  inputSlotReleaseMs?: number;
  /** A `sync` task whose holder has not renewed for this long is cancelled (ms). */
  syncHolderTimeoutMs: number;
  maxTtlMs: number;
  batch?: number;
  /** Hears every task this pass ended (metrics: `mcp_tasks_finished_total`). */
  onFinished?: (tool: string, status: FinishedStatus, createdAt: number) => void;
  /**
   * How long Redis has been reachable without a break (redis-continuity.ts): the orphan check
   * waits until that is a whole SYNC_HOLDER_TIMEOUT_MS. Absent = always.
   */
  continuity?: { unbrokenForMs(): number };
  /** Enqueues a terminal task's completion webhook when nobody did. */
  webhooks?: Pick<WebhookOutbox, 'enqueueRecord'>;
}

const LIVE_JOB_STATES = new Set(['active', 'waiting', 'delayed', 'prioritized', 'waiting-children']);

/** What a pass did, for logs and tests: tasks looked at, dropped from the index, failed, re-enqueued, cancelled. */
export interface ReconcileCounts {
  checked: number;
  dropped: number;
  failed: number;
  requeued: number;
  cancelled: number;
}

/** One reconcile pass. Returns counts for logs and tests. */
export async function reconcileOnce(deps: ReconcileDeps, now = Date.now()): Promise<ReconcileCounts> {
  const { store } = deps;
  const ids = await store.redis.zrangebyscore(store.reconcileKey, '-inf', now, 'LIMIT', 0, deps.batch ?? 500);
  const counts = { checked: ids.length, dropped: 0, failed: 0, requeued: 0, cancelled: 0 };
  for (const taskId of ids) await reconcileTask(deps, taskId, now, counts);
  return counts;
}

/** One task of a pass, with what its checks share. */
interface TaskCheck {
  deps: ReconcileDeps;
  taskId: string;
  now: number;
  counts: ReconcileCounts;
  /** Looks at the task again at `at` (ms, Redis clock), or sooner for a held synchronous call. */
  later: (id: string, at: number) => Promise<unknown>;
  /** Releases the task from its principal's outstanding count (a failure is logged). */
  release: () => Promise<unknown>;
}

/** Checks one task of the index whose time has come, in the order of the module doc. */
async function reconcileTask(deps: ReconcileDeps, taskId: string, now: number, counts: ReconcileCounts) {
  const { store, log } = deps;
  const redis = store.redis;
  const rec = await store.get(taskId);
  // A held synchronous call is looked at again as soon as its hold could have lapsed, so a
  // dead gateway's call is cancelled within SYNC_HOLDER_TIMEOUT_MS + RECONCILE_INTERVAL_MS.
  const later = (id: string, at: number) => {
    const held = rec?.mode === 'sync' && rec.status === 'working' && rec.holderAt !== undefined;
    return redis.zadd(store.reconcileKey, held ? Math.min(at, rec.holderAt! + deps.syncHolderTimeoutMs + 1) : at, id);
  };
  const release = () =>
    store
      .releaseOutstanding(rec!.owner, taskId)
      .catch((e: Error) => log.warn({ taskId, err: e.message }, 'outstanding.release_failed'));
  const check: TaskCheck = { deps, taskId, now, counts, later, release };
  if (!rec || isTerminal(rec.status)) return dropEnded(check, rec);
  if (
    rec.mode === 'sync' &&
    rec.status === 'working' &&
    rec.holderAt !== undefined &&
    now - rec.holderAt > deps.syncHolderTimeoutMs
  )
    return cancelSyncOrphan(check, rec);
  if (rec.status === 'input_required') return checkInputWait(check, rec);
  return checkWorking(check, rec);
}

/** A terminal or expired task: dropped from the index once its release and webhook are done. */
async function dropEnded({ deps, taskId, now, counts, later, release }: TaskCheck, rec: TaskRecord | null) {
  // A terminal task's release may have been lost (crash after the write): cheap to repeat.
  if (rec) await release();
  // So may its webhook's enqueue; until it is queued, the task stays in the index.
  if (rec && deps.webhooks && !(await ensureWebhook(deps, rec))) {
    await later(taskId, now + deps.afterMs);
    return;
  }
  await deps.store.redis.zrem(deps.store.reconcileKey, taskId);
  counts.dropped++;
}

/** A synchronous call whose holder stopped renewing: cancelled (C-01), unless Redis was away lately. */
async function cancelSyncOrphan({ deps, taskId, now, counts, later, release }: TaskCheck, rec: TaskRecord) {
  const { store, log } = deps;
  // Redis was away lately: no holder could renew then. Live holders renew as soon as it is
  // back; give them one lease period before calling the call an orphan.
  const unbroken = deps.continuity?.unbrokenForMs() ?? Infinity;
  if (unbroken < deps.syncHolderTimeoutMs) {
    log.info({ taskId, redisBackForMs: Math.round(unbroken) }, 'reconcile.sync_orphan_deferred');
    await later(taskId, now + deps.syncHolderTimeoutMs - unbroken);
    return;
  }
  // Nobody holds this synchronous call any more (its gateway died): its client's stream
  // is closed, which cancels the request (C-01).
  const r = await store.requestCancel(taskId, 'Cancelled: the request that started it is gone');
  if (r.code === 'cancelled') {
    await release();
    deps.onFinished?.(rec.tool, 'cancelled', rec.createdAt);
  }
  log.warn({ taskId, outcome: r.code }, 'reconcile.sync_orphan_cancelled');
  counts.cancelled++;
  await later(taskId, now + deps.afterMs);
}

/** An `input_required` task: its idle slot released; failed once its input timeout passed with no timeout job. */
async function checkInputWait({ deps, taskId, now, counts, later, release }: TaskCheck, rec: TaskRecord) {
  const { store, afterMs } = deps;
  await releaseIdleInputSlot(deps, rec, now, release);
  if (now - rec.lastUpdatedAt > deps.inputTimeoutMs + afterMs) {
    const r = await store.fail(
      taskId,
      { expectStatus: 'input_required', expectStep: rec.step },
      inputTimeout(deps.inputTimeoutMs),
      'Timed out waiting for input',
    );
    if (r.code === 'ok') {
      await release();
      deps.onFinished?.(rec.tool, 'failed', rec.createdAt);
    }
    counts.failed++;
  } else {
    await later(taskId, now + afterMs);
  }
}

/**
 * A `working` task untouched for `afterMs`, checked against its step job: live → later; gone
 * and an unclaimed resume → re-enqueued; otherwise failed ("job lost", with an error id).
 */
async function checkWorking({ deps, taskId, now, counts, later, release }: TaskCheck, rec: TaskRecord) {
  const { store, queues, log, afterMs } = deps;
  if (now - rec.lastUpdatedAt < afterMs) {
    await later(taskId, rec.lastUpdatedAt + afterMs);
    return;
  }
  const state = await queues.stepState(taskId, rec.step);
  if (LIVE_JOB_STATES.has(state)) {
    await later(taskId, now + afterMs);
    return;
  }
  if (state === 'unknown' && rec.claimedStep !== rec.step && rec.step > 1 && !rec.cancelRequested) {
    await queues.enqueueStep(taskId, rec.step, {
      priority: await store.outstandingCount(rec.owner, now),
      tool: rec.tool,
      createdAt: rec.createdAt,
      ...(rec.trace ? { trace: rec.trace } : {}),
    });
    await later(taskId, now + afterMs);
    log.warn({ taskId, step: rec.step }, 'reconcile.requeued');
    counts.requeued++;
    return;
  }
  const errorId = newErrorId();
  const error = jobLost(errorId);
  const r = await store.fail(taskId, { expectStatus: 'working', expectStep: rec.step }, error, error.message);
  log.warn({ taskId, step: rec.step, jobState: state, outcome: r.code, errorId }, 'reconcile.failed');
  if (r.code === 'ok') {
    await release();
    deps.onFinished?.(rec.tool, 'failed', rec.createdAt);
    counts.failed++;
  }
  // With webhooks, the next pass checks that this task's delivery was queued, then drops it.
  if (r.code === 'ok' && deps.webhooks) await later(taskId, now + afterMs);
  else await store.redis.zrem(store.reconcileKey, taskId);
}

/**
 * Releases the outstanding slot of a `task`-mode task that has waited in `input_required`,
 * unpolled and unanswered, for `inputSlotReleaseMs` (the task itself keeps waiting until its
 * input timeout). Recorded in the record first, so the answer that resumes it takes a slot back
 * (tasks-methods.ts; it may exceed MAX_OUTSTANDING_TASKS by that one task).
 */
async function releaseIdleInputSlot(
  deps: ReconcileDeps,
  rec: TaskRecord,
  now: number,
  release: () => Promise<unknown>,
): Promise<void> {
  const idleMs = deps.inputSlotReleaseMs;
  if (idleMs === undefined || rec.mode !== 'task' || rec.slotReleasedStep === rec.step) return;
  if (now - Math.max(rec.lastUpdatedAt, rec.polledAt ?? 0) < idleMs) return;
  if (!(await deps.store.markInputSlotReleased(rec.taskId, rec.step, idleMs, now))) return;
  await release();
  deps.log.info({ taskId: rec.taskId, step: rec.step, idleMs }, 'reconcile.input_slot_released');
}

/** Enqueues a terminal task's webhook if needed; false when that failed (try again next pass). */
async function ensureWebhook(deps: ReconcileDeps, rec: TaskRecord): Promise<boolean> {
  try {
    const outcome = await deps.webhooks!.enqueueRecord(rec);
    if (outcome === 'queued') deps.log.warn({ taskId: rec.taskId }, 'reconcile.webhook_queued');
    return true;
  } catch (e) {
    deps.log.warn({ taskId: rec.taskId, err: (e as Error).message }, 'reconcile.webhook_enqueue_failed');
    return false;
  }
}
