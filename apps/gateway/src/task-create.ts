/**
 * Creating a task (D4, T-15): write the record, enqueue step 1, and only then hand out the id.
 * Used by both lanes that run on a worker: `task` (the client gets a `CreateTaskResult`) and
 * `sync` (the gateway holds the request until the result).
 *
 * If either write fails the client gets `-32603` and nothing is left behind: the record and the
 * job are removed once Redis answers again (case B-02c). With REDIS_WAIT_REPLICAS, the same
 * when fewer replicas than that acknowledged both writes within REDIS_WAIT_TIMEOUT_MS. If the client vanishes before the handle
 * reaches it, the route cancels the task (nobody knows its id).
 */
import { newTaskId, stepJobId, TaskIdTakenError, type TaskMode, type TaskRecord } from '@mcp-tasks/task-store';
import { ProtocolError } from '@modelcontextprotocol/server';
import type { ToolDefinition } from '@mcp-tasks/tools';
import type { Call, Gateway } from './context.js';
import type { Classification } from './classify.js';
import { carrierOf } from '@mcp-tasks/observability';
import { ErrorCode, storeUnavailable } from './errors.js';
import { withWorkerNotice } from './workers.js';

/**
 * The part of a request's client capabilities a task keeps for its life (what input its tool
 * may ask for): `elicitation`, `sampling`, `roots` (each `{}` if larger than 1 KB) and the
 * names of declared extensions. The rest is dropped, so a client cannot park megabytes of
 * `_meta` in Redis for the task's TTL.
 */
export function storedCapabilities(caps: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k of ['elicitation', 'sampling', 'roots']) {
    const v = caps[k];
    if (v === undefined || v === null || typeof v !== 'object') continue;
    out[k] = JSON.stringify(v).length <= 1024 ? v : {};
  }
  const ext = caps.extensions;
  if (ext && typeof ext === 'object') {
    out.extensions = Object.fromEntries(
      Object.keys(ext)
        .filter((n) => n.length <= 200)
        .slice(0, 20)
        .map((n) => [n, {}]),
    );
  }
  return out;
}

/**
 * `storedCapabilities` of a classified request: for a 2026 request, whose capabilities are in its
 * `_meta`, remembered with its shape's verdict (verdicts.ts: one computation per shape, not per
 * task); a 2025 request's come from its session, so they are computed each time.
 */
export function storedCapabilitiesOf(c: Classification): Readonly<Record<string, unknown>> {
  if (c.era !== 'modern' || !c.shape) return storedCapabilities(c.caps);
  return (c.shape.storedCaps ??= Object.freeze(storedCapabilities(c.caps)));
}

/** What creating a task needs to know of the call (an SDK handler's `Call`, or the hot path's). */
export type Creator = Pick<Call, 'principal' | 'caps' | 'exchange'>;

/**
 * When the reconciler first looks at a task (ms from now): a synchronous call as soon as its
 * hold could have lapsed (a dead gateway's call is cancelled within SYNC_HOLDER_TIMEOUT_MS +
 * RECONCILE_INTERVAL_MS), any task after RECONCILE_AFTER_MS.
 */
export function firstCheckMs(gw: Gateway, mode: TaskMode): number {
  const w = gw.config.worker;
  return mode === 'sync' ? Math.min(w.reconcileAfterMs, w.syncHolderTimeoutMs + 1) : w.reconcileAfterMs;
}

/**
 * The slot of the task this call creates among its principal's outstanding tasks
 * (MAX_OUTSTANDING_TASKS): the one the route reserved, or one reserved now (a task created by
 * the retry of a pre-task round). Its `priority` is the principal's outstanding count: the
 * fair-share priority of the task's jobs (docs/architecture.md, "Fair share of workers").
 * @throws `-31429` when the principal holds the most unfinished tasks allowed; `-32603` when
 * Redis is unreachable.
 */
async function slotFor(gw: Gateway, call: Creator, now: number): Promise<{ taskId: string; priority: number }> {
  const r = call.exchange.reservation;
  if (r && !r.used) {
    r.used = true;
    return r;
  }
  const taskId = newTaskId();
  const max = gw.config.maxOutstandingTasks;
  const res = await gw.store
    .reserveOutstanding(call.principal, taskId, max, now + gw.config.task.ttlMs, now)
    .catch(() => {
      throw storeUnavailable();
    });
  if (!res.ok) {
    throw new ProtocolError(
      ErrorCode.LimitExceeded,
      `Limit exceeded: at most ${max} unfinished tasks at a time per principal`,
      { limit: 'outstanding_tasks', max },
    );
  }
  call.exchange.reservation = { taskId, priority: res.count, used: true };
  return { taskId, priority: res.count };
}

/**
 * Takes the call's slot and writes its record, then indexes it for the reconciler (before the
 * enqueue: a gateway that dies right there leaves a record the reconciler finds, "job lost",
 * rather than one nobody looks at). The path of every creation the route did not write itself.
 * @throws `-32603` when the write fails (what may have landed is removed); `-31429` at the limit.
 */
async function writeTask(
  gw: Gateway,
  call: Creator,
  tool: ToolDefinition,
  args: unknown,
  mode: TaskMode,
  trace: ReturnType<typeof carrierOf>,
): Promise<{ rec: TaskRecord; priority: number }> {
  const { config, store, log } = gw;
  const idem = call.exchange.idempotency;
  const reserved = call.exchange.reservation;
  // A keyed task is created at its claim's time: the key and the record expire together.
  const now = reserved && !reserved.used && reserved.at !== undefined ? reserved.at : store.clock.now();
  const { taskId, priority } = await slotFor(gw, call, now);
  call.exchange.span?.setAttribute('mcp.task.id', taskId);
  // A tool no live worker runs (gateways and workers load different tools): said at once.
  const note = await gw.workerTools?.noteFor(tool.name);
  let rec: TaskRecord;
  try {
    rec = await store.create(
      {
        owner: call.principal,
        tool: tool.name,
        args,
        mode,
        ttlMs: config.task.ttlMs,
        pollIntervalMs: config.task.pollIntervalMs,
        clientCapabilities: storedCapabilities(call.caps),
        ...(trace ? { trace } : {}),
        ...(note ? { statusMessage: note } : {}),
      },
      taskId,
      now,
    );
  } catch (e) {
    log.error({ err: (e as Error).message, taskId, tool: tool.name }, 'task.create_failed');
    // The write may still have landed (the reply was lost): remove it once Redis answers.
    // Never for a taken id: that record belongs to another task.
    if (!(e instanceof TaskIdTakenError)) void removeAbandoned(gw, taskId, call.principal, idem?.key);
    throw storeUnavailable();
  }
  store.scheduleReconcile(rec.taskId, firstCheckMs(gw, mode), config.task.ttlMs).catch(() => undefined);
  return { rec, priority };
}

/**
 * Creates a task for `call` in `mode`, enqueues step 1 at the principal's fair-share priority,
 * and returns the durable record (T-15). The record and the job keep the context of the
 * request's span, when tracing is on, so the worker's step spans join its trace (N-14). The
 * record returned says "Waiting for a worker" when none is alive (workers.ts). A request whose
 * `Idempotency-Key` names an earlier task gets that task's record instead, unchanged
 * (`exchange.idempotency.replay`): check its `mode`.
 * @throws `-32603` "Task store unavailable" when either write fails (nothing is left behind);
 * `-31429` when the principal holds too many unfinished tasks.
 */
export async function startTask(
  gw: Gateway,
  call: Creator,
  tool: ToolDefinition,
  args: unknown,
  mode: TaskMode,
): Promise<TaskRecord> {
  const { config, store, queues, log } = gw;
  const idem = call.exchange.idempotency;
  // An Idempotency-Key naming an earlier task: that task, as it is now (idempotency.ts).
  if (idem?.replay) return withWorkerNotice(idem.replay, gw.presence?.alive);
  const reserved = call.exchange.reservation;
  const abandon = (id: string) => void removeAbandoned(gw, id, call.principal, idem?.key);
  const trace = carrierOf(call.exchange.span);
  let rec: TaskRecord;
  let priority: number;
  if (reserved && !reserved.used && reserved.created) {
    // Written with its slot and reconciler index entry by the route (creation-slot.ts).
    reserved.used = true;
    rec = reserved.created;
    priority = reserved.priority;
    call.exchange.span?.setAttribute('mcp.task.id', rec.taskId);
  } else {
    const written = await writeTask(gw, call, tool, args, mode, trace);
    rec = written.rec;
    priority = written.priority;
  }
  try {
    await queues.enqueueStep(rec.taskId, 1, {
      priority,
      tool: tool.name,
      createdAt: rec.createdAt,
      ...(trace ? { trace } : {}),
    });
  } catch (e) {
    // Nothing may be left behind without a handle (D4, case B-02c): the client gets an error.
    log.error({ err: (e as Error).message, taskId: rec.taskId }, 'task.enqueue_failed');
    abandon(rec.taskId);
    throw storeUnavailable();
  }
  // REDIS_WAIT_REPLICAS: the handle only once replicas hold both writes, so a Sentinel failover
  // cannot lose a task a client knows of (an old master accepts writes until it is demoted).
  const need = config.redis.waitReplicas ?? 0;
  if (need > 0) {
    const t = config.redis.waitTimeoutMs ?? 1000;
    const acked = await Promise.all([store.replicasAcked(need, t), queues.replicasAcked(need, t)]).then(
      (n) => Math.min(...n),
      () => -1,
    );
    if (acked < need) {
      log.error({ taskId: rec.taskId, acked: Math.max(acked, 0), need }, 'task.not_replicated');
      abandon(rec.taskId);
      throw storeUnavailable();
    }
  }
  log.info({ taskId: rec.taskId, tool: tool.name, principal: call.principal, mode }, 'task.created');
  gw.metrics?.tasksCreated.inc({ tool: tool.name, mode });
  return withWorkerNotice(rec, gw.presence?.alive);
}

/**
 * Deletes the record, step-1 job and outstanding slot of a task whose creation failed (the
 * client got an error, so nobody may ever see it run, D4), and frees the `Idempotency-Key`
 * claimed for it, if any (a retry with the key creates the task anew). Redis is usually the
 * reason it failed, so this retries (250 ms → 2 s apart, for up to 2 minutes) until the record is
 * gone and no job remains. A worker that claims the step first finds no record and does nothing.
 */
export async function removeAbandoned(
  gw: Gateway,
  taskId: string,
  owner: string,
  idempotencyKey?: string,
): Promise<void> {
  const { store, queues, log } = gw;
  const jobId = stepJobId(taskId, 1);
  const until = Date.now() + 120_000;
  for (let wait = 250; Date.now() < until; wait = Math.min(wait * 2, 2000)) {
    try {
      await store.remove(taskId);
      await queues.toolsFor(taskId).remove(jobId);
      await store.releaseOutstanding(owner, taskId);
      if (idempotencyKey !== undefined) await store.idempotency.release(owner, idempotencyKey, taskId);
      if ((await queues.toolsFor(taskId).getJobState(jobId)) === 'unknown') {
        log.info({ taskId }, 'task.abandoned_removed');
        return;
      }
    } catch {
      // Redis still away: try again.
    }
    await new Promise((r) => setTimeout(r, wait));
  }
  log.error({ taskId }, 'task.abandoned_not_removed');
}
