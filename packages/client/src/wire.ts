/**
 * How a 2026-07-28 request looks on the wire (spec transport §2.3; Tasks extension §2): the
 * `_meta` envelope in the body (protocol version, client info, client capabilities) and the
 * standard headers that mirror the body (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`, and
 * `Mcp-Param-*` for arguments a tool annotates with `x-mcp-header`). Pure functions, no I/O.
 * H-10, H-11, H-15, H-17, T-42.
 */

// The client's own copies of the protocol's names: the terminal client ships apart from the
// service (not in its image) and depends on no service package. test/unit/wire-constants.test.ts
// holds them equal to the gateway's and to the MCP SDK's.
/** The protocol revision this client speaks. */
export const PROTOCOL_VERSION = '2026-07-28';
/** The Tasks extension id, declared under `clientCapabilities.extensions`. */
export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';

/** `_meta` keys of the per-request envelope. */
export const META = {
  protocolVersion: 'io.modelcontextprotocol/protocolVersion',
  clientInfo: 'io.modelcontextprotocol/clientInfo',
  clientCapabilities: 'io.modelcontextprotocol/clientCapabilities',
  subscriptionId: 'io.modelcontextprotocol/subscriptionId',
} as const;

export interface ClientInfo {
  name: string;
  version: string;
}

/** What a request declares about its client (one request at a time: nothing is negotiated). */
export interface EnvelopeOptions {
  /** Declare the Tasks extension on this request (default true). T-01. */
  tasks?: boolean;
  /** Declare form elicitation (default true). */
  elicitation?: boolean;
  /** Replace the whole clientCapabilities object. */
  capabilities?: Record<string, unknown>;
  /** Sent as `io.modelcontextprotocol/clientInfo` (default `mcp-tasks-client`). */
  clientInfo?: ClientInfo;
  /** Extra `_meta` keys (e.g. `progressToken`). */
  meta?: Record<string, unknown>;
}

export const DEFAULT_CLIENT_INFO: ClientInfo = { name: 'mcp-tasks-client', version: '0.1.0' };

/** The clientCapabilities a request declares: elicitation (form) and the Tasks extension unless turned off. */
export function capabilitiesFor(o: EnvelopeOptions): Record<string, unknown> {
  if (o.capabilities) return o.capabilities;
  const caps: Record<string, unknown> = {};
  if (o.elicitation !== false) caps.elicitation = { form: {} };
  if (o.tasks !== false) caps.extensions = { [TASKS_EXTENSION]: {} };
  return caps;
}

/** The JSON body of a 2026-07-28 request: `params` plus the `_meta` envelope. */
export function requestBody(
  method: string,
  params: Record<string, unknown>,
  o: EnvelopeOptions,
  id: string | number,
): string {
  return JSON.stringify({
    jsonrpc: '2.0',
    id,
    method,
    params: {
      ...params,
      _meta: {
        [META.protocolVersion]: PROTOCOL_VERSION,
        [META.clientInfo]: o.clientInfo ?? DEFAULT_CLIENT_INFO,
        [META.clientCapabilities]: capabilitiesFor(o),
        ...(o.meta ?? {}),
      },
    },
  });
}

/** The body field `Mcp-Name` mirrors, per method (SEP-2243 table, spec transport §2.3; T-42); undefined when none. */
export function mcpNameFor(method: string, params: Record<string, unknown>): string | undefined {
  const field =
    method === 'tools/call' || method === 'prompts/get'
      ? 'name'
      : method === 'resources/read'
        ? 'uri'
        : method.startsWith('tasks/')
          ? 'taskId'
          : undefined;
  const v = field === undefined ? undefined : params[field];
  // String() as the gateway reads the same field: an object there is refused as invalid params anyway.
  // eslint-disable-next-line @typescript-eslint/no-base-to-string -- mirrors the server's String() of the field
  return v === undefined ? undefined : String(v);
}

const SAFE_PLAIN = /^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/;

/**
 * A header value as H-17 wants it: plain when it is empty or printable ASCII without leading or
 * trailing whitespace that does not itself look like a sentinel, else `=?base64?<Base64 of UTF-8>?=`.
 */
export function encodeHeaderValue(value: string): string {
  if (value === '' || (SAFE_PLAIN.test(value) && !(value.startsWith('=?base64?') && value.endsWith('?='))))
    return value;
  return `=?base64?${Buffer.from(value, 'utf8').toString('base64')}?=`;
}

/** The standard headers of a request (H-11, H-15): content negotiation, version, method, name. */
export function standardHeaders(method: string, params: Record<string, unknown>): Record<string, string> {
  const h: Record<string, string> = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': PROTOCOL_VERSION,
    'mcp-method': method,
  };
  const name = mcpNameFor(method, params);
  if (name !== undefined) h['mcp-name'] = encodeHeaderValue(name);
  return h;
}

/**
 * The `Mcp-Param-*` headers of a `tools/call` (SEP-2243, H-17): for each property of
 * `inputSchema` annotated `x-mcp-header` (reached through `properties` only, H-18) whose
 * argument is present and not null, the argument as a header (strings as is or Base64
 * sentinel, integers in decimal, booleans `true`/`false`).
 */
export function paramHeaders(inputSchema: unknown, args: Record<string, unknown>): Record<string, string> {
  const out: Record<string, string> = {};
  const visit = (schema: unknown, value: unknown): void => {
    if (!isRecord(schema) || !isRecord(schema.properties) || !isRecord(value)) return;
    for (const [key, sub] of Object.entries(schema.properties)) {
      if (!isRecord(sub)) continue;
      const v = value[key];
      if (v === undefined || v === null) continue;
      const header = sub['x-mcp-header'];
      if (typeof header === 'string' && header.length > 0) {
        if (typeof v === 'string') out[`mcp-param-${header.toLowerCase()}`] = encodeHeaderValue(v);
        else if (typeof v === 'boolean' || (typeof v === 'number' && Number.isFinite(v)))
          out[`mcp-param-${header.toLowerCase()}`] = String(v);
      }
      visit(sub, v);
    }
  };
  visit(inputSchema, args);
  return out;
}

export function isRecord(value: unknown): value is Record<string, any> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}
