/**
 * A raw 2026-07-28 HTTP client for tests: adds the `_meta` envelope and the standard headers
 * (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`), parses a JSON or SSE answer.
 * Kept raw on purpose: negative tests need to send what a real client never would.
 */
export const PROTOCOL_VERSION = '2026-07-28';
export const TASKS = 'io.modelcontextprotocol/tasks';

export interface CallOptions {
  /** Declare the Tasks extension on this request (default true). */
  tasks?: boolean;
  /** Declare form elicitation (default true). */
  elicitation?: boolean;
  /** Replace the whole clientCapabilities object. */
  capabilities?: Record<string, unknown>;
  /** Extra / overriding headers (set a header to `null` to drop it). */
  headers?: Record<string, string | null>;
  /** Bearer credential (API key or JWT) sent as `Authorization: Bearer <token>`. */
  token?: string;
  id?: string | number;
  signal?: AbortSignal;
  /** Extra `_meta` keys (e.g. progressToken). */
  meta?: Record<string, unknown>;
  /** Send this body verbatim instead of building one. */
  rawBody?: string;
}

export interface RpcResponse {
  status: number;
  headers: Headers;
  /** The JSON-RPC response message (the last `data:` frame with an id, for SSE). */
  body: { jsonrpc?: string; id?: unknown; result?: Record<string, any>; error?: { code: number; message: string; data?: any } } & Record<string, any>;
  /** Every SSE message (notifications included), in order. */
  messages: Record<string, any>[];
  contentType: string;
}

let nextId = 1;

/** The Mcp-Name source for a method (SEP-2243 table, spec transport §2.3; T-42). */
function nameFor(method: string, params: Record<string, any>): string | undefined {
  if (method === 'tools/call' || method === 'prompts/get') return params.name;
  if (method === 'resources/read') return params.uri;
  if (method.startsWith('tasks/')) return params.taskId === undefined ? undefined : String(params.taskId);
  return undefined;
}

export function capabilitiesFor(o: CallOptions): Record<string, unknown> {
  if (o.capabilities) return o.capabilities;
  const caps: Record<string, unknown> = {};
  if (o.elicitation !== false) caps.elicitation = { form: {} };
  if (o.tasks !== false) caps.extensions = { [TASKS]: {} };
  return caps;
}

/** Sends one JSON-RPC request to `url`. Never throws on HTTP errors; returns status and body. */
/** The JSON body of a 2026-07-28 request with the `_meta` envelope (or `o.rawBody` verbatim). */
export function requestBody(method: string, params: Record<string, any>, o: CallOptions, id: string | number): string {
  return o.rawBody ?? JSON.stringify({
    jsonrpc: '2.0',
    id,
    method,
    params: {
      ...params,
      _meta: {
        'io.modelcontextprotocol/protocolVersion': PROTOCOL_VERSION,
        'io.modelcontextprotocol/clientInfo': { name: 'test-client', version: '0.0.1' },
        'io.modelcontextprotocol/clientCapabilities': capabilitiesFor(o),
        ...(o.meta ?? {}),
      },
    },
  });
}

export async function rpc(url: string, method: string, params: Record<string, any> = {}, o: CallOptions = {}): Promise<RpcResponse> {
  const id = o.id ?? `t-${nextId++}`;
  const body = requestBody(method, params, o, id);
  const headers = new Headers({
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': PROTOCOL_VERSION,
    'mcp-method': method,
  });
  const name = nameFor(method, params);
  if (name !== undefined) headers.set('mcp-name', name);
  if (o.token !== undefined) headers.set('authorization', `Bearer ${o.token}`);
  for (const [k, v] of Object.entries(o.headers ?? {})) {
    if (v === null) headers.delete(k);
    else headers.set(k, v);
  }
  const res = await fetch(url, { method: 'POST', headers, body, ...(o.signal ? { signal: o.signal } : {}) });
  const text = await res.text();
  const contentType = res.headers.get('content-type') ?? '';
  const messages: Record<string, any>[] = [];
  let parsed: any = {};
  if (contentType.includes('text/event-stream')) {
    for (const block of text.split(/\r?\n\r?\n/)) {
      const data = block
        .split(/\r?\n/)
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).trimStart())
        .join('\n');
      if (!data) continue;
      const msg = JSON.parse(data);
      messages.push(msg);
      if ('id' in msg && ('result' in msg || 'error' in msg)) parsed = msg;
    }
  } else if (text) {
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = { raw: text };
    }
  }
  return { status: res.status, headers: res.headers, body: parsed, messages, contentType };
}

/** tools/call; returns the response. */
export const callTool = (url: string, name: string, args: Record<string, unknown> = {}, o: CallOptions = {}, extraParams: Record<string, unknown> = {}) =>
  rpc(url, 'tools/call', { name, arguments: args, ...extraParams }, o);

export const getTask = (url: string, taskId: string, o: CallOptions = {}) => rpc(url, 'tasks/get', { taskId }, o);
export const updateTask = (url: string, taskId: string, inputResponses: Record<string, unknown>, o: CallOptions = {}) =>
  rpc(url, 'tasks/update', { taskId, inputResponses }, o);
export const cancelTask = (url: string, taskId: string, o: CallOptions = {}) => rpc(url, 'tasks/cancel', { taskId }, o);

/** Round-robin over `urls`: each call goes to the next gateway. */
export function roundRobin(urls: string[]): () => string {
  let i = 0;
  return () => urls[i++ % urls.length]!;
}

/**
 * Polls `tasks/get` (each poll on the next URL) until `until(result)` holds.
 * @returns the last `tasks/get` result.
 */
export async function pollTask(
  next: () => string,
  taskId: string,
  until: (r: Record<string, any>) => boolean,
  timeoutMs = 20_000,
  everyMs = 100,
  o: CallOptions = {},
): Promise<Record<string, any>> {
  const end = Date.now() + timeoutMs;
  let last: Record<string, any> | undefined;
  for (;;) {
    const r = await getTask(next(), taskId, o);
    if (r.body.error) throw new Error(`tasks/get failed: ${JSON.stringify(r.body.error)}`);
    last = r.body.result!;
    if (until(last)) return last;
    if (Date.now() > end) throw new Error(`task ${taskId} did not reach the expected state in ${timeoutMs} ms; last: ${JSON.stringify(last)}`);
    await new Promise((res) => setTimeout(res, everyMs));
  }
}

export const isTerminal = (s: string) => s === 'completed' || s === 'failed' || s === 'cancelled';
