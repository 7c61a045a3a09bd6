/**
 * Questions to a 2025-era client on its held call (design D15; LG-04, LG-09): a client of 2025-06-18 or
 * 2025-11-25 that declared `elicitation` at `initialize`, and sends its `Mcp-Session-Id`, gets a
 * tool's input requests as JSON-RPC `elicitation/create` requests on the call's SSE stream, with
 * ids from the session's counter (unique within the session). Its response, POSTed to any
 * gateway, is routed through Redis (legacy-session.ts):
 *  - a worker tool (lane `sync`): the answer is applied to the task record by the same
 *    transition `tasks/update` uses, so the worker runs the next step, while the gateway holding
 *    the call keeps relaying progress and finally writes the result (`TaskQuestions`, used by
 *    sync-call.ts);
 *  - a gateway tool (`runsIn: 'gateway'`) or a pre-task round: the answer is kept in Redis for
 *    the gateway running the call, which then runs the next step (`askAndWait`).
 * Accept, decline and cancel reach the tool exactly as the other lanes deliver them; a JSON-RPC
 * error in place of a result counts as `cancel`. An answer whose content does not match the form
 * is refused (400) and the question is asked again under a new id.
 *
 * Which questions can be sent: `elicitation/create` in form mode when the client declared form
 * (`elicitation: {}` means form, in both revisions), in url mode when it declared url (2025-11-25).
 * Anything else (sampling, roots, a mode it lacks, a 2025-03-26 session) cannot be asked: the
 * call ends as for a client without the capability.
 */
import { ProtocolError } from '@modelcontextprotocol/server';
import type { TaskRecord } from '@mcp-tasks/task-store';
import type { Call, Gateway, LegacyChannel } from './context.js';
import { ErrorCode } from './errors.js';
import type { Session } from './sessions.js';

/** The first revision with elicitation (server → client requests on a held call). */
const ELICITATION_SINCE = '2025-06-18';

/** The statusMessage of a task its 2025 client cancelled with `notifications/cancelled`. */
export const CLIENT_CANCELLED = 'Cancelled by the client (notifications/cancelled)';

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The elicitation modes a session's client can answer (empty before 2025-06-18 or when undeclared). */
export function elicitationModes(session: Session): Set<'form' | 'url'> {
  const modes = new Set<'form' | 'url'>();
  const e = session.capabilities.elicitation;
  if (session.protocolVersion < ELICITATION_SINCE || !isObject(e)) return modes;
  // An empty object is form support (2025-06-18 has no modes; 2025-11-25 keeps the meaning).
  if (Object.keys(e).length === 0 || isObject(e.form)) modes.add('form');
  if (isObject(e.url)) modes.add('url');
  return modes;
}

/**
 * The client capabilities a 2025-era call counts with (what classify.ts checks a tool's needs
 * against, and what a task keeps for its tool): `elicitation` with the modes the client can
 * answer on its held call, when it has any; nothing without a session.
 */
export function legacyCallCapabilities(session: Session | undefined): Record<string, unknown> {
  if (!session) return {};
  const modes = elicitationModes(session);
  if (!modes.size) return {};
  return { elicitation: Object.fromEntries([...modes].map((m) => [m, {}])) };
}

/** Why an input request cannot be sent to this client (undefined: it can). */
export function pushBlocker(session: Session, request: unknown): string | undefined {
  const r = isObject(request) ? request : {};
  if (r.method !== 'elicitation/create')
    return `it needs ${String(r.method)}, which this server sends only over MCP 2026-07-28`;
  const params = isObject(r.params) ? r.params : {};
  const mode = params.mode === 'url' ? 'url' : 'form';
  if (!elicitationModes(session).has(mode))
    return `this client did not declare ${mode} elicitation at initialize (protocol ${session.protocolVersion})`;
  return undefined;
}

/** A client's JSON-RPC response to our request, as the answer a tool reads (an error is `cancel`). */
export function answerOf(message: { result?: unknown; error?: unknown }): Record<string, unknown> {
  if (message.error !== undefined || !isObject(message.result)) return { action: 'cancel' };
  return message.result;
}

/** Sends one input request as a JSON-RPC request and records it as pending; returns its id. */
async function send(
  gw: Gateway,
  ch: LegacyChannel,
  key: string,
  request: Record<string, unknown>,
  target: { taskId: string } | { inline: string },
  ttlMs: number,
): Promise<number> {
  const n = await gw.sessions.nextRequestId(ch.session.id);
  await gw.sessions.addPending(ch.session.id, n, { key, request, ...target }, ttlMs);
  await ch.push({ jsonrpc: '2.0', id: n, method: String(request.method), params: request.params });
  gw.log.info({ sessionRequestId: n, key, ...target, method: request.method }, 'legacy.asked');
  return n;
}

/**
 * The questions of one held synchronous call's task (sync-call.ts). `refresh()` before each read
 * of the record, `ask(rec)` after it: the order matters, because an answer is stored before its
 * pending entry is dropped, so a question whose entry was already gone before the record was read
 * and is still outstanding in it was answered with something unusable, and is asked again.
 */
export class TaskQuestions {
  /** Input request key → our request id. */
  private readonly asked = new Map<string, number>();
  private live = new Map<string, boolean>();

  constructor(
    private readonly gw: Gateway,
    private readonly ch: LegacyChannel,
    private readonly taskId: string,
  ) {}

  /** Reads which asked questions still wait for their response (one MGET; none when nothing was asked). */
  async refresh(): Promise<void> {
    const keys = [...this.asked.keys()];
    const waiting = await this.gw.sessions.stillPending(
      this.ch.session.id,
      keys.map((k) => this.asked.get(k)!),
    );
    this.live = new Map(keys.map((k, i) => [k, waiting[i]!]));
  }

  /**
   * Sends every outstanding question of `rec` not yet asked (or to ask again).
   * @returns undefined when every one was sent, or why one cannot be (the caller ends the call).
   */
  async ask(rec: TaskRecord): Promise<string | undefined> {
    const ttlMs = Math.min(this.gw.config.task.inputTimeoutMs, rec.ttlMs);
    for (const [key, request] of Object.entries(rec.inputRequests)) {
      if (this.asked.has(key) && this.live.get(key) !== false) continue;
      const why = pushBlocker(this.ch.session, request);
      if (why) return why;
      this.asked.set(
        key,
        await send(this.gw, this.ch, key, request as Record<string, unknown>, { taskId: this.taskId }, ttlMs),
      );
      this.live.set(key, true);
    }
    return undefined;
  }
}

/**
 * A gateway-run step's questions (an inline tool's round, a pre-task round): sends them on the
 * call's stream and waits for every answer, woken by the session's channel and re-reading at
 * least once a second. The wait ends with the client's cancel, its disconnect (the request's
 * signal) or after REQUEST_STATE_TTL_S (the life of the equivalent MRTR round).
 * @returns the answers by key, or `'cancelled'` when the client sent `notifications/cancelled`.
 * @throws `-32602` when a question cannot be sent to this client; `-32603` when no answer came in time.
 */
export async function askAndWait(
  gw: Gateway,
  call: Call,
  ch: LegacyChannel,
  token: string,
  inputRequests: Record<string, unknown>,
): Promise<Record<string, unknown> | 'cancelled'> {
  const ttlMs = gw.config.requestState.ttlSeconds * 1000;
  const deadline = Date.now() + ttlMs;
  const signal = call.ctx.mcpReq.signal;
  const keys = Object.keys(inputRequests);
  for (const key of keys) {
    const why = pushBlocker(ch.session, inputRequests[key]);
    if (why) throw new ProtocolError(ErrorCode.InvalidParams, `Cannot ask this client: ${why}`);
  }
  const watch = await gw.events.watch(gw.sessions.channel(ch.session.id));
  try {
    const asked = new Map<string, number>();
    const answers: Record<string, unknown> = {};
    for (;;) {
      for (const key of keys) {
        if (asked.has(key) || key in answers) continue;
        asked.set(
          key,
          await send(gw, ch, key, inputRequests[key] as Record<string, unknown>, { inline: token }, ttlMs),
        );
      }
      const open = keys.filter((k) => !(k in answers));
      const state = await gw.sessions.inlineState(
        ch.session.id,
        token,
        open.map((k) => asked.get(k)!),
      );
      if (state.cancelled) return 'cancelled';
      open.forEach((k, i) => {
        if (state.answers[i] !== null) answers[k] = state.answers[i];
        else if (!state.waiting[i]) asked.delete(k); // answered with something unusable: ask again
      });
      if (keys.every((k) => k in answers)) return answers;
      if (signal.aborted) throw new ProtocolError(ErrorCode.InternalError, 'Request cancelled by client disconnect');
      if (Date.now() >= deadline)
        throw new ProtocolError(ErrorCode.InternalError, `No answer to the question within ${ttlMs / 1000} s`);
      await watch.wait(Math.min(1000, deadline - Date.now()), signal);
    }
  } finally {
    await watch.close();
  }
}
