/**
 * One JSON-RPC request over Streamable HTTP, 2026-07-28 (spec transport §2.3, §2.4): the body
 * with its `_meta` envelope, the standard headers, and the answer read as JSON or as an SSE
 * stream (each message handed to `onMessage` as it arrives, so progress and listen
 * notifications are seen live). Raw on purpose: it never throws on an HTTP or JSON-RPC error,
 * and it can send what a real client never would (the tests' negative cases use that).
 */
import { SseParser } from './sse.js';
import { requestBody, standardHeaders, type EnvelopeOptions } from './wire.js';

export interface RpcOptions extends EnvelopeOptions {
  /** Extra / overriding headers (a header set to `null` is dropped). Names are case-insensitive. */
  headers?: Record<string, string | null>;
  /** Bearer credential (API key or JWT) sent as `Authorization: Bearer <token>`. */
  token?: string;
  /** JSON-RPC id (default: `c-<n>`). */
  id?: string | number;
  signal?: AbortSignal;
  /** Send this body verbatim instead of building one. */
  rawBody?: string;
  /** Called with every SSE message (notifications and the response) as it arrives. */
  onMessage?: (message: Record<string, any>) => void;
}

export interface RpcResponse {
  status: number;
  headers: Headers;
  /** The JSON-RPC response message (for SSE: the last message with an id and a result or error). */
  body: {
    jsonrpc?: string;
    id?: unknown;
    result?: Record<string, any>;
    error?: { code: number; message: string; data?: any };
  } & Record<string, any>;
  /** Every SSE message (notifications included), in order. */
  messages: Record<string, any>[];
  contentType: string;
}

let nextId = 1;

/**
 * Sends `method` with `params` to the MCP endpoint `url`.
 * @returns HTTP status, headers and the JSON-RPC response; rejects only when the request cannot
 * be sent or read (network error, abort) or an SSE message is not JSON.
 */
export async function rpc(
  url: string,
  method: string,
  params: Record<string, any> = {},
  o: RpcOptions = {},
): Promise<RpcResponse> {
  const id = o.id ?? `c-${nextId++}`;
  const body = o.rawBody ?? requestBody(method, params, o, id);
  const headers = new Headers(standardHeaders(method, params));
  if (o.token !== undefined) headers.set('authorization', `Bearer ${o.token}`);
  for (const [k, v] of Object.entries(o.headers ?? {})) {
    if (v === null) headers.delete(k);
    else headers.set(k, v);
  }
  const res = await fetch(url, { method: 'POST', headers, body, ...(o.signal ? { signal: o.signal } : {}) });
  const contentType = res.headers.get('content-type') ?? '';
  const messages: Record<string, any>[] = [];
  let parsed: RpcResponse['body'] = {};
  if (contentType.includes('text/event-stream') && res.body) {
    const parser = new SseParser();
    const take = (events: ReturnType<SseParser['push']>) => {
      for (const e of events) {
        if (e.kind !== 'message') continue;
        const msg = JSON.parse(e.data) as Record<string, any>;
        messages.push(msg);
        if ('id' in msg && ('result' in msg || 'error' in msg)) parsed = msg;
        o.onMessage?.(msg);
      }
    };
    const decoder = new TextDecoder();
    for await (const chunk of res.body as AsyncIterable<Uint8Array>)
      take(parser.push(decoder.decode(chunk, { stream: true })));
    take(parser.push(decoder.decode()));
    take(parser.end());
  } else {
    const text = await res.text();
    if (text) {
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = { raw: text };
      }
    }
  }
  return { status: res.status, headers: res.headers, body: parsed, messages, contentType };
}
