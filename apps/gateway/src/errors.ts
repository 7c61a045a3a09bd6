/**
 * The one error table (design D10): every JSON-RPC error this service sends, with its HTTP
 * status and the requirement it comes from. Errors raised inside the MCP SDK's dispatch get
 * their HTTP status from the SDK (which follows the same mapping); errors the gateway answers
 * before the SDK (body parse, size, Redis down) are written with `jsonRpcErrorBody`.
 *
 * | code    | HTTP | when                                                        | source      |
 * |---------|------|-------------------------------------------------------------|-------------|
 * | -32700  | 400  | body is not JSON; an HTTP request Node cannot parse (client-errors.ts) | JSON-RPC |
 * | -32600  | 400  | not a JSON-RPC request; a batch; an id not string/integer   | B-01, N-07  |
 * | -32600  | 400  | body nested deeper than 64 levels; malformed `Host`         |             |
 * | -32600  | 401  | no / bad credentials (+ `WWW-Authenticate`, auth/challenge) | H-04, D9    |
 * | -32600  | 403  | `Origin` / `Host` not allowed; JWT without a required scope | H-03, H-04  |
 * | -32600  | 413  | body larger than MAX_BODY_BYTES                             | D10         |
 * | -32600  | 415  | `Content-Type` not application/json                         | H-07        |
 * | -32600  | 408  | headers and body not received within BODY_READ_TIMEOUT_MS (client-errors.ts) | case B-10 |
 * | -32000  | 405  | GET or DELETE on the endpoint (the SDK's answer; no GET stream) | H-02     |
 * | -32601  | 404  | unknown method, `tasks/list`, `tasks/result`                | H-13, T-47  |
 * | -32602  | 400  | required `_meta` missing                                    | B-05, T-50  |
 * | -32602  | 200  | unknown tool, arguments > MAX_ARGUMENTS_BYTES, unknown/expired/foreign task | T-33, T-37 |
 * | -32602  | 200  | unknown prompt, missing prompt argument, unknown resource (`data.uri`) | SEP-2164 |
 * | (none)  | 200  | arguments the tool's schema refuses: an `isError` tool result | SEP-1303  |
 * | (none)  | 200  | a 2025 client calling a task-only tool or one that asks: an `isError` result saying what it needs (tools-call.ts) | T-07 |
 * | -32603  | 200  | internal error while handling; listen limit (1,024/process) | JSON-RPC    |
 * | -32602  | 200  | `subscriptions/listen` `taskIds` not an array of ≤100 strings | T-39      |
 * | -32603  | 503  | Redis unreachable or not answering; the issuer's JWKS unreachable (with `Retry-After`) | D10, D9 |
 * | -32603  | 200  | an unexpected exception in a tool: generic message + `data.errorId` | D9          |
 * | -32020  | 400  | `MCP-Protocol-Version` / `Mcp-Method` / `Mcp-Name` / `Mcp-Param-*` mismatch | H-11, H-15, H-17, T-42 |
 * | -32021  | 400  | client capability missing (tasks extension, elicitation) on the 2026 wire | T-04, T-05, T-49, B-07 |
 * | -32022  | 400  | unsupported protocol version                                | H-12        |
 * | -31429  | 429  | a per-principal limit (rate, outstanding tasks, listen streams), with `Retry-After` | D9, N-08 |
 * | -32600  | 431  | request headers too large (Node's limit; client-errors.ts)  | case B-03   |
 * | -32603  | 500  | an error no handler answered (app.ts error handler)         | D10         |
 *
 * A synchronous call's errors travel in its SSE stream (HTTP 200 already sent), except the
 * ones decided before the stream opens (`-32021`, bad arguments, unknown tool: the call has no
 * `sync` lane, classify.ts). `task_status` answers an unknown or foreign id with an `isError` result, not
 * an error (spec transport §11: an unknown handle is a tool execution error).
 */
import { ProtocolError } from '@modelcontextprotocol/server';

export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';

export const ErrorCode = {
  ParseError: -32700,
  InvalidRequest: -32600,
  MethodNotFound: -32601,
  InvalidParams: -32602,
  InternalError: -32603,
  HeaderMismatch: -32020,
  MissingRequiredClientCapability: -32021,
  UnsupportedProtocolVersion: -32022,
  /** A per-principal limit (application code: outside the ranges JSON-RPC and MCP reserve). */
  LimitExceeded: -31429,
} as const;

/** `-32602` for an id that is unknown, expired, malformed or someone else's (T-33, T-37, T-44). */
export function taskNotFound(): ProtocolError {
  return new ProtocolError(ErrorCode.InvalidParams, 'Failed to retrieve task: Task not found or expired');
}

/** `-32021` naming the capability the request lacks (T-04, T-05, B-07). */
export function missingCapability(requiredCapabilities: Record<string, unknown>, message = 'Missing required client capability'): ProtocolError {
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
  return new StoreUnavailableError(ErrorCode.InternalError, 'Task store unavailable; retry later');
}

/**
 * A JSON-RPC error body for replies the gateway writes itself, with the SDK's key order
 * (`jsonrpc`, `error`, `id`) so every path answers alike.
 */
export function jsonRpcErrorBody(id: unknown, code: number, message: string, data?: unknown) {
  return { jsonrpc: '2.0' as const, error: data === undefined ? { code, message } : { code, message, data }, id: id ?? null };
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
const STORE_ERROR_NAMES = new Set(['ReplyError', 'RedisError', 'ParserError', 'AbortError', 'InterruptError', 'MaxRetriesPerRequestError', 'ClusterAllFailedError']);
/** Messages ioredis and Node's socket layer use when Redis is away, slow or refusing. */
const STORE_ERROR_TEXT = /Connection is closed|Stream isn't writeable|enableOfflineQueue|Command timed out|Reached the max retries|ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|EHOSTUNREACH|^(OOM|LOADING|READONLY|MASTERDOWN|CLUSTERDOWN|TRYAGAIN|BUSY|NOSCRIPT|MOVED|ASK|CROSSSLOT|MISCONF|NOAUTH|WRONGPASS)\b/;

/** Whether `e` is a failure of Redis (unreachable, timed out, or a command Redis refused), not of this service's logic. */
export function isStoreError(e: unknown): boolean {
  // Ours: a handler already turned a failed write into "Task store unavailable" (task-create.ts).
  if (e instanceof StoreUnavailableError) return true;
  if (!(e instanceof Error)) return false;
  return STORE_ERROR_NAMES.has(e.name) || STORE_ERROR_TEXT.test(e.message);
}

/**
 * What a client may see of an error a handler threw (issue 9 §6, D10): a ProtocolError as it
 * is (its message is ours); a Redis failure as `-32603` "Task store unavailable; retry later";
 * anything else as `-32603` "Internal error (error id …)". Redis' own text ("OOM command not
 * allowed", "Connection is closed.", key names) and stacks never reach a response: the log
 * gets them, under `errorId` for the unexpected ones.
 * @param what the method, for the log line
 */
export function clientErrorOf(e: unknown, log: { warn(o: object, m: string): void; error(o: object, m: string): void }, what: string, newId: () => string): ProtocolError {
  if (e instanceof ProtocolError) return e;
  const coded = e as { code?: unknown; message?: unknown; data?: unknown };
  // An error of this service's own with a JSON-RPC code (its message is ours too).
  if (Number.isSafeInteger(coded?.code) && typeof coded.message === 'string' && !isStoreError(e)) return new ProtocolError(coded.code as number, coded.message, coded.data);
  if (isStoreError(e)) {
    log.warn({ err: (e as Error).message, method: what }, 'store.unavailable');
    return storeUnavailable();
  }
  const errorId = newId();
  log.error({ err: e, method: what, errorId }, 'request.failed');
  return new ProtocolError(ErrorCode.InternalError, `Internal error (error id ${errorId})`, { errorId });
}
