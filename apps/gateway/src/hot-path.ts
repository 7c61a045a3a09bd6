/**
 * The hot path of `tasks/get`, `tasks/update` and `tasks/cancel` (design D8, D12): clients poll
 * `tasks/get` every `pollIntervalMs` for every task they hold, so these are most of a task
 * service's requests. They are answered here without building the SDK's per-request server,
 * with the same functions (tasks-methods.ts) and byte for byte the same responses as the SDK
 * path (test/e2e/hot-path-equivalence.test.ts sends one corpus through both).
 *
 * Every check the spec asks for still runs, once: version, standard headers (Base64 sentinels
 * included) and the `_meta` envelope in the route's classification (classify.ts, headers.ts);
 * authentication and the rate in the route's hooks; the Tasks extension gate (T-05) and, in
 * tasks-methods.ts, the owner (T-44). The hot path only serves requests whose shape it knows
 * exactly — a JSON-RPC request with a string `taskId` and nothing but `_meta` (and, for
 * `tasks/update`, `inputResponses`) beside it, with a well-formed envelope — and hands anything
 * else to the SDK path, whose answers (for malformed params, odd envelopes) it would otherwise
 * have to imitate.
 *
 * Wire format (the SDK's): a result is `{"result":{…,"resultType":"complete","_meta":{"io.
 * modelcontextprotocol/serverInfo":…}},"jsonrpc":"2.0","id":…}`, HTTP 200; an error is
 * `{"jsonrpc":"2.0","id":…,"error":{…}}`, HTTP 200, but 400 for `-32021` (T-05).
 */
import type { FastifyReply } from 'fastify';
import { isSpecType } from '@modelcontextprotocol/server';
import type { Classification, McpBody } from './classify.js';
import { SERVER_INFO, type Gateway } from './context.js';
import { ErrorCode } from './errors.js';
import { partitionInputResponses } from './answers.js';
import { cancelTask, gateTasks, getTask, updateTask } from './tasks-methods.js';

const METHODS = new Set(['tasks/get', 'tasks/update', 'tasks/cancel']);
const PARAM_KEYS: Record<string, Set<string>> = {
  'tasks/get': new Set(['taskId', '_meta']),
  'tasks/cancel': new Set(['taskId', '_meta']),
  'tasks/update': new Set(['taskId', '_meta', 'inputResponses']),
};
const ENVELOPE_KEYS = new Set(['io.modelcontextprotocol/protocolVersion', 'io.modelcontextprotocol/clientCapabilities', 'io.modelcontextprotocol/clientInfo']);
const SERVER_META = { 'io.modelcontextprotocol/serverInfo': SERVER_INFO };

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * True when the hot path may answer this request (see the module docstring); false hands it
 * to the SDK path.
 */
export function servesHot(c: Classification, body: McpBody): boolean {
  if (c.era !== 'modern' || c.rejected || c.method === undefined || !METHODS.has(c.method)) return false;
  if (!(typeof c.id === 'string' || Number.isSafeInteger(c.id))) return false;
  const params = body.params as Record<string, unknown> | undefined;
  if (!isObject(params) || typeof params.taskId !== 'string') return false;
  const allowed = PARAM_KEYS[c.method]!;
  for (const k of Object.keys(params)) if (!allowed.has(k)) return false;
  const meta = params._meta;
  if (!isObject(meta)) return false;
  for (const k of Object.keys(meta)) {
    if (k.startsWith('io.modelcontextprotocol/') && !ENVELOPE_KEYS.has(k)) return false;
  }
  const caps = meta['io.modelcontextprotocol/clientCapabilities'];
  if (!isSpecType.ClientCapabilities(caps)) return false;
  const info = meta['io.modelcontextprotocol/clientInfo'];
  if (info !== undefined && !isSpecType.Implementation(info)) return false;
  return true;
}

/**
 * Answers one hot request (`servesHot` was true) for `principal`.
 * @throws nothing the client sees: an unexpected failure is answered `-32603` like the SDK's.
 */
export async function serveHot(gw: Gateway, c: Classification, body: McpBody, principal: string, reply: FastifyReply): Promise<void> {
  const id = c.id as string | number;
  const params = body.params as Record<string, unknown>;
  if (gw.log.isLevelEnabled('debug')) gw.log.debug({ method: c.method, id }, 'hot_path.served');
  const taskId = params.taskId;
  let result: Record<string, unknown>;
  try {
    gateTasks('modern', c.declaresTasks, c.method!);
    if (c.method === 'tasks/get') result = await getTask(gw, principal, taskId);
    else if (c.method === 'tasks/cancel') result = await cancelTask(gw, principal, taskId);
    else {
      const raw = params.inputResponses;
      result = await updateTask(gw, principal, taskId, raw, raw === undefined ? [] : partitionInputResponses(raw).droppedKeys);
    }
  } catch (e) {
    const err = e as { code?: unknown; message?: string; data?: unknown };
    const code = Number.isSafeInteger(err.code) ? (err.code as number) : ErrorCode.InternalError;
    if (code === ErrorCode.InternalError && !Number.isSafeInteger(err.code)) gw.log.error({ err: e, method: c.method }, 'hot_path.failed');
    const error = { code, message: err.message ?? 'Internal error', ...(err.data !== undefined ? { data: err.data } : {}) };
    const status = code === ErrorCode.MissingRequiredClientCapability ? 400 : 200;
    send(reply, status, { jsonrpc: '2.0', id, error });
    return;
  }
  // The SDK's encoding of a custom method's result: `resultType`, then `_meta.serverInfo`, last.
  const encoded = { ...result, resultType: 'complete', _meta: SERVER_META };
  send(reply, 200, { result: encoded, jsonrpc: '2.0', id });
}

/** Writes a JSON body as the SDK does (`Content-Type: application/json`, no charset parameter). */
function send(reply: FastifyReply, status: number, message: unknown): void {
  reply.code(status).header('content-type', 'application/json').send(Buffer.from(JSON.stringify(message)));
}
