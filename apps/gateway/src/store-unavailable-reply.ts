/**
 * The HTTP answer while the task store (Redis) cannot be reached or refused a write (D10):
 * status 503, `Retry-After` in seconds, and the JSON-RPC error `-32603` "Task store
 * unavailable; retry later" echoing the request's id. Redis' own error text never reaches it.
 */
import type { FastifyReply } from 'fastify';
import { RETRY_AFTER_S, storeUnavailableError } from '@mcp-tasks/errors';
import { jsonRpcErrorBody } from './errors.js';

/** Seconds a client is told to wait (`Retry-After`) before retrying a request Redis could not serve. */
export const STORE_RETRY_AFTER_S = RETRY_AFTER_S;

/** Sends the 503 "Task store unavailable" answer for request `id` (null when it has none). */
export function replyStoreUnavailable(reply: FastifyReply, id: unknown): FastifyReply {
  const { code, message } = storeUnavailableError();
  return reply
    .code(503)
    .header('retry-after', String(STORE_RETRY_AFTER_S))
    .send(jsonRpcErrorBody(id, code, message));
}
