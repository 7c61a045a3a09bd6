/**
 * A streaming 2026-07-28 request for tests that look at an SSE response as it arrives: every
 * frame (comment or message) with its arrival time, the headers, how the stream ended, and a
 * way to close it mid-way (C-01). Uses node:http directly so "closed by us", "ended by the
 * server" and "reset" are told apart.
 */
import { request, type IncomingHttpHeaders } from 'node:http';
import { PROTOCOL_VERSION, requestBody, type CallOptions } from './mcp.js';

export interface SseFrame {
  /** ms since the epoch when the frame's last line arrived. */
  at: number;
  kind: 'comment' | 'message';
  /** Comment text (without ':'), or the raw data line(s). */
  text: string;
  /** Parsed JSON-RPC message for `kind: 'message'`. */
  message?: Record<string, any>;
}

export interface SseCall {
  /** Resolves with status and headers once they arrive. */
  response: Promise<{ status: number; headers: IncomingHttpHeaders; at: number }>;
  /** Frames so far (grows while the stream is open). */
  frames: SseFrame[];
  /** Raw body text so far (for JSON answers). */
  raw(): string;
  /** Resolves when the stream ended: `end` (server finished), `closed` (we closed), `error` (reset / aborted by peer). */
  done: Promise<{ how: 'end' | 'closed' | 'error'; at: number; error?: Error }>;
  /** Closes the connection now (the client gives up: C-01). */
  close(): void;
  /** Waits until `pred` holds for some frame; returns it. */
  waitFrame(pred: (f: SseFrame) => boolean, timeoutMs?: number): Promise<SseFrame>;
  /** The final JSON-RPC response (a message frame with an id), if any. */
  final(): Record<string, any> | undefined;
  /** `notifications/progress` params, in arrival order. */
  progress(): (Record<string, any> & { at: number })[];
  /** When the request was sent (ms since the epoch). */
  sentAt: number;
}

/**
 * Starts `method` on `url` (MCP endpoint) with the standard headers and `_meta` envelope.
 * `o.meta` adds `_meta` keys (e.g. `progressToken`); `o.tasks`/`o.elicitation` as in mcp.ts.
 */
export function sseCall(
  url: string,
  method: string,
  params: Record<string, any>,
  o: CallOptions & { id?: string | number } = {},
): SseCall {
  const id = o.id ?? `s-${Math.random().toString(36).slice(2)}`;
  const body = requestBody(method, params, o, id);
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': PROTOCOL_VERSION,
    'mcp-method': method,
  };
  const name = method === 'tools/call' ? params.name : method.startsWith('tasks/') ? params.taskId : undefined;
  if (name !== undefined) headers['mcp-name'] = String(name);
  if (o.token !== undefined) headers.authorization = `Bearer ${o.token}`;
  for (const [k, v] of Object.entries(o.headers ?? {})) {
    if (v === null) delete headers[k.toLowerCase()];
    else headers[k.toLowerCase()] = v;
  }
  const frames: SseFrame[] = [];
  let raw = '';
  let buf = '';
  let closedByUs = false;
  const waiters = new Set<() => void>();
  const poke = () => {
    for (const w of [...waiters]) w();
  };
  let resolveResponse!: SseCall['response'] extends Promise<infer T> ? (v: T) => void : never;
  let rejectResponse!: (e: Error) => void;
  const response = new Promise<{ status: number; headers: IncomingHttpHeaders; at: number }>((res, rej) => {
    resolveResponse = res;
    rejectResponse = rej;
  });
  response.catch(() => undefined);
  let resolveDone!: (v: { how: 'end' | 'closed' | 'error'; at: number; error?: Error }) => void;
  const done = new Promise<{ how: 'end' | 'closed' | 'error'; at: number; error?: Error }>((r) => (resolveDone = r));

  const u = new URL(url);
  const sentAt = Date.now();
  const req = request({ host: u.hostname, port: u.port, path: u.pathname, method: 'POST', headers, agent: false });
  req.on('response', (res) => {
    resolveResponse({ status: res.statusCode ?? 0, headers: res.headers, at: Date.now() });
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => {
      raw += chunk;
      buf += chunk;
      let i: number;
      while ((i = buf.search(/\r?\n\r?\n/)) >= 0) {
        const block = buf.slice(0, i);
        buf = buf.slice(i + (buf[i] === '\r' ? 4 : 2));
        const at = Date.now();
        const data: string[] = [];
        for (const line of block.split(/\r?\n/)) {
          if (line.startsWith(':')) frames.push({ at, kind: 'comment', text: line.slice(1).trim() });
          else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
        }
        if (data.length) {
          const text = data.join('\n');
          let message: Record<string, any> | undefined;
          try {
            message = JSON.parse(text);
          } catch {
            message = undefined;
          }
          frames.push({ at, kind: 'message', text, ...(message ? { message } : {}) });
        }
      }
      poke();
    });
    res.on('end', () => {
      resolveDone({ how: closedByUs ? 'closed' : 'end', at: Date.now() });
      poke();
    });
    res.on('error', (error) => {
      resolveDone({ how: closedByUs ? 'closed' : 'error', at: Date.now(), error });
      poke();
    });
    res.on('aborted', () => {
      resolveDone({ how: closedByUs ? 'closed' : 'error', at: Date.now(), error: new Error('aborted') });
      poke();
    });
  });
  req.on('error', (error) => {
    rejectResponse(error);
    resolveDone({ how: closedByUs ? 'closed' : 'error', at: Date.now(), error });
    poke();
  });
  req.end(body);

  const call: SseCall = {
    response,
    frames,
    raw: () => raw,
    done,
    sentAt,
    close() {
      closedByUs = true;
      req.destroy();
    },
    waitFrame(pred, timeoutMs = 30_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const f = frames.find(pred);
          if (f) {
            cleanup();
            resolve(f);
          }
        };
        const timer = setTimeout(() => {
          cleanup();
          reject(new Error(`no matching SSE frame within ${timeoutMs} ms (${frames.length} frames so far)`));
        }, timeoutMs);
        const cleanup = () => {
          clearTimeout(timer);
          waiters.delete(check);
        };
        waiters.add(check);
        check();
        void done.then(() => setTimeout(check, 0));
      });
    },
    final() {
      return frames.find((f) => f.message && 'id' in f.message && ('result' in f.message || 'error' in f.message))
        ?.message;
    },
    progress() {
      return frames
        .filter((f) => f.message?.method === 'notifications/progress')
        .map((f) => ({ ...(f.message!.params as Record<string, any>), at: f.at }));
    },
  };
  return call;
}
