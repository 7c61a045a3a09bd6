/**
 * Every JSON-RPC error code this service sends (gateway, worker, task store) or reads (CLI),
 * in one place: no other module writes a `-32xxx` literal. When each is sent, with its HTTP
 * status, is the table in docs/errors.md (test/unit/errors-doc.test.ts keeps the two in step).
 */
export const ErrorCode = {
  /** The body is not JSON, or an HTTP request that cannot be parsed. */
  ParseError: -32700,
  /** Not a JSON-RPC request; refused at the HTTP layer (size, type, auth, origin, host). */
  InvalidRequest: -32600,
  /** Unknown or unsupported method. */
  MethodNotFound: -32601,
  /** Bad params: unknown tool or task, arguments too large, a reused idempotency key. */
  InvalidParams: -32602,
  /** The service's own failure: a tool's, the task store's, or a task ended by the worker. */
  InternalError: -32603,
  /** The SDK's code for a GET or a DELETE without session on the endpoint (HTTP 405). */
  ConnectionClosed: -32000,
  /** An unknown, expired, ended or foreign 2025-era session (the SDK's code and wording for it). */
  SessionNotFound: -32001,
  /** `MCP-Protocol-Version` / `Mcp-Method` / `Mcp-Name` / `Mcp-Param-*` header does not match the body. */
  HeaderMismatch: -32020,
  /** A client capability the request needs (the Tasks extension, elicitation) is not declared. */
  MissingRequiredClientCapability: -32021,
  /** The requested protocol version is not supported. */
  UnsupportedProtocolVersion: -32022,
  /** A per-principal limit (application code: outside the ranges JSON-RPC and MCP reserve). */
  LimitExceeded: -31429,
} as const;

/** One of the codes of `ErrorCode`. */
export type ErrorCodeValue = (typeof ErrorCode)[keyof typeof ErrorCode];

const KNOWN = new Set<number>(Object.values(ErrorCode));

/** Whether `code` is one of the codes this service sends (`ErrorCode`). */
export function isKnownErrorCode(code: unknown): code is ErrorCodeValue {
  return typeof code === 'number' && KNOWN.has(code);
}

/** The codes JSON-RPC 2.0 reserves for the protocol and its implementations: -32768 to -32000. */
export const RESERVED_CODE_MIN = -32768;
/** Upper end of the reserved range (`RESERVED_CODE_MIN`). */
export const RESERVED_CODE_MAX = -32000;

/** Whether `code` is an integer in the range JSON-RPC 2.0 reserves (-32768 to -32000). */
export function isReservedErrorCode(code: unknown): code is number {
  return typeof code === 'number' && Number.isInteger(code) && code >= RESERVED_CODE_MIN && code <= RESERVED_CODE_MAX;
}
