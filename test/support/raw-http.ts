/**
 * One HTTP/1.1 request on a fresh connection from a chosen loopback source address (Linux
 * routes all of 127.0.0.0/8 to the loopback interface), so a test behind nginx can play several
 * clients: nginx sees each address as `$remote_addr`. Never throws: a socket error is `error`.
 * Also the body shapes the hardening tests send and the JSON-RPC headers of a 2026 request.
 */
import { request } from 'node:http';
import { connect } from 'node:net';

export interface RawResponse {
  /** 0 when no answer arrived. */
  status: number;
  type: string;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  /** Socket error code, when the exchange failed. */
  error?: string;
}

export interface RawRequest {
  port: number;
  path?: string;
  method?: string;
  headers?: Record<string, string>;
  /** Sent as is (a Buffer for bytes that are not UTF-8 text, e.g. a gzip body). */
  body?: string | Buffer;
  /** Source address, e.g. `127.0.0.2`. */
  from?: string;
  timeoutMs?: number;
}

export function send(o: RawRequest): Promise<RawResponse> {
  return new Promise((resolve) => {
    const req = request(
      {
        host: '127.0.0.1',
        port: o.port,
        path: o.path ?? '/mcp',
        method: o.method ?? 'POST',
        headers: o.headers ?? {},
        ...(o.from ? { localAddress: o.from } : {}),
        agent: false,
        timeout: o.timeoutMs ?? 30_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            type: String(res.headers['content-type'] ?? ''),
            headers: res.headers,
            text: Buffer.concat(chunks).toString('utf8'),
          }),
        );
        res.on('error', (e: NodeJS.ErrnoException) =>
          resolve({ status: res.statusCode ?? 0, type: '', headers: {}, text: '', error: e.code ?? e.message }),
        );
      },
    );
    req.on('timeout', () => req.destroy(new Error('client timeout')));
    req.on('error', (e: NodeJS.ErrnoException) =>
      resolve({ status: 0, type: '', headers: {}, text: '', error: e.code ?? e.message }),
    );
    req.end(o.body);
  });
}

/** The headers of a 2026 request for `method` (with `Authorization` when a token is given). */
export function mcpHeaders(method: string, token?: string, name?: string): Record<string, string> {
  return {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': '2026-07-28',
    'mcp-method': method,
    ...(name ? { 'mcp-name': name } : {}),
    ...(token ? { authorization: `Bearer ${token}` } : {}),
  };
}

/** A `server/discover` body of exactly `bytes` bytes (the padding is in `params`). */
export function paddedDiscover(bytes: number): string {
  const head = '{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"pad":"';
  return head + 'x'.repeat(bytes - head.length - 3) + '"}}';
}

/** A `server/discover` body whose `params.x` nests `levels` arrays. */
export function nestedDiscover(levels: number): string {
  return `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"x":${'['.repeat(levels)}${']'.repeat(levels)}}}`;
}

/** A `server/discover` body whose `params` has `n` keys. */
export function manyKeysDiscover(n: number): string {
  const parts: string[] = [];
  for (let i = 0; i < n; i++) parts.push(`"k${i}":0`);
  return `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{${parts.join(',')}}}`;
}

/**
 * Sends request headers declaring a `Content-Length` of `declared` bytes and only the first
 * `sent` bytes of such a body, then reads the answer (a server or proxy that refuses the size
 * answers before the body). Resolves with the status and body text, or `status: 0` when the
 * connection closed without an answer.
 */
export function declareOnly(
  port: number,
  headers: Record<string, string>,
  declared: number,
  sent = 64,
): Promise<{ status: number; text: string }> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    let got = Buffer.alloc(0);
    const finish = () => {
      socket.destroy();
      const text = got.toString('utf8');
      const [head = '', ...rest] = text.split('\r\n\r\n');
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0), text: rest.join('\r\n\r\n') });
    };
    socket.on('connect', () => {
      const lines = Object.entries({ host: `127.0.0.1:${port}`, ...headers, 'content-length': String(declared) })
        .map(([k, v]) => `${k}: ${v}`)
        .join('\r\n');
      socket.write(`POST /mcp HTTP/1.1\r\n${lines}\r\n\r\n${'x'.repeat(sent)}`);
    });
    socket.on('data', (d: Buffer) => {
      got = Buffer.concat([got, d]);
      const text = got.toString('utf8');
      const end = text.indexOf('\r\n\r\n');
      const length = Number(/content-length: (\d+)/i.exec(text.slice(0, end))?.[1]);
      if (end >= 0 && Number.isFinite(length) && got.length >= Buffer.byteLength(text.slice(0, end)) + 4 + length)
        finish();
    });
    socket.on('close', finish);
    socket.on('error', finish);
    setTimeout(finish, 10_000).unref();
  });
}

/**
 * One request whose body is written in `pieces` (byte counts; the rest goes in a last piece),
 * `delayMs` apart, with its `Content-Length`, or `chunked` (each piece an HTTP chunk, no size
 * declared), so a server sees it arrive in those chunks (a multi-byte character may be split
 * between two). Never throws; a write that fails because the
 * server answered and closed early is ignored once an answer came.
 */
export function sendInPieces(
  o: RawRequest & { body: string; pieces: number[]; delayMs: number; chunked?: boolean },
): Promise<RawResponse> {
  const bytes = Buffer.from(o.body, 'utf8');
  return new Promise((resolve) => {
    let answered = false;
    const req = request(
      {
        host: '127.0.0.1',
        port: o.port,
        path: o.path ?? '/mcp',
        method: 'POST',
        headers: {
          ...o.headers,
          ...(o.chunked ? { 'transfer-encoding': 'chunked' } : { 'content-length': String(bytes.length) }),
        },
        ...(o.from ? { localAddress: o.from } : {}),
        agent: false,
        timeout: o.timeoutMs ?? 30_000,
      },
      (res) => {
        answered = true;
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            type: String(res.headers['content-type'] ?? ''),
            headers: res.headers,
            text: Buffer.concat(chunks).toString('utf8'),
          }),
        );
        res.on('error', (e: NodeJS.ErrnoException) =>
          resolve({ status: res.statusCode ?? 0, type: '', headers: {}, text: '', error: e.code ?? e.message }),
        );
      },
    );
    req.on('timeout', () => req.destroy(new Error('client timeout')));
    req.on('error', (e: NodeJS.ErrnoException) => {
      if (!answered) resolve({ status: 0, type: '', headers: {}, text: '', error: e.code ?? e.message });
    });
    void (async () => {
      let at = 0;
      for (const n of o.pieces) {
        if (at >= bytes.length || req.destroyed) break;
        req.write(bytes.subarray(at, Math.min(bytes.length, at + n)));
        at += n;
        await new Promise((r) => setTimeout(r, o.delayMs));
      }
      if (!req.destroyed) req.end(at < bytes.length ? bytes.subarray(at) : undefined);
    })();
  });
}
