/**
 * The answers `/mcp` (mcp-route.ts) gives a request it refuses before anything runs: a body that
 * is not one JSON-RPC message with a valid id, the validation ladder's verdict, a malformed
 * `Idempotency-Key`, a call whose slot or key could not be taken, and a task listen without the
 * Tasks extension. Each writes the HTTP status and the JSON-RPC error (errors.ts) and returns
 * the reply; the checks that find nothing to refuse return undefined and allocate nothing.
 */
import type { FastifyReply } from 'fastify';
import type { Logger } from '@mcp-tasks/observability';
import type { Classification, McpBody } from './classify.js';
import { echoableId, ErrorCode, jsonRpcErrorBody, TASKS_EXTENSION } from './errors.js';
import { logRefusal } from './header-refusals.js';
import { badKeyMessage, type Resolution } from './idempotency.js';
import type { SlotOutcome } from './creation-slot.js';
import { sendRefusal } from './limits.js';
import { replyStoreUnavailable } from './store-unavailable-reply.js';

/** The message of a refused JSON-RPC id (400, `-32600`, B-01). */
const ID_REFUSED = 'Invalid Request: id must be a string or an integer from -(2^53 - 1) to 2^53 - 1 (9007199254740991)';

/**
 * Refuses a body that is not one JSON-RPC message with a valid id: a batch (H-07, N-07) or an
 * id that is neither a string nor an integer (B-01). Both are HTTP 400 `-32600` with a `null` id.
 * @returns the reply when refused; undefined (nothing allocated) when the body may go on.
 */
export function refuseMalformedMessage(body: McpBody | undefined, reply: FastifyReply): FastifyReply | undefined {
  // One message per POST (H-07): a batch would run every element past the per-request
  // limits, so it is refused as a whole (N-07).
  if (Array.isArray(body)) {
    return reply
      .code(400)
      .send(
        jsonRpcErrorBody(
          null,
          ErrorCode.InvalidRequest,
          'Invalid Request: batches are not supported; send one JSON-RPC message per request',
        ),
      );
  }
  // B-01: an id is a string or an integer that a JSON number holds exactly (|id| ≤ 2^53 − 1:
  // a larger one comes back as another number); `null`, fractions, booleans and objects are
  // refused before anything runs (a `null` id is not a notification, N-07).
  if (
    body &&
    typeof body === 'object' &&
    'id' in body &&
    !(typeof body.id === 'string' || Number.isSafeInteger(body.id))
  ) {
    return reply.code(400).send(jsonRpcErrorBody(null, ErrorCode.InvalidRequest, ID_REFUSED));
  }
  return undefined;
}

/**
 * Answers the validation ladder's verdict (classify.ts: the `_meta` envelope, B-05; the version,
 * H-11, H-12; the standard and `Mcp-Param-*` headers, H-15, H-17) with its HTTP status and
 * JSON-RPC error, and logs it (header-refusals.ts). `rejected` is `c.rejected`.
 */
export function refuseRejected(
  log: Logger,
  reply: FastifyReply,
  body: McpBody | undefined,
  c: Classification,
  rejected: NonNullable<Classification['rejected']>,
  principal: string,
): FastifyReply {
  logRefusal(log, c, body, principal);
  return reply
    .code(rejected.httpStatus)
    .send(jsonRpcErrorBody(echoableId(body), rejected.code, rejected.message, rejected.data));
}

/**
 * A malformed `Idempotency-Key` (idempotency.ts): HTTP 400 `-32602`, before anything is counted.
 * @param why what `parseIdempotencyKey` found wrong; `maxChars` is IDEMPOTENCY_KEY_MAX_CHARS.
 */
export function refuseBadKey(reply: FastifyReply, id: unknown, why: string, maxChars: number): FastifyReply {
  return reply.code(400).send(jsonRpcErrorBody(id, ErrorCode.InvalidParams, badKeyMessage(why, maxChars)));
}

/**
 * Answers a call that starts work whose reservation failed: a per-principal limit (429
 * `-31429` + Retry-After, limits.ts), Redis away (503 + Retry-After, D10), or an
 * `Idempotency-Key` that names another call (422 `-32602`, idempotency.ts).
 */
export function refuseUnreserved(
  reply: FastifyReply,
  id: unknown,
  r: Extract<Resolution | SlotOutcome, { kind: 'limit' | 'refused' | 'unavailable' | 'reused' }>,
): FastifyReply {
  if (r.kind === 'unavailable') return replyStoreUnavailable(reply, id);
  if (r.kind === 'reused') return reply.code(422).send(jsonRpcErrorBody(id, ErrorCode.InvalidParams, r.message));
  return sendRefusal(reply, id, r.refusal);
}

/**
 * T-49: asking for task notifications (`subscriptions/listen` with `taskIds`) requires declaring
 * the extension on the request; without it, HTTP 400 `-32021` naming the extension in
 * `data.requiredCapabilities`.
 */
export function refuseUndeclaredListen(reply: FastifyReply, id: unknown): FastifyReply {
  return reply
    .code(400)
    .send(
      jsonRpcErrorBody(
        id,
        ErrorCode.MissingRequiredClientCapability,
        'Missing required client capability: notifications.taskIds needs the io.modelcontextprotocol/tasks extension declared on the request',
        { requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } } },
      ),
    );
}

/**
 * LG-15: a 2025-11-25 `tools/call` with `params.task` for a tool listed `forbidden` to the
 * session: HTTP 200 `-32601` naming the tool (the revision's code), before anything is counted.
 */
export function refuseForbiddenTask(reply: FastifyReply, id: unknown, tool: string): FastifyReply {
  return reply
    .code(200)
    .send(
      jsonRpcErrorBody(
        id,
        ErrorCode.MethodNotFound,
        `Tool ${tool} does not support task-augmented execution (execution.taskSupport is "forbidden"); call it without params.task`,
      ),
    );
}
