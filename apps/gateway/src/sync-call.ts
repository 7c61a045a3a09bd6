/**
 * A synchronous call (design D1, D6): the tool runs on a worker while this request is held open
 * as SSE, until its task ends, asks for input, or runs out of budget.
 *
 *  - progress: the worker's reports are relayed from the task's progress stream as
 *    `notifications/progress` (progress.ts: exact token, strictly increasing, heartbeats);
 *  - the record and the stream are re-read on every message of the task's channel and at least
 *    once a second (D5: messages are hints);
 *  - the request holds the call (`renewHolder`): a killed gateway stops renewing and the
 *    reconciler cancels its call; closing the request cancels it when it was the last holder
 *    (C-01), except a call with an `Idempotency-Key`: a retry with the key may hold it again
 *    within SYNC_HOLDER_TIMEOUT_MS, else the reconciler cancels it;
 *  - input: MRTR `input_required` with a `sync` continuation; the retry answers the task and
 *    waits again (`resumeSync`); for a 2025 client with a session that declared elicitation,
 *    `elicitation/create` requests on this stream instead, answered through Redis while this
 *    call keeps waiting (legacy-ask.ts); its `notifications/cancelled` ends the stream with no
 *    response;
 *  - budget / shutdown: the call is handed off (handoff.ts); at shutdown with Redis away it
 *    cannot be (the detach needs Redis): it ends at once with `-32603` (`handOffUnavailable`);
 *  - Redis away: the call stays held (stream, keep-alives, progress heartbeats),
 *    its reads are retried every 250 ms and at once on reconnect, its hold is renewed as soon
 *    as Redis answers again; only an outage that outlasts the budget ends it with `-32603`
 *    "Task store unavailable".
 *
 * Here: the call's set-up, its loop and its teardown; the hold is sync-holder.ts, one turn of
 * the wait (read, then act on the task's status) sync-wait.ts.
 */
import { readyWaiter } from '@mcp-tasks/jobs';
import type { ToolDefinition } from '@mcp-tasks/tools';
import type { Call, Gateway } from './context.js';
import { invalidParams } from './errors.js';
import { handedOffResult } from './handoff.js';
import { ProgressRelay, progressTokenOf } from './progress.js';
import { answerTask } from './tasks-methods.js';
import { TaskQuestions } from './legacy-ask.js';
import { cutAfterAbort } from './shutdown-cut.js';
import { SyncHolder } from './sync-holder.js';
import { AGAIN, turn, type HeldCall } from './sync-wait.js';

/**
 * Once the gateway shuts down, a read of a held call's task that has not answered within this
 * (ms) counts as Redis away, so a hung Redis costs the hand-off one command timeout (the
 * detach), not one per read in flight.
 */
export const SHUTDOWN_READ_MS = 250;

/** Budget of a synchronous call of `tool` (ms): per-tool override, the tool's own, the default. */
export const budgetOf = (gw: Gateway, tool: ToolDefinition) =>
  gw.config.sync.budgetMsByTool[tool.name] ?? tool.syncBudgetMs ?? gw.config.sync.budgetMs;

/**
 * Holds the call until its task ends or asks for input, relaying progress.
 * @param fromId progress stream id to relay after (`'0'` for a new call; the last id before
 * the answers were applied, for an MRTR retry).
 * @returns the tool's CallToolResult, MRTR `input_required`, or the hand-off result.
 * @throws the task's JSON-RPC error when it failed; `-32603` when Redis is still unreachable
 * when the budget runs out.
 */
export async function waitSync(
  gw: Gateway,
  call: Call,
  taskId: string,
  tool: ToolDefinition,
  args: unknown,
  fromId = '0',
) {
  const { config, store, events } = gw;
  const signal = call.ctx.mcpReq.signal;
  const started = Date.now();
  const budgetMs = budgetOf(gw, tool);
  // A 2025 client with a session that can answer: the task's questions go to it on this stream
  // (legacy-ask.ts), and the budget stands still while a person answers (as it restarts with
  // each MRTR retry on the 2026 wire).
  const questions =
    call.legacy && call.caps.elicitation !== undefined ? new TaskQuestions(gw, call.legacy, taskId) : undefined;
  const relay = new ProgressRelay(
    progressTokenOf(call.ctx.mcpReq._meta),
    (params) => call.ctx.mcpReq.notify({ method: 'notifications/progress', params: { ...params } }),
    config.sync.progressHeartbeatMs,
    fromId,
    started,
  );
  // Watching from before the first read: a message that arrives while this loop reads or
  // writes is kept for the next wait, not lost.
  const watch = await events.watch(store.channel(taskId));
  const wake = AbortSignal.any([signal, gw.shutdown]);
  const shutdownCut = cutAfterAbort(gw.shutdown, SHUTDOWN_READ_MS);
  const holder = await SyncHolder.take(gw, call, taskId);
  // Redis away: reads are retried until the budget runs out, the stream stays open
  // (SSE keep-alives, progress heartbeats), and the hold is renewed at once when Redis is back.
  const reconnect = readyWaiter(store.redis);
  const h: HeldCall = {
    gw,
    call,
    taskId,
    tool,
    args,
    signal,
    started,
    budgetMs,
    // From the request's arrival: creating the task is part of the call's time (D1).
    deadline: (call.exchange.receivedAt ?? started) + budgetMs,
    parkedRemaining: undefined,
    unavailableSince: undefined,
    questions,
    relay,
    watch,
    wake,
    shutdownCut: shutdownCut.cut,
    holder,
    reconnect,
  };
  try {
    for (;;) {
      const out = await turn(h);
      if (out !== AGAIN) return out;
    }
  } catch (e) {
    // A write to a stream that closed meanwhile fails (the 2025 lane's transport is gone once
    // the client left): that is the disconnect, not an error of the call.
    if (signal.aborted && !holder.gone) throw await holder.disconnected(relay, tool.name, started);
    throw e;
  } finally {
    shutdownCut.dispose();
    relay.close();
    // Neither waits for Redis: the answer goes out at once even while Redis is away (a leave
    // and an UNSUBSCRIBE queued on a disconnected subscriber would hold it until Redis is back).
    holder.release();
    void watch.close();
  }
}

/**
 * The MRTR retry of a synchronous call whose task asked for input: applies the answers and
 * waits again. After a hand-off (budget, or the gateway that held it shut down) the answers
 * still count and the call ends with the hand-off result again.
 */
export async function resumeSync(
  gw: Gateway,
  call: Call,
  taskId: string,
  tool: ToolDefinition,
  args: unknown,
  responses: Record<string, unknown>,
) {
  const { store } = gw;
  const rec = await store.get(taskId);
  if (!rec || rec.owner !== call.principal) throw invalidParams('requestState refers to a call that no longer exists');
  if (rec.mode !== 'sync') {
    if (rec.status === 'input_required') await answerTask(gw, rec, responses, call.principal, 'task');
    return handedOffResult((await store.get(taskId)) ?? rec, tool, 'earlier');
  }
  // Relay only what the next step reports.
  const fromId = await store.lastProgressId(taskId).catch(() => '0');
  if (rec.status === 'input_required') {
    // Renew the hold before the task turns `working` again, so the reconciler never sees a
    // working synchronous call with a stale holder.
    await store.renewHolder(taskId, 0);
    await answerTask(gw, rec, responses, call.principal, 'sync');
  }
  return waitSync(gw, call, taskId, tool, args, fromId);
}
