/**
 * The route's part of 2025-era sessions (design D15; LG-01, LG-02, LG-07), run before the
 * request is classified. Every replica answers every step the same way, from Redis:
 *
 *  - `initialize` (a valid one): a session is opened for the caller's principal with the
 *    negotiated revision, the client's capabilities and `clientInfo`, and its id goes out in the
 *    `Mcp-Session-Id` response header; the SDK's stateless lane answers the request itself.
 *  - A request carrying `Mcp-Session-Id`: the session is renewed and travels with the request;
 *    unknown, expired, ended, malformed or another principal's → HTTP 404 `-32001` "Session not
 *    found" (the client starts over with `initialize`).
 *  - A request without it is served as before sessions existed (lenient, the 2025 spec's "MAY"):
 *    no question can be sent to such a client and its `notifications/cancelled` cannot be
 *    matched to a call (202, ignored); closing its stream still cancels the call.
 *  - `DELETE /mcp` with the header ends the session (200) and cancels the calls still running in
 *    it; without the header the SDK answers 405 as before.
 *  - A POSTed JSON-RPC response (to our `elicitation/create`): routed to the call waiting for it
 *    (legacy-ask.ts), 202. One to an id that is unknown, answered already, expired or of another
 *    session is 202 and ignored (a response has no response; the spec's answer to an accepted
 *    message). An answer whose form content does not match is 400 `-32602` and the question is
 *    asked again.
 *  - `notifications/cancelled {requestId}` (LG-08): the session's call with that id, wherever it runs,
 *    is cancelled (202): its task through the same transition `tasks/cancel` uses (the worker's
 *    step stops within milliseconds), a gateway call through Redis. The call's stream then ends
 *    with no response (the 2025 spec: no response to a cancelled request).
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import {
  isInitializeRequest,
  isJSONRPCErrorResponse,
  isJSONRPCResultResponse,
  ProtocolError,
  SUPPORTED_PROTOCOL_VERSIONS,
} from '@modelcontextprotocol/server';
import { acceptedAnswers } from './answers.js';
import type { McpBody } from './classify.js';
import type { Gateway } from './context.js';
import { ErrorCode, jsonRpcErrorBody } from './errors.js';
import { answerOf, CLIENT_CANCELLED } from './legacy-ask.js';
import type { Session } from './sessions.js';
import { answerTask } from './tasks-methods.js';

/** The response header carrying the session id (case-insensitive on the wire). */
export const SESSION_HEADER = 'mcp-session-id';

/** What the route does next: the request was answered here, or goes on (with its session, if any). */
export type SessionStep =
  { answered: true } | { answered: false; session?: Session; sessionId?: string; opened?: Session };

/** The revision `initialize` negotiates (the SDK's rule: the requested one if served, else the latest 2025 one). */
export function negotiatedVersion(requested: unknown): string {
  return typeof requested === 'string' && SUPPORTED_PROTOCOL_VERSIONS.includes(requested)
    ? requested
    : SUPPORTED_PROTOCOL_VERSIONS[0]!;
}

const first = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v);

function notFound(reply: FastifyReply, id: unknown = null) {
  return reply.code(404).send(jsonRpcErrorBody(id, ErrorCode.SessionNotFound, 'Session not found'));
}

/**
 * Runs the session step of a 2025-era request (see the module docstring).
 * @param body the parsed body (undefined for DELETE / GET).
 */
export async function sessionStep(
  gw: Gateway,
  req: FastifyRequest,
  reply: FastifyReply,
  body: McpBody | undefined,
  principal: string,
): Promise<SessionStep> {
  const { sessions, log } = gw;
  const sessionId = first(req.headers[SESSION_HEADER]);
  if (req.method === 'DELETE') {
    if (sessionId === undefined) return { answered: false };
    const inflight = await sessions.end(sessionId, principal);
    if (!inflight) return (notFound(reply), { answered: true });
    for (const t of inflight) {
      if ('taskId' in t)
        await cancelTask(gw, t.taskId, principal, 'Cancelled: the client ended its session').catch(() => undefined);
      else await sessions.cancelInline(sessionId, t.inline, gw.config.requestState.ttlSeconds * 1000);
    }
    log.info({ principal, cancelled: inflight.length }, 'session.ended');
    reply.code(200).send();
    return { answered: true };
  }
  if (req.method !== 'POST' || !body || typeof body !== 'object') return { answered: false };
  if (body.method === 'initialize') {
    if (!isInitializeRequest(body)) return { answered: false }; // the SDK answers what is wrong
    const p = body.params as { protocolVersion?: unknown; capabilities?: unknown; clientInfo?: unknown };
    let s: Session;
    try {
      s = await sessions.create(principal, negotiatedVersion(p.protocolVersion), p.capabilities, p.clientInfo);
      reply.header(SESSION_HEADER, s.id);
      log.info(
        {
          principal,
          protocolVersion: s.protocolVersion,
          client: s.clientInfo.name,
          elicitation: 'elicitation' in s.capabilities,
        },
        'session.opened',
      );
    } catch (e) {
      // Redis away: the client is served without a session (as before sessions existed).
      log.warn({ err: (e as Error).message }, 'session.open_failed');
      return { answered: false };
    }
    return { answered: false, opened: s };
  }
  if (sessionId === undefined) return { answered: false };
  const session = await sessions.resolve(sessionId, principal);
  if (!session) {
    log.info({ principal, method: body.method }, 'session.not_found');
    return (notFound(reply, typeof body.method === 'string' ? body.id : null), { answered: true });
  }
  if (body.method === undefined && (isJSONRPCResultResponse(body) || isJSONRPCErrorResponse(body))) {
    await receiveResponse(gw, session, body, reply);
    return { answered: true };
  }
  if (body.method === 'notifications/cancelled') {
    await receiveCancel(gw, session, body.params as { requestId?: unknown } | undefined);
    reply.code(202).send();
    return { answered: true };
  }
  return { answered: false, session, sessionId };
}

/** Cancels task `taskId` for `principal` (owner checked in the script, T-44); releases its slot when it ended here. */
async function cancelTask(gw: Gateway, taskId: string, principal: string, reason: string) {
  const r = await gw.store.requestCancel(taskId, reason, { owner: principal });
  if (r.code === 'cancelled') await gw.store.releaseOutstanding(principal, taskId).catch(() => undefined);
  return r.code;
}

/** `notifications/cancelled` of a session: cancels its call `requestId`, wherever it runs. */
async function receiveCancel(gw: Gateway, session: Session, params: { requestId?: unknown } | undefined) {
  const requestId = params?.requestId;
  const target = await gw.sessions.inflightOf(session.id, requestId);
  if (!target) {
    gw.log.info({ requestId, principal: session.principal }, 'legacy.cancel_unmatched');
    return;
  }
  if ('taskId' in target) {
    const outcome = await cancelTask(gw, target.taskId, session.principal, CLIENT_CANCELLED);
    gw.log.info({ requestId, taskId: target.taskId, outcome }, 'legacy.cancelled');
  } else {
    await gw.sessions.cancelInline(session.id, target.inline, gw.config.requestState.ttlSeconds * 1000);
    gw.log.info({ requestId }, 'legacy.cancelled');
  }
}

/** A client's response to one of our requests: routed to its call (module docstring). */
async function receiveResponse(
  gw: Gateway,
  session: Session,
  message: { id?: unknown; result?: unknown; error?: unknown },
  reply: FastifyReply,
) {
  const n = message.id;
  const pending = await gw.sessions.pending(session.id, n);
  if (!pending) {
    gw.log.info({ sessionRequestId: n }, 'legacy.response_unmatched');
    reply.code(202).send();
    return;
  }
  const answer = answerOf(message);
  try {
    if (pending.taskId) {
      const rec = await gw.store.get(pending.taskId);
      if (rec && rec.owner === session.principal && rec.status === 'input_required') {
        const r = await answerTask(gw, rec, { [pending.key]: answer }, session.principal, rec.mode);
        gw.log.info(
          { taskId: rec.taskId, key: pending.key, action: answer.action, outcome: r.code },
          'legacy.answered',
        );
      }
    } else if (pending.inline) {
      const accepted = acceptedAnswers(
        { [pending.key]: pending.request },
        { [pending.key]: answer },
        gw.config.limits.maxInputResponsesBytes,
      );
      await gw.sessions.putAnswer(
        session.id,
        n as number,
        accepted[pending.key],
        gw.config.requestState.ttlSeconds * 1000,
      );
      gw.log.info({ key: pending.key, action: answer.action }, 'legacy.answered');
    }
  } catch (e) {
    if (!(e instanceof ProtocolError) || e.code !== ErrorCode.InvalidParams) throw e;
    // Not what the form asked for: refused, and asked again by the call that waits (its entry goes).
    await gw.sessions.dropPending(session.id, n as number);
    if (pending.taskId) await gw.store.redis.publish(gw.store.channel(pending.taskId), 'reask');
    else await gw.store.redis.publish(gw.sessions.channel(session.id), 'reask');
    gw.log.info({ key: pending.key, err: e.message }, 'legacy.answer_refused');
    reply.code(400).send(jsonRpcErrorBody(null, ErrorCode.InvalidParams, e.message));
    return;
  }
  await gw.sessions.dropPending(session.id, n as number);
  reply.code(202).send();
}
