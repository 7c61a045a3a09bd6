/**
 * The hot path (design D8, D12): the requests a task service answers most — the polls
 * (`tasks/get`, every `pollIntervalMs` for every task a client holds), `tasks/update`,
 * `tasks/cancel`, and a `tools/call` that becomes a task — answered without
 * building the SDK's per-request server, with the same functions as the SDK path
 * (tasks-methods.ts, task-create.ts) and byte for byte the same responses
 * (test/e2e/hot-path-equivalence.test.ts sends one corpus through both). HOT_PATH=false turns
 * it off (every request through the SDK), for comparisons.
 *
 * Every check the spec asks for still runs, once: version, standard headers (Base64 sentinels
 * included), `Mcp-Param-*` headers and the `_meta` envelope in the route's classification
 * (classify.ts, headers.ts); authentication and the rates in the route's hooks; the slot among
 * the principal's unfinished tasks in the route; the Tasks extension gate (T-05) and, in
 * tasks-methods.ts, the owner (T-44); the tool's arguments and required capabilities in the
 * classification (its lane). The hot path only serves requests whose shape it knows exactly,
 * with a well-formed envelope, and hands anything else to the SDK path, whose answers (for
 * malformed params, odd envelopes) it would otherwise have to imitate:
 *  - `tasks/*`: a string `taskId` and nothing but `_meta` (and, for `tasks/update`,
 *    `inputResponses`) beside it;
 *  - `tools/call`: `name`, `arguments` (an object, or absent) and `_meta`, of a call on the
 *    `task` lane whose tool has no pre-task questions (no `requestState`, no `inputResponses`);
 *    with an `Idempotency-Key` naming an earlier task, `startTask` returns that task and the
 *    answer is its handle, as on the SDK path (idempotency.ts).
 *
 * Wire format (the SDK's): a result is `{"result":{…,"resultType":…,"_meta":{"io.
 * modelcontextprotocol/serverInfo":…}},"jsonrpc":"2.0","id":…}` (a task handle without the
 * `content` the SDK would add: task-handle.ts), HTTP 200; an error is
 * `{"jsonrpc":"2.0","id":…,"error":{…}}`, HTTP 200, but 400 for `-32021` (T-05).
 */
import type { OutgoingHttpHeaders } from 'node:http';
import type { FastifyReply } from 'fastify';
import { newErrorId } from '@mcp-tasks/observability';
import { toCreateTaskResult } from '@mcp-tasks/task-store';
import type { Classification, McpBody } from './classify.js';
import { SERVER_INFO, type Exchange, type Gateway } from './context.js';
import { clientErrorOf, ErrorCode, isStoreError } from './errors.js';
import { STORE_RETRY_AFTER_S } from './store-unavailable-reply.js';
import { partitionInputResponses } from './answers.js';
import { cancelTask, gateTasks, getTask, updateTask } from './tasks-methods.js';
import { startTask } from './task-create.js';
import { envelopeVerdict, specEnvelopeCheck } from './verdicts.js';

/** The params each hot method may carry (anything else goes to the SDK path). */
const PARAM_KEYS: Record<string, Set<string>> = {
  'tasks/get': new Set(['taskId', '_meta']),
  'tasks/cancel': new Set(['taskId', '_meta']),
  'tasks/update': new Set(['taskId', '_meta', 'inputResponses']),
  'tools/call': new Set(['name', 'arguments', '_meta']),
};
const ENVELOPE_KEYS = new Set([
  'io.modelcontextprotocol/protocolVersion',
  'io.modelcontextprotocol/clientCapabilities',
  'io.modelcontextprotocol/clientInfo',
]);
const SERVER_META = { 'io.modelcontextprotocol/serverInfo': SERVER_INFO };

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * True when the hot path may answer this request (see the module docstring); false hands it
 * to the SDK path.
 */
export function servesHot(c: Classification, body: McpBody): boolean {
  if (c.era !== 'modern' || c.rejected || c.method === undefined || !Object.hasOwn(PARAM_KEYS, c.method)) return false;
  if (!(typeof c.id === 'string' || Number.isSafeInteger(c.id))) return false;
  const params = body.params as Record<string, unknown> | undefined;
  if (!isObject(params)) return false;
  const allowed = PARAM_KEYS[c.method]!;
  for (const k of Object.keys(params)) if (!allowed.has(k)) return false;
  if (c.method === 'tools/call') {
    // The task lane (T-11), nothing to ask before the task (T-16) and nothing to continue.
    if (c.lane !== 'task' || c.continues || !c.tool || c.tool.preTask || !c.args) return false;
    if (typeof params.name !== 'string' || !(params.arguments === undefined || isObject(params.arguments)))
      return false;
  } else if (typeof params.taskId !== 'string') return false;
  // Once per request shape the ladder remembered (its `_meta` is part of the shape).
  const shape = c.shape;
  if (shape) return (shape.envelope ??= wellFormedEnvelope(params._meta));
  return wellFormedEnvelope(params._meta);
}

/** `_meta` with the 2026 envelope the SDK accepts as is, and no other `io.modelcontextprotocol/` key. */
function wellFormedEnvelope(meta: unknown): boolean {
  if (!isObject(meta)) return false;
  for (const k of Object.keys(meta)) {
    if (k.startsWith('io.modelcontextprotocol/') && !ENVELOPE_KEYS.has(k)) return false;
  }
  // The spec's schemas, once per `_meta` shape (verdicts.ts).
  return envelopeVerdict(meta, (m) =>
    specEnvelopeCheck(m['io.modelcontextprotocol/clientCapabilities'], m['io.modelcontextprotocol/clientInfo']),
  );
}

/**
 * Answers one hot request (`servesHot` was true) for the exchange's principal. A created task's
 * id goes into `exchange.createdTaskId` before the handle is written (D4: the route cancels it
 * if the client is gone before the handle reached it).
 * @throws nothing the client sees: an unexpected failure is answered `-32603` like the SDK's.
 */
export async function serveHot(
  gw: Gateway,
  c: Classification,
  body: McpBody,
  exchange: Exchange,
  reply: FastifyReply,
): Promise<void> {
  const id = c.id as string | number;
  const params = body.params as Record<string, unknown>;
  const { principal } = exchange;
  if (gw.log.isLevelEnabled('debug')) gw.log.debug({ method: c.method, id }, 'hot_path.served');
  let result: Record<string, unknown>;
  try {
    if (c.method === 'tools/call') {
      const rec = await startTask(gw, { principal, caps: c.caps, exchange }, c.tool!, c.args, 'task');
      exchange.createdTaskId = rec.taskId;
      // The handle as the extension's schema has it, no `content` (task-handle.ts; the SDK path
      // removes the `content: []` the SDK adds).
      result = toCreateTaskResult(rec);
    } else {
      gateTasks('modern', c.declaresTasks, c.method!);
      const taskId = params.taskId;
      if (c.method === 'tasks/get') result = await getTask(gw, principal, taskId);
      else if (c.method === 'tasks/cancel') result = await cancelTask(gw, principal, taskId);
      else {
        const raw = params.inputResponses;
        result = await updateTask(
          gw,
          principal,
          taskId,
          raw,
          raw === undefined ? [] : partitionInputResponses(raw).droppedKeys,
        );
      }
    }
  } catch (e) {
    // Never Redis' own text in a response: a Redis failure is "Task store
    // unavailable" with 503 + Retry-After, like the route's answer while Redis is known away.
    const err = clientErrorOf(e, gw.log, c.method ?? 'unknown', newErrorId);
    const error = { code: err.code, message: err.message, ...(err.data !== undefined ? { data: err.data } : {}) };
    if (isStoreError(e)) {
      reply.header('retry-after', String(STORE_RETRY_AFTER_S));
      send(reply, 503, { jsonrpc: '2.0', id, error });
      return;
    }
    const status = err.code === ErrorCode.MissingRequiredClientCapability ? 400 : 200;
    send(reply, status, { jsonrpc: '2.0', id, error });
    return;
  }
  // The SDK's encoding of a result: `resultType` (kept where the handler put it, else added),
  // then `_meta.serverInfo`, last. `result` is this request's own object (each method builds a
  // new one), so the two keys are set on it: a key added goes last, one present keeps its place,
  // the same order as a copy would have.
  result.resultType ??= 'complete';
  result._meta = SERVER_META;
  send(reply, 200, { result, jsonrpc: '2.0', id });
}

/**
 * Writes a JSON body as the SDK does (`Content-Type: application/json`, no charset parameter),
 * with the headers the hooks set on the reply (e.g. `Connection: close` while draining), in one
 * `end` on the hijacked Node response: the body is final, Fastify's send pipeline (onSend hooks,
 * serializers) has nothing to add.
 */
function send(reply: FastifyReply, status: number, message: unknown): void {
  const body = JSON.stringify(message);
  const headers = reply.getHeaders(); // a new object (Fastify copies them)
  for (const name in headers) if (headers[name] === undefined) delete headers[name];
  headers['content-type'] = 'application/json';
  headers['content-length'] = Buffer.byteLength(body);
  reply.hijack();
  reply.raw.writeHead(status, headers as OutgoingHttpHeaders);
  reply.raw.end(body);
}
