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
 */
import { inputRequired as sdkInputRequired, ProtocolError } from '@modelcontextprotocol/server';
import { readyWaiter } from '@mcp-tasks/jobs';
import type { TaskRecord } from '@mcp-tasks/task-store';
import type { ToolDefinition } from '@mcp-tasks/tools';
import type { Call, Gateway } from './context.js';
import { ErrorCode, handOffUnavailable, invalidParams, storeUnavailable } from './errors.js';
import { handedOffResult, handOff } from './handoff.js';
import { digest } from './mrtr.js';
import { ProgressRelay, progressTokenOf } from './progress.js';
import { answerTask } from './tasks-methods.js';
import { CLIENT_CANCELLED, TaskQuestions } from './legacy-ask.js';

/** While Redis is away, a held call re-reads its task this often (ms), or as soon as Redis is back. */
const STORE_RETRY_MS = 250;

/**
 * Once the gateway shuts down, a read of a held call's task that has not answered within this
 * (ms) counts as Redis away, so a hung Redis costs the hand-off one command timeout (the
 * detach), not one per read in flight.
 */
export const SHUTDOWN_READ_MS = 250;

const CUT = Symbol('cut short by shutdown');

/** Resolves to CUT `ms` after `signal` aborts; `dispose` drops its listener and timer. */
function cutAfterAbort(signal: AbortSignal, ms: number): { cut: Promise<typeof CUT>; dispose(): void } {
  let timer: NodeJS.Timeout | undefined;
  let onAbort = () => undefined as void;
  const cut = new Promise<typeof CUT>((resolve) => {
    onAbort = () => {
      timer = setTimeout(() => resolve(CUT), ms);
      timer.unref();
    };
  });
  if (signal.aborted) onAbort();
  else signal.addEventListener('abort', onAbort, { once: true });
  return {
    cut,
    dispose() {
      signal.removeEventListener('abort', onAbort);
      clearTimeout(timer);
    },
  };
}

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
  const { config, store, events, log } = gw;
  const signal = call.ctx.mcpReq.signal;
  const started = Date.now();
  const budgetMs = budgetOf(gw, tool);
  let deadline = started + budgetMs;
  // A 2025 client with a session that can answer: the task's questions go to it on this stream
  // (legacy-ask.ts), and the budget stands still while a person answers (as it restarts with
  // each MRTR retry on the 2026 wire).
  const questions =
    call.legacy && call.caps.elicitation !== undefined ? new TaskQuestions(gw, call.legacy, taskId) : undefined;
  let parkedRemaining: number | undefined;
  const relay = new ProgressRelay(
    progressTokenOf(call.ctx.mcpReq._meta),
    (params) => call.ctx.mcpReq.notify({ method: 'notifications/progress', params: { ...params } }),
    config.sync.progressHeartbeatMs,
    fromId,
    started,
  );
  /** Relays new progress events (none is read when the request has no token). */
  const pump = async () => {
    if (!relay.active) return;
    const rows = await store.readProgress(taskId, relay.lastId).catch(() => []);
    if (!signal.aborted) await relay.push(rows);
  };
  // Watching from before the first read: a message that arrives while this loop reads or
  // writes is kept for the next wait, not lost.
  const watch = await events.watch(store.channel(taskId));
  const wake = AbortSignal.any([signal, gw.shutdown]);
  const shutdownCut = cutAfterAbort(gw.shutdown, SHUTDOWN_READ_MS);
  // This request holds the call; renewing tells the reconciler it is still here (a killed
  // gateway stops renewing, and its call is cancelled).
  const renewEvery = Math.max(500, Math.floor(config.worker.syncHolderTimeoutMs / 3));
  let renewedAt = Date.now();
  let holding = (await store.renewHolder(taskId, 1).catch(() => -1)) > 0;
  // Redis away: reads are retried until the budget runs out, the stream stays open
  // (SSE keep-alives, progress heartbeats), and the hold is renewed at once when Redis is back.
  const reconnect = readyWaiter(store.redis);
  let unavailableSince: number | undefined;
  /**
   * C-01: the client closed the request. Another request may hold the same call (a retry sent
   * twice): cancel only when this was the last holder (-1 = no longer a synchronous call: handed
   * off, only tasks/cancel ends it now). @returns the error the handler ends with (never sent).
   */
  let gone = false;
  const disconnected = async () => {
    gone = true;
    relay.close();
    const left = holding ? await store.renewHolder(taskId, -1).catch(() => -1) : -1;
    holding = false;
    // With an Idempotency-Key the close may be a lost connection its client retries: the
    // call is left to a retry with the key, which holds it again; unheld, the reconciler
    // cancels it after SYNC_HOLDER_TIMEOUT_MS like a dead gateway's.
    const keyed = call.exchange.idempotency !== undefined;
    if (left === 0 && !keyed) {
      const r = await store.requestCancel(taskId, 'Cancelled: the client closed the request').catch(() => undefined);
      if (r?.code === 'cancelled') await store.releaseOutstanding(call.principal, taskId).catch(() => undefined);
    }
    log.info({ taskId, tool: tool.name, holdersLeft: left, keyed, afterMs: Date.now() - started }, 'sync.disconnected');
    return new ProtocolError(ErrorCode.InternalError, 'Request cancelled by client disconnect');
  };
  try {
    for (;;) {
      // Shutting down: the hold no longer matters (the hand-off drops it), and a renewal could
      // wait a whole command timeout on a hung Redis.
      if (!gw.shutdown.aborted && (unavailableSince !== undefined || Date.now() - renewedAt >= renewEvery)) {
        // A renewal that failed (Redis away) is tried again on the next turn, not a period later.
        if (
          await store.renewHolder(taskId, 0).then(
            () => true,
            () => false,
          )
        )
          renewedAt = Date.now();
      }
      if (signal.aborted) throw await disconnected();
      // Shutting down with Redis away: the call cannot be handed off (the detach needs Redis),
      // and the gateway exits within its bound, so it ends now with an error that says so.
      if (gw.shutdown.aborted && unavailableSince !== undefined) {
        log.warn({ taskId, unavailableMs: Date.now() - unavailableSince }, 'sync.hand_off_impossible');
        throw handOffUnavailable();
      }
      let rec: TaskRecord | null;
      try {
        // Before the record: which questions still wait (TaskQuestions explains the order).
        await questions?.refresh();
        const read = await Promise.race([store.get(taskId), shutdownCut.cut]);
        if (read === CUT) throw new Error('no answer from Redis while shutting down');
        rec = read;
      } catch (e) {
        // Redis away: keep the call, retry until its budget is spent (the client only ever sees
        // "Task store unavailable", never Redis' own error text).
        const now = Date.now();
        if (unavailableSince === undefined) {
          unavailableSince = now;
          log.warn({ taskId, err: (e as Error).message }, 'sync.store_unavailable');
        }
        if (now >= deadline) {
          log.warn({ taskId, unavailableMs: now - unavailableSince }, 'sync.store_unavailable_past_budget');
          throw storeUnavailable();
        }
        await relay.heartbeat().catch(() => false);
        await reconnect.wait(Math.min(STORE_RETRY_MS, relay.heartbeatDueIn(), deadline - now), wake);
        continue;
      }
      if (unavailableSince !== undefined) {
        log.info({ taskId, unavailableMs: Date.now() - unavailableSince }, 'sync.store_back');
        unavailableSince = undefined;
      }
      if (!rec) throw new ProtocolError(ErrorCode.InternalError, 'The task record expired before the tool finished');
      if (rec.status !== 'working') {
        // Every progress event was written before the status changed: relay them all, then
        // nothing more (P-02, case B-12e) — unless the call goes on after its questions.
        await pump();
        if (!(questions && rec.status === 'input_required')) relay.close();
      }
      switch (rec.status) {
        case 'completed':
          return { ...(rec.result ?? { content: [] }) };
        case 'failed':
          throw new ProtocolError(
            rec.error?.code ?? ErrorCode.InternalError,
            rec.error?.message ?? 'Tool failed',
            rec.error?.data,
          );
        case 'cancelled':
          if (call.legacy && rec.statusMessage === CLIENT_CANCELLED) {
            // The 2025 client cancelled this request: no response to it; the stream just ends.
            log.info({ taskId, tool: tool.name, afterMs: Date.now() - started }, 'legacy.call_cancelled');
            call.legacy.endStream();
          }
          return { content: [{ type: 'text', text: rec.statusMessage ?? 'The tool was cancelled.' }], isError: true };
        case 'input_required': {
          if (questions) {
            const why = await questions.ask(rec);
            if (why) return cannotAsk(gw, call, taskId, tool, why);
            parkedRemaining ??= Math.max(0, deadline - Date.now());
            deadline = Date.now() + parkedRemaining;
            await relay.heartbeat();
            await watch.wait(Math.min(1000, relay.heartbeatDueIn()), wake);
            continue;
          }
          if (call.caps.elicitation === undefined) {
            const r = await store.requestCancel(taskId, 'Cancelled: the client cannot answer input requests');
            if (r.code === 'cancelled') await store.releaseOutstanding(call.principal, taskId).catch(() => undefined);
            return {
              content: [
                {
                  type: 'text',
                  text: `${tool.name} needs to ask the user a question, but this client did not declare the elicitation capability.`,
                },
              ],
              isError: true,
            };
          }
          return sdkInputRequired({
            inputRequests: rec.inputRequests as never,
            requestState: await gw.codec.mint(
              { k: 'sync', tool: tool.name, args: digest(args), taskId },
              call.principal,
            ),
          });
        }
        default: {
          parkedRemaining = undefined;
          if (!gw.shutdown.aborted) await pump();
          await relay.heartbeat();
          if (Date.now() >= deadline || gw.shutdown.aborted) {
            const handed = await handOff(gw, call, rec, tool, budgetMs, gw.shutdown.aborted ? 'shutdown' : 'budget');
            if (handed) {
              relay.close();
              return handed;
            }
            continue; // it ended meanwhile: answer normally
          }
          await watch.wait(Math.min(1000, relay.heartbeatDueIn(), Math.max(0, deadline - Date.now())), wake);
        }
      }
    }
  } catch (e) {
    // A write to a stream that closed meanwhile fails (the 2025 lane's transport is gone once
    // the client left): that is the disconnect, not an error of the call.
    if (signal.aborted && !gone) throw await disconnected();
    throw e;
  } finally {
    shutdownCut.dispose();
    relay.close();
    // Neither waits for Redis: the answer goes out at once even while Redis is away (a leave
    // and an UNSUBSCRIBE queued on a disconnected subscriber would hold it until Redis is back).
    if (holding) void store.renewHolder(taskId, -1).catch(() => 0);
    void watch.close();
  }
}

/**
 * Ends a 2025 call whose task asks something its client cannot be asked (legacy-ask.ts
 * `pushBlocker`): the task is cancelled and the result says why.
 */
async function cannotAsk(gw: Gateway, call: Call, taskId: string, tool: ToolDefinition, why: string) {
  const r = await gw.store.requestCancel(taskId, 'Cancelled: the client cannot answer this input request');
  if (r.code === 'cancelled') await gw.store.releaseOutstanding(call.principal, taskId).catch(() => undefined);
  return {
    content: [{ type: 'text', text: `${tool.name} needs to ask the user a question that cannot be sent: ${why}.` }],
    isError: true,
  };
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
