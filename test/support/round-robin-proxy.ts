/**
 * A tiny round-robin HTTP reverse proxy for tests: every incoming *request* (not connection)
 * goes to the next upstream, over a fresh upstream connection (`agent: false`, so
 * `Connection: close`), so a client that keeps its connection to the proxy alive still has
 * consecutive requests served by different gateways. Responses are streamed through as they
 * arrive (headers flushed at once, chunks piped unbuffered), so SSE works. The client's `Host`
 * header is passed on unchanged (`rotateBy: 'httpMethod'` keeps one rotation per HTTP method).
 *
 * With `capture: true` each log entry also keeps the request's headers and body and the response
 * body as it streamed through (SSE frames included), so a test can show what a real client sent.
 */
import { createServer, request as httpRequest, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface RoundRobinProxy {
  /** Base URL of the proxy, e.g. `http://127.0.0.1:41234`. */
  origin: string;
  /** `origin` + the path of the first upstream (e.g. `/mcp`). */
  url: string;
  /** Requests sent to each upstream, in `upstreams` order. */
  counts: number[];
  /** Every proxied request: which upstream served it and how it ended. */
  log: ProxyLogEntry[];
  close(): Promise<void>;
}

export interface ProxyLogEntry {
  method: string;
  path: string;
  mcpMethod?: string;
  mcpName?: string;
  upstream: number;
  status: number;
  /** Arrival time (ms since epoch). */
  at: number;
  /** With `capture`: the request headers as received (before hop-by-hop removal). */
  headers?: IncomingHttpHeaders;
  /** With `capture`: the request body (UTF-8). */
  body?: string;
  /** With `capture`: the response body as streamed to the client so far (UTF-8). */
  response?: string;
  /** With `capture`: when the upstream response ended (ms since epoch). */
  endedAt?: number;
}

export interface RoundRobinProxyOptions {
  /** Keep headers, request and response bodies in `log` (default false). */
  capture?: boolean;
  /**
   * `'request'` (default): one rotation over every request. `'httpMethod'`: one rotation per
   * HTTP method, so consecutive POSTs alternate even when a GET the client sends on its own
   * schedule (the 2025 SDK's standalone stream, opened after `initialize` without being
   * awaited) arrives between them.
   */
  rotateBy?: 'request' | 'httpMethod';
}

// Hop-by-hop headers (RFC 9110 §7.6.1) are not forwarded.
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
  'proxy-authorization',
  'proxy-authenticate',
]);

function forwardable(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  const out: IncomingHttpHeaders = {};
  for (const [k, v] of Object.entries(headers)) if (!HOP_BY_HOP.has(k) && v !== undefined) out[k] = v;
  return out;
}

/** Starts a proxy on 127.0.0.1 (random port) in front of `upstreams` (full URLs; only origin and path are used). */
export async function startRoundRobinProxy(
  upstreams: string[],
  opts: RoundRobinProxyOptions = {},
): Promise<RoundRobinProxy> {
  if (upstreams.length === 0) throw new Error('startRoundRobinProxy: no upstreams');
  const targets = upstreams.map((u) => new URL(u));
  const counts = targets.map(() => 0);
  const log: RoundRobinProxy['log'] = [];
  const rotations = new Map<string, number>();
  const nextUpstream = (httpMethod: string): number => {
    const key = opts.rotateBy === 'httpMethod' ? httpMethod : '';
    const n = rotations.get(key) ?? 0;
    rotations.set(key, n + 1);
    return n % targets.length;
  };

  const server: Server = createServer((req, res) => {
    const i = nextUpstream(req.method ?? 'GET');
    const target = targets[i]!;
    counts[i]!++;
    const entry: ProxyLogEntry = {
      method: req.method ?? 'GET',
      path: req.url ?? '/',
      ...(typeof req.headers['mcp-method'] === 'string' ? { mcpMethod: req.headers['mcp-method'] } : {}),
      ...(typeof req.headers['mcp-name'] === 'string' ? { mcpName: req.headers['mcp-name'] } : {}),
      upstream: i,
      status: 0,
      at: Date.now(),
    };
    log.push(entry);
    // The client's Host goes through unchanged, as from a reverse proxy that passes it on
    // (nginx `proxy_set_header Host $host`): the gateways' Host check (ALLOWED_HOSTS) sees what
    // the client sent.
    if (opts.capture) {
      entry.headers = { ...req.headers };
      entry.body = '';
      req.on('data', (chunk: Buffer) => (entry.body += chunk.toString('utf8')));
    }
    const headers = forwardable(req.headers);
    const up = httpRequest(
      {
        protocol: target.protocol,
        hostname: target.hostname,
        port: target.port,
        method: req.method,
        path: req.url,
        headers,
        agent: false, // one upstream connection per request, closed afterwards
      },
      (upRes) => {
        entry.status = upRes.statusCode ?? 0;
        res.writeHead(upRes.statusCode ?? 502, upRes.statusMessage, forwardable(upRes.headers));
        res.flushHeaders(); // SSE: the client sees the stream open before the first event
        if (opts.capture) {
          entry.response = '';
          upRes.on('data', (chunk: Buffer) => (entry.response += chunk.toString('utf8')));
          upRes.on('end', () => (entry.endedAt = Date.now()));
        }
        upRes.pipe(res); // each chunk is written as it arrives (no buffering), with backpressure
        upRes.on('error', () => res.destroy());
      },
    );
    up.setNoDelay(true);
    up.on('error', (err) => {
      if (!res.headersSent) {
        entry.status = 502;
        res.writeHead(502, { 'content-type': 'text/plain' });
        res.end(`proxy: upstream ${target.host} failed: ${err.message}`);
      } else {
        res.destroy(err);
      }
    });
    // The client went away before the response finished: drop the upstream request too, so the
    // gateway sees the disconnect exactly as it would without the proxy.
    res.on('close', () => {
      if (!res.writableFinished) up.destroy();
    });
    req.pipe(up);
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const origin = `http://127.0.0.1:${port}`;
  return {
    origin,
    url: `${origin}${targets[0]!.pathname}`,
    counts,
    log,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** The JSON-RPC messages of a captured response, whether a JSON body or an SSE stream (`data:` lines). */
export function capturedMessages(e: ProxyLogEntry): Record<string, any>[] {
  const text = e.response ?? '';
  if (text.trimStart().startsWith('{')) return [JSON.parse(text) as Record<string, any>];
  return text
    .split('\n')
    .filter((l) => l.startsWith('data:'))
    .map((l) => JSON.parse(l.slice(5)) as Record<string, any>);
}
