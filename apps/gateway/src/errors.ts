/**
 * The gateway's JSON-RPC errors (design D10): the SDK's `ProtocolError` built from the codes
 * and messages of `@mcp-tasks/errors`, the body of the replies the gateway writes itself, and
 * what a client may see of a thrown error. When each code is sent, with its HTTP status and
 * requirement, is the table in docs/errors.md. Errors raised inside the MCP SDK's dispatch get
 * their HTTP status from the SDK (which follows the same mapping); errors the gateway answers
 * before the SDK (body parse, size, Redis down) are written with `jsonRpcErrorBody`.
 */
import { ErrorCode, STORE_UNAVAILABLE_MESSAGE } from '@mcp-tasks/errors';
import { ProtocolError } from '@modelcontextprotocol/server';

import { TASKS_EXTENSION } from './tasks-extension.js';

export { TASKS_EXTENSION };

export { ErrorCode };

/** `-32602` for an id that is unknown, expired, malformed or someone else's (T-33, T-37, T-44). */
export function taskNotFound(): ProtocolError {
  return new ProtocolError(ErrorCode.InvalidParams, 'Failed to retrieve task: Task not found or expired');
}

/** `-32021` naming the capability the request lacks (T-04, T-05, B-07). */
export function missingCapability(
  requiredCapabilities: Record<string, unknown>,
  message = 'Missing required client capability',
): ProtocolError {
  return new ProtocolError(ErrorCode.MissingRequiredClientCapability, message, { requiredCapabilities });
}

/** `-32021` for the Tasks extension. */
export function tasksExtensionRequired(what: string): ProtocolError {
  return missingCapability(
    { extensions: { [TASKS_EXTENSION]: {} } },
    `Missing required client capability: ${what} needs the ${TASKS_EXTENSION} extension declared on the request`,
  );
}

export function invalidParams(message: string, data?: unknown): ProtocolError {
  return new ProtocolError(ErrorCode.InvalidParams, message, data);
}

/** The `-32603` "Task store unavailable" error: a transport that can, answers it with 503 + Retry-After. */
export class StoreUnavailableError extends ProtocolError {}

/**
 * `-32603` while Redis cannot be reached, or did not take a write (a failed creation, fewer
 * replicas than REDIS_WAIT_REPLICAS acknowledged): HTTP 503 with Retry-After on the hot path.
 */
export function storeUnavailable(): ProtocolError {
  return new StoreUnavailableError(ErrorCode.InternalError, STORE_UNAVAILABLE_MESSAGE);
}

/**
 * `-32603` ending a synchronous call whose gateway is shutting down while Redis is unreachable:
 * the call could not be handed off to the background (that needs Redis to take the detach), so
 * no task id can be named. Its task stays a synchronous call that nobody holds: once Redis is
 * back the reconciler cancels it after SYNC_HOLDER_TIMEOUT_MS, unless a retry carrying the same
 * `Idempotency-Key` holds it again first (docs/architecture.md, "Idempotent creation").
 */
export function handOffUnavailable(): ProtocolError {
  return new StoreUnavailableError(
    ErrorCode.InternalError,
    'The server holding this call is shutting down and its task store is unreachable, so the call could not continue in the background. Call the tool again.',
  );
}

/**
 * A JSON-RPC error body for replies the gateway writes itself, with the SDK's key order
 * (`jsonrpc`, `error`, `id`) so every path answers alike.
 */
export function jsonRpcErrorBody(id: unknown, code: number, message: string, data?: unknown) {
  return {
    jsonrpc: '2.0' as const,
    error: data === undefined ? { code, message } : { code, message, data },
    id: id ?? null,
  };
}

/** The id an error may echo (as the SDK does): a string or number id of a message with a method, else null. */
export function echoableId(body: unknown): string | number | null {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return null;
  const { method, id } = body as { method?: unknown; id?: unknown };
  if (typeof method !== 'string') return null;
  return typeof id === 'string' || typeof id === 'number' ? id : null;
}

/**
 * `-32603` for an unexpected failure of a prompt or resource handler (`what`: e.g.
 * "Prompt summarize"): the client gets an error id to quote, the details stay in the log.
 */
export function unexpectedFailure(what: string, errorId: string): ProtocolError {
  return new ProtocolError(ErrorCode.InternalError, `${what} failed unexpectedly (error id ${errorId})`, { errorId });
}

/** Names ioredis gives its own errors (redis-errors' ReplyError and friends, ioredis' MaxRetriesPerRequestError). */
const STORE_ERROR_NAMES = new Set([
  'ReplyError',
  'RedisError',
  'ParserError',
  'AbortError',
  'InterruptError',
  'MaxRetriesPerRequestError',
  'ClusterAllFailedError',
]);
/** Messages ioredis and Node's socket layer use when Redis is away, slow or refusing. */
const STORE_ERROR_TEXT =
  /Connection is closed|Stream isn't writeable|enableOfflineQueue|Command timed out|Reached the max retries|ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|EHOSTUNREACH|^(OOM|LOADING|READONLY|MASTERDOWN|CLUSTERDOWN|TRYAGAIN|BUSY|NOSCRIPT|MOVED|ASK|CROSSSLOT|MISCONF|NOAUTH|WRONGPASS)\b/;

/** Whether `e` is a failure of Redis (unreachable, timed out, or a command Redis refused), not of this service's logic. */
export function isStoreError(e: unknown): boolean {
  // Ours: a handler already turned a failed write into "Task store unavailable" (task-create.ts).
  if (e instanceof StoreUnavailableError) return true;
  if (!(e instanceof Error)) return false;
  return STORE_ERROR_NAMES.has(e.name) || STORE_ERROR_TEXT.test(e.message);
}

/**
 * What a client may see of an error a handler threw (D10): a ProtocolError as it
 * is (its message is ours); a Redis failure as `-32603` "Task store unavailable; retry later";
 * anything else as `-32603` "Internal error (error id …)". Redis' own text ("OOM command not
 * allowed", "Connection is closed.", key names) and stacks never reach a response: the log
 * gets them, under `errorId` for the unexpected ones.
 * @param what the method, for the log line
 */
export function clientErrorOf(
  e: unknown,
  log: { warn(o: object, m: string): void; error(o: object, m: string): void },
  what: string,
  newId: () => string,
): ProtocolError {
  if (e instanceof ProtocolError) return e;
  const coded = e as { code?: unknown; message?: unknown; data?: unknown };
  // An error of this service's own with a JSON-RPC code (its message is ours too).
  if (Number.isSafeInteger(coded?.code) && typeof coded.message === 'string' && !isStoreError(e))
    return new ProtocolError(coded.code as number, coded.message, coded.data);
  if (isStoreError(e)) {
    log.warn({ err: (e as Error).message, method: what }, 'store.unavailable');
    return storeUnavailable();
  }
  const errorId = newId();
  log.error({ err: e, method: what, errorId }, 'request.failed');
  return new ProtocolError(ErrorCode.InternalError, `Internal error (error id ${errorId})`, { errorId });
}
