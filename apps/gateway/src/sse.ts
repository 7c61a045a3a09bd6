/**
 * Serving a request through one of the SDK's web-standard handlers (`createMcpHandler(...).fetch`)
 * onto Node's response, the way `toNodeHandler` (@modelcontextprotocol/node) does, with one
 * addition the SDK offers no hook for: every `text/event-stream` response sends its headers and a
 * first comment line (`: stream open`) the moment the SDK has the response, so a client sees its
 * first byte at once (Claude Code aborts a request with no byte in 60 s; Node would otherwise
 * hold the headers until the first body chunk, for a quiet tool the keep-alive 15 s later).
 * H-22, case B-10.
 *
 * The request's AbortSignal fires when the client goes before the response ends (C-01: closing
 * the stream cancels a synchronous call); the body is written with backpressure.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { toWebRequest } from '@modelcontextprotocol/node';
import type { AuthInfo } from '@modelcontextprotocol/server';
import { echoableId, ErrorCode, jsonRpcErrorBody } from './errors.js';

/** Headers of every SSE response this gateway writes itself (listen streams). */
export const SSE_HEADERS = {
  'content-type': 'text/event-stream',
  'cache-control': 'no-cache, no-transform',
  connection: 'keep-alive',
  'x-accel-buffering': 'no',
};

/** The first bytes of every SSE response: a comment, ignored by clients. */
export const SSE_OPEN_COMMENT = ': stream open\n\n';

/** The part of `createMcpHandler(...)` this module drives. */
export interface FetchHandler {
  fetch(request: Request, options?: { authInfo?: AuthInfo; parsedBody?: unknown }): Promise<Response>;
}

/**
 * Serves `req` (already parsed into `parsedBody`) through `handler`, writing its response to `res`.
 * @param o.onerror receives a failure to convert or hand over the request (answered 500 `-32603`).
 * @param o.headers headers the route already set on the reply (hooks), added where the SDK's
 *        response has none of that name.
 * @param o.end when aborted, the response ends at once, with nothing more written (a held 2025
 *        call its client cancelled: no response to a cancelled request).
 * @param o.rewriteJson asked once the handler answered: a function that rewrites a JSON answer
 *        (parsed, then serialized again; task-handle.ts), or undefined to pass it through.
 */
export async function serveThrough(
  handler: FetchHandler,
  req: IncomingMessage,
  res: ServerResponse,
  parsedBody: unknown,
  authInfo: AuthInfo,
  o: {
    maxRequestBodySize: number;
    onerror: (e: Error) => void;
    headers?: Record<string, unknown>;
    end?: AbortSignal;
    rewriteJson?: () => ((message: unknown) => unknown) | undefined;
  },
): Promise<void> {
  let finished = false;
  const abort = new AbortController();
  res.on('close', () => {
    if (!finished) abort.abort();
  });
  if (res.destroyed) abort.abort();
  let response: Response;
  try {
    const request = await toWebRequest(req, parsedBody, {
      signal: abort.signal,
      maxRequestBodySize: o.maxRequestBodySize,
    });
    response = await handler.fetch(request, { authInfo, parsedBody });
  } catch (e) {
    o.onerror(e instanceof Error ? e : new Error(String(e)));
    response = Response.json(
      jsonRpcErrorBody(echoableId(parsedBody), ErrorCode.InternalError, 'Internal server error'),
      { status: 500 },
    );
  }
  const rewrite = response.headers.get('content-type')?.startsWith('application/json') ? o.rewriteJson?.() : undefined;
  if (rewrite && response.body !== null) {
    const text = await response.text();
    let out = text;
    try {
      out = JSON.stringify(rewrite(JSON.parse(text)));
    } catch {
      // Not JSON after all: sent as the SDK wrote it.
    }
    const rewritten = new Headers(response.headers);
    rewritten.set('content-length', String(Buffer.byteLength(out)));
    response = new Response(out, { status: response.status, headers: rewritten });
  }
  const headers: Record<string, string> = {};
  for (const [name, value] of response.headers) headers[name] = value;
  // Headers the route's hooks set (e.g. `Connection: close` while draining), unless the SDK set them.
  for (const [name, value] of Object.entries(o.headers ?? {}))
    if (!(name in headers) && typeof value === 'string') headers[name] = value;
  res.writeHead(response.status, headers);
  if (response.headers.get('content-type')?.startsWith('text/event-stream')) res.write(SSE_OPEN_COMMENT);
  if (response.body === null) {
    finished = true;
    res.end();
    return;
  }
  const stop = o.end ? AbortSignal.any([abort.signal, o.end]) : abort.signal;
  let onStop = () => undefined as void;
  const stopped = new Promise<'stop'>((resolve) => {
    onStop = () => resolve('stop');
    if (stop.aborted) resolve('stop');
    else stop.addEventListener('abort', onStop, { once: true });
  });
  const reader = response.body.getReader();
  try {
    for (;;) {
      const next = await Promise.race([reader.read(), stopped]);
      if (next === 'stop' || next.done) break;
      if (!res.write(next.value)) await Promise.race([new Promise((resolve) => res.once('drain', resolve)), stopped]);
    }
  } catch {
    // The stream ended early (client gone, shutdown): nothing more to write.
  } finally {
    // Node keeps a composite signal (AbortSignal.any) that has an 'abort' listener alive until
    // it aborts, and with it everything the listener reaches: this exchange's request and
    // response. Left in place, every answer that did not abort stayed in memory (about 8 KB per
    // tools/list; case N-13).
    stop.removeEventListener('abort', onStop);
  }
  // Stopped before the SDK finished (client gone, or ended here): the SDK's exchange is torn down.
  reader.cancel().catch(() => undefined);
  finished = true;
  res.end();
}
