/**
 * One turn of a held synchronous call's wait (`waitSync` in sync-call.ts sets the call up, loops
 * over turns and tears it down): renew the hold, read the task (riding out Redis away), then act
 * on its status: the tool's result or error, its questions (MRTR, or on this stream for a 2025
 * client), or a wait for the next change, handing the call off once its budget is spent or the
 * gateway shuts down.
 */
import { inputRequired as sdkInputRequired, ProtocolError } from '@modelcontextprotocol/server';
import type { ChannelWatch, readyWaiter } from '@mcp-tasks/jobs';
import type { TaskRecord } from '@mcp-tasks/task-store';
import type { ToolDefinition } from '@mcp-tasks/tools';
import type { Call, Gateway } from './context.js';
import { ErrorCode, handOffUnavailable, storeUnavailable } from './errors.js';
import { handOff } from './handoff.js';
import { CLIENT_CANCELLED, type TaskQuestions } from './legacy-ask.js';
import { digest } from './mrtr.js';
import type { ProgressRelay } from './progress.js';
import { CUT } from './shutdown-cut.js';
import type { SyncHolder } from './sync-holder.js';

/** While Redis is away, a held call re-reads its task this often (ms), or as soon as Redis is back. */
const STORE_RETRY_MS = 250;

/** What a turn returns when the wait goes on (the next turn follows). */
export const AGAIN = Symbol('wait again');

/** A held synchronous call: what its turns share. `waitSync` creates it and releases its parts. */
export interface HeldCall {
  gw: Gateway;
  call: Call;
  taskId: string;
  tool: ToolDefinition;
  /** The call's arguments (an MRTR continuation carries their digest). */
  args: unknown;
  /** The request's signal: aborts when the client closes the request. */
  signal: AbortSignal;
  /** When the call (or its MRTR retry) started (ms since the epoch). */
  started: number;
  /** The call's budget (ms, `budgetOf`). */
  budgetMs: number;
  /** When the budget runs out (ms since the epoch). */
  deadline: number;
  /** Budget left (ms) when the task began to wait for a 2025 client's answers: it stands still meanwhile. */
  parkedRemaining: number | undefined;
  /** Since when Redis has not answered (ms since the epoch); undefined while it does. */
  unavailableSince: number | undefined;
  /** The task's questions, asked on this stream (a 2025 client with a session that can answer). */
  questions: TaskQuestions | undefined;
  relay: ProgressRelay;
  /** The watch of the task's channel, open from before the first read. */
  watch: ChannelWatch;
  /** Aborts when the client leaves or the gateway shuts down: ends any wait at once. */
  wake: AbortSignal;
  /** Resolves to CUT SHUTDOWN_READ_MS (ms) after the gateway began to shut down. */
  shutdownCut: Promise<typeof CUT>;
  holder: SyncHolder;
  /** Resolves a wait as soon as Redis is ready again. */
  reconnect: ReturnType<typeof readyWaiter>;
}

/**
 * One turn of the wait: renew the hold, read the task, act on its status.
 * @returns the tool's CallToolResult, MRTR `input_required`, the hand-off result, or AGAIN.
 * @throws the task's JSON-RPC error when it failed; `-32603` when the client left, when Redis is
 * still unreachable when the budget runs out, or (`handOffUnavailable`) at shutdown with Redis away.
 */
export async function turn(h: HeldCall) {
  const { gw, taskId } = h;
  await h.holder.renewIfDue(h.unavailableSince !== undefined);
  if (h.signal.aborted) throw await h.holder.disconnected(h.relay, h.tool.name, h.started);
  // Shutting down with Redis away: the call cannot be handed off (the detach needs Redis),
  // and the gateway exits within its bound, so it ends now with an error that says so.
  if (gw.shutdown.aborted && h.unavailableSince !== undefined) {
    gw.log.warn({ taskId, unavailableMs: Date.now() - h.unavailableSince }, 'sync.hand_off_impossible');
    throw handOffUnavailable();
  }
  const rec = await readTask(h);
  if (rec === AGAIN) return AGAIN;
  if (h.unavailableSince !== undefined) {
    gw.log.info({ taskId, unavailableMs: Date.now() - h.unavailableSince }, 'sync.store_back');
    h.unavailableSince = undefined;
  }
  if (!rec) throw new ProtocolError(ErrorCode.InternalError, 'The task record expired before the tool finished');
  if (rec.status !== 'working') {
    // Every progress event was written before the status changed: relay them all, then
    // nothing more (P-02, case B-12e) — unless the call goes on after its questions.
    await pump(h);
    if (!(h.questions && rec.status === 'input_required')) h.relay.close();
  }
  return settle(h, rec);
}

/**
 * Reads the task's record. Redis away: keeps the call, sends a progress heartbeat and waits
 * STORE_RETRY_MS (ms) or until Redis is back.
 * @returns the record (null when it expired), or AGAIN after such a wait.
 * @throws `-32603` "Task store unavailable" when Redis is away once the budget is spent.
 */
async function readTask(h: HeldCall): Promise<TaskRecord | null | typeof AGAIN> {
  const { gw, taskId, relay } = h;
  try {
    // Before the record: which questions still wait (TaskQuestions explains the order).
    await h.questions?.refresh();
    const read = await Promise.race([gw.store.get(taskId), h.shutdownCut]);
    if (read === CUT) throw new Error('no answer from Redis while shutting down');
    return read;
  } catch (e) {
    // Redis away: keep the call, retry until its budget is spent (the client only ever sees
    // "Task store unavailable", never Redis' own error text).
    const now = Date.now();
    if (h.unavailableSince === undefined) {
      h.unavailableSince = now;
      gw.log.warn({ taskId, err: (e as Error).message }, 'sync.store_unavailable');
    }
    if (now >= h.deadline) {
      gw.log.warn({ taskId, unavailableMs: now - h.unavailableSince }, 'sync.store_unavailable_past_budget');
      throw storeUnavailable();
    }
    await relay.heartbeat().catch(() => false);
    await h.reconnect.wait(Math.min(STORE_RETRY_MS, relay.heartbeatDueIn(), h.deadline - now), h.wake);
    return AGAIN;
  }
}

/** Relays new progress events (none is read when the request has no token). */
async function pump(h: HeldCall): Promise<void> {
  if (!h.relay.active) return;
  const rows = await h.gw.store.readProgress(h.taskId, h.relay.lastId).catch(() => []);
  if (!h.signal.aborted) await h.relay.push(rows);
}

/** Acts on the status read: the call's answer, or AGAIN. */
async function settle(h: HeldCall, rec: TaskRecord) {
  const { call, tool } = h;
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
        h.gw.log.info({ taskId: h.taskId, tool: tool.name, afterMs: Date.now() - h.started }, 'legacy.call_cancelled');
        call.legacy.endStream();
      }
      return { content: [{ type: 'text', text: rec.statusMessage ?? 'The tool was cancelled.' }], isError: true };
    case 'input_required':
      return inputRequired(h, rec);
    default:
      return stillWorking(h, rec);
  }
}

/**
 * The task asks for input: for a 2025 client, on this stream (the budget stands still while a
 * person answers); for a client that declared elicitation, MRTR `input_required` with a `sync`
 * continuation; otherwise the task is cancelled and the result says why.
 */
async function inputRequired(h: HeldCall, rec: TaskRecord) {
  const { gw, call, taskId, tool, questions, relay } = h;
  if (questions) {
    const why = await questions.ask(rec);
    if (why) return cannotAsk(gw, call, taskId, tool, why);
    h.parkedRemaining ??= Math.max(0, h.deadline - Date.now());
    h.deadline = Date.now() + h.parkedRemaining;
    await relay.heartbeat();
    await h.watch.wait(Math.min(1000, relay.heartbeatDueIn()), h.wake);
    return AGAIN;
  }
  if (call.caps.elicitation === undefined) {
    const r = await gw.store.requestCancel(taskId, 'Cancelled: the client cannot answer input requests');
    if (r.code === 'cancelled') await gw.store.releaseOutstanding(call.principal, taskId).catch(() => undefined);
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
    requestState: await gw.codec.mint({ k: 'sync', tool: tool.name, args: digest(h.args), taskId }, call.principal),
  });
}

/**
 * The task is still working: relays its progress (a heartbeat when there is none), hands the
 * call off once the budget is spent or the gateway shuts down, else waits for the next message
 * of its channel (at most 1000 ms, or until the next heartbeat or the deadline).
 * @returns the hand-off result, or AGAIN.
 */
async function stillWorking(h: HeldCall, rec: TaskRecord) {
  const { gw, relay } = h;
  h.parkedRemaining = undefined;
  if (!gw.shutdown.aborted) await pump(h);
  await relay.heartbeat();
  if (Date.now() >= h.deadline || gw.shutdown.aborted) {
    const handed = await handOff(gw, h.call, rec, h.tool, h.budgetMs, gw.shutdown.aborted ? 'shutdown' : 'budget');
    if (handed) {
      relay.close();
      return handed;
    }
    return AGAIN; // it ended meanwhile: answer normally
  }
  await h.watch.wait(Math.min(1000, relay.heartbeatDueIn(), Math.max(0, h.deadline - Date.now())), h.wake);
  return AGAIN;
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
