/**
 * The standard request headers of a 2026-07-28 request checked against its body (spec transport
 * §2.3: H-10, H-11, H-15, H-17; Tasks extension T-42): `MCP-Protocol-Version` and `Mcp-Method`
 * must be present on every request, `Mcp-Name` on the methods that name something
 * (`tools/call`, `prompts/get`, `resources/read`, `tasks/get|update|cancel`), and each must
 * equal the body after Base64-sentinel decoding; otherwise HTTP 400 with `-32020`
 * (`HeaderMismatch`) and `data.mismatch {header, body}`. Values the refusal echoes are cut at
 * 64 characters (`echoValue`), and a raw UTF-8 header is shown as the text it was.
 *
 * A `tools/call` is also checked for its `Mcp-Param-*` headers against the arguments the tool
 * annotates with `x-mcp-header` (`checkParamHeaders`; SEP-2243, H-15, H-17).
 *
 * The SDK applies the same checks inside `createMcpHandler` but does not export them (and runs
 * the `Mcp-Param-*` one only for `McpServer` tools; the gateway's per-request server is the
 * low-level `Server`). This module is the one validator: the classification (classify.ts) runs
 * it for every request, so every lane (listen streams, inline, synchronous, task) is checked
 * alike, and it mirrors the SDK's rules and messages word for word so a client cannot tell the
 * paths apart.
 */
import type { InboundLadderRejection } from '@modelcontextprotocol/server';
import { ErrorCode } from './errors.js';
import { MCP_PARAM_HEADER_PREFIX } from '@mcp-tasks/tools/internal';

/** Body field each method's `Mcp-Name` mirrors (SEP-2243 table, T-42). */
const MCP_NAME_SOURCE: Record<string, string> = {
  'tools/call': 'name',
  'prompts/get': 'name',
  'resources/read': 'uri',
  'tasks/get': 'taskId',
  'tasks/update': 'taskId',
  'tasks/cancel': 'taskId',
};

const SENTINEL_PREFIX = '=?base64?';
const SENTINEL_SUFFIX = '?=';
const BASE64_CANONICAL = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/**
 * Decodes a header value that may carry the Base64 sentinel `=?base64?…?=` (H-17).
 * @returns the value (decoded when it carried the sentinel), or undefined when the sentinel's
 * payload is not canonical Base64 of valid UTF-8 (a request the server must refuse).
 */
export function decodeHeaderValue(value: string): string | undefined {
  if (!(value.startsWith(SENTINEL_PREFIX) && value.endsWith(SENTINEL_SUFFIX))) return value;
  const b64 = value.slice(SENTINEL_PREFIX.length, value.length - SENTINEL_SUFFIX.length);
  if (!BASE64_CANONICAL.test(b64)) return undefined;
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(Buffer.from(b64, 'base64'));
  } catch {
    return undefined;
  }
}

/** RFC 9110 optional whitespace (SP / HTAB) stripped from both ends. */
const stripOws = (v: string) => v.replace(/^[ \t]+|[ \t]+$/g, '');

/** Longest value (characters) a `-32020` refusal echoes; longer ones end in `…`. */
export const ECHO_MAX_CHARS = 64;

/**
 * A header or body value as a refusal echoes it: a header that arrived as raw UTF-8 (Node reads
 * header bytes as Latin-1) shown as the text it was, and any value cut at ECHO_MAX_CHARS, so a
 * 100 KB name does not come back twice in a 200 KB answer.
 */
export function echoValue(value: string, fromHeader = false): string {
  let v = value;
  if (fromHeader && /[\x80-\xff]/.test(v) && !/[\u0100-\uffff]/.test(v)) {
    try {
      v = new TextDecoder('utf-8', { fatal: true }).decode(Buffer.from(v, 'latin1'));
    } catch {
      // not UTF-8: shown as Latin-1
    }
  }
  const chars = [...v];
  return chars.length > ECHO_MAX_CHARS ? `${chars.slice(0, ECHO_MAX_CHARS).join('')}…` : v;
}

/** The `-32020` rejection with the SDK's message and `data.mismatch` (H-15). */
export function headerMismatch(cell: string, header: string, body: string): InboundLadderRejection {
  return {
    kind: 'reject',
    rung: 'standard-header-validation',
    cell,
    httpStatus: 400,
    code: ErrorCode.HeaderMismatch,
    message: `Bad Request: the request headers and body disagree: ${body}`,
    data: { mismatch: { header, body } },
    settled: true,
  };
}

export interface StandardHeaders {
  protocolVersion?: string;
  method?: string;
  name?: string;
}

/**
 * Checks the standard headers of a modern request (not a notification) against its body.
 * @param claimedVersion the body's `_meta` protocol version.
 * @returns the rejection, or undefined when the headers agree with the body.
 */
export function checkStandardHeaders(
  h: StandardHeaders,
  method: string,
  params: unknown,
  claimedVersion: string | undefined,
): InboundLadderRejection | undefined {
  if (h.protocolVersion === undefined) {
    return headerMismatch(
      'version-header-missing',
      '(missing)',
      claimedVersion === undefined
        ? 'the body carries a modern per-request envelope but the required MCP-Protocol-Version header is absent'
        : `the body envelope names protocol version ${claimedVersion} but the required MCP-Protocol-Version header is absent`,
    );
  }
  if (h.method === undefined)
    return headerMismatch(
      'method-header-missing',
      '(missing)',
      `the body names method ${method} but the required Mcp-Method header is absent`,
    );
  const field = Object.hasOwn(MCP_NAME_SOURCE, method) ? MCP_NAME_SOURCE[method] : undefined;
  if (field === undefined) return undefined;
  const raw =
    params !== null && typeof params === 'object' && !Array.isArray(params)
      ? (params as Record<string, unknown>)[field]
      : undefined;
  const bodyValue = typeof raw === 'string' ? raw : undefined;
  if (h.name === undefined) {
    if (bodyValue === undefined) return undefined;
    return headerMismatch(
      'name-header-missing',
      '(missing)',
      `the body carries params.${field}="${echoValue(bodyValue)}" but the required Mcp-Name header is absent`,
    );
  }
  const header = stripOws(h.name);
  const decoded = decodeHeaderValue(header);
  if (decoded === undefined)
    return headerMismatch(
      'name-header-invalid-encoding',
      echoValue(header, true),
      'the Mcp-Name header carries an invalid Base64 sentinel value',
    );
  if (bodyValue !== undefined && decoded !== bodyValue) {
    return headerMismatch(
      'name-header-mismatch',
      echoValue(header, true),
      `the body carries params.${field}="${echoValue(bodyValue)}" but the Mcp-Name header names "${echoValue(decoded, decoded === header)}"`,
    );
  }
  return undefined;
}

/** One `x-mcp-header` declaration of a tool (packages/tools x-mcp-header.ts). */
export interface ParamHeaderDeclaration {
  path: readonly string[];
  headerName: string;
  type: string | undefined;
}

const CANONICAL_DECIMAL = /^-?\d+(\.\d+)?$/;

/** An argument as its header carries it (H-17): strings as is, numbers in decimal, booleans `true`/`false`. */
function paramToString(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) return undefined;
    if (Number.isInteger(value) && !Number.isSafeInteger(value)) return undefined;
    return String(value);
  }
  return undefined;
}

function valueAtPath(root: unknown, path: readonly string[]): unknown {
  let node = root;
  for (const key of path) {
    if (node === null || typeof node !== 'object') return undefined;
    node = (node as Record<string, unknown>)[key];
  }
  return node;
}

/** The header as the Fetch `Headers.get` the SDK reads would give it (repeated values joined). */
function headerValue(headers: Record<string, string | string[] | undefined>, name: string): string | undefined {
  const v = headers[name.toLowerCase()];
  if (v === undefined) return undefined;
  return stripOws(Array.isArray(v) ? v.join(', ') : v);
}

/**
 * The `Mcp-Param-*` headers of a 2026-07-28 `tools/call` checked against its `arguments`
 * (SEP-2243; H-15, H-17): for each `x-mcp-header` declaration of the tool whose argument is
 * present and not `null`, the `Mcp-Param-<Name>` header must be present and, after
 * Base64-sentinel decoding, equal the argument (integers and numbers compared numerically, so
 * `42.0` matches `42`); a sentinel whose payload is not canonical Base64 of UTF-8 is refused.
 * A header sent for an absent or `null` argument is ignored. Mirrors the SDK's
 * `validateMcpParamHeaders` (rules and messages), which the SDK applies to `McpServer` tools only.
 * @param args the request's raw `params.arguments`.
 * @returns HTTP 400 / `-32020` with `data.mismatch {header, body}`, or undefined when they agree.
 */
export function checkParamHeaders(
  declarations: readonly ParamHeaderDeclaration[],
  args: unknown,
  headers: Record<string, string | string[] | undefined>,
): InboundLadderRejection | undefined {
  for (const decl of declarations) {
    const headerKey = `${MCP_PARAM_HEADER_PREFIX}${decl.headerName}`;
    const header = headerValue(headers, headerKey);
    const bodyRaw = valueAtPath(args, decl.path);
    if (bodyRaw === undefined || bodyRaw === null) continue;
    const bodyString = paramToString(bodyRaw);
    if (bodyString === undefined) continue;
    const where = decl.path.join('.');
    if (header === undefined) {
      return paramMismatch(
        'param-header-missing',
        headerKey,
        `the body carries ${where}=${echoValue(JSON.stringify(bodyRaw))} but the ${headerKey} header is absent`,
      );
    }
    const decoded = decodeHeaderValue(header);
    if (decoded === undefined)
      return paramMismatch(
        'param-header-invalid-encoding',
        headerKey,
        `the ${headerKey} header carries an invalid Base64 sentinel value`,
      );
    const numeric =
      (decl.type === 'integer' || decl.type === 'number') &&
      CANONICAL_DECIMAL.test(decoded) &&
      typeof bodyRaw === 'number';
    if (!(numeric ? Number(decoded) === bodyRaw : decoded === bodyString)) {
      return paramMismatch(
        'param-header-mismatch',
        headerKey,
        `the ${headerKey} header decodes to ${JSON.stringify(echoValue(decoded, decoded === header))} but the body carries ${where}=${echoValue(JSON.stringify(bodyRaw))}`,
      );
    }
  }
  return undefined;
}

/** `-32020` for an `Mcp-Param-*` disagreement: the SDK's shape, with `data.mismatch` naming the header. */
function paramMismatch(cell: string, header: string, body: string): InboundLadderRejection {
  return { ...headerMismatch(cell, header, body), rung: 'param-header-validation' };
}
