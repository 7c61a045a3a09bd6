/**
 * Answers to requests Node refuses before Fastify sees them (the server's `clientError`), as
 * JSON-RPC error bodies like every other refusal of this gateway (case N-07: never HTML, never
 * a bare framework body):
 *  - headers and body not received within BODY_READ_TIMEOUT_MS → 408, `-32600`;
 *  - but a connection that has sent no byte yet is idle, not slow: Node starts that clock when
 *    it accepts the connection, so a client's pooled connection opened ahead of need (undici
 *    opens one per request waiting, and the request may go to an older connection that freed
 *    up first) was answered 408 after 10 s, and a request the client sent on it at that moment
 *    took the 408 for its answer (case B-16 under load: every call to one replica). Such a
 *    connection is left open, and closed without a word once it has stayed silent for
 *    `idleConnectionMs` (the keep-alive timeout: as long as an idle connection after a
 *    request). Its first byte starts the BODY_READ_TIMEOUT_MS clock as for any request;
 *  - request headers larger than Node's limit → 431, `-32600`;
 *  - anything the HTTP parser cannot read → 400, `-32700`.
 * The connection is closed after the answer.
 */
import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import { ErrorCode, jsonRpcErrorBody } from './errors.js';

export function clientErrorHandler(bodyReadTimeoutMs: number, idleConnectionMs: number) {
  return (err: Error & { code?: string }, socket: Socket): void => {
    if (err.code === 'ECONNRESET' || socket.destroyed) return;
    if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT' && socket.bytesRead === 0) {
      closeIfStillSilent(socket, idleConnectionMs - bodyReadTimeoutMs);
      return;
    }
    let status: number;
    let body: ReturnType<typeof jsonRpcErrorBody>;
    if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
      status = 408;
      body = jsonRpcErrorBody(
        null,
        ErrorCode.InvalidRequest,
        `Request Timeout: the request's headers and body must arrive within ${bodyReadTimeoutMs} ms`,
      );
    } else if (err.code === 'HPE_HEADER_OVERFLOW') {
      status = 431;
      body = jsonRpcErrorBody(null, ErrorCode.InvalidRequest, 'Request Header Fields Too Large');
    } else {
      status = 400;
      body = jsonRpcErrorBody(null, ErrorCode.ParseError, 'Bad Request: the HTTP request could not be parsed');
    }
    const text = JSON.stringify(body);
    if (!socket.writable) {
      socket.destroy(err);
      return;
    }
    // end() flushes the answer before closing; a peer that never closes its side is cut 1 s later.
    socket.end(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Length: ${Buffer.byteLength(text)}\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n${text}`,
    );
    setTimeout(() => socket.destroy(), 1000).unref();
  };
}

/**
 * Closes `socket` after `ms` unless a byte has arrived by then. Node reported the silent
 * connection once and checks it no more until a request begins (then from that request's first
 * byte, as usual). `ms` is the idle limit less the time already waited; when BODY_READ_TIMEOUT_MS
 * is the longer of the two, it is negative and the connection is closed at once (still silently).
 */
function closeIfStillSilent(socket: Socket, ms: number): void {
  const timer = setTimeout(
    () => {
      if (socket.bytesRead === 0) socket.destroy();
    },
    Math.max(0, ms),
  );
  timer.unref();
  socket.once('close', () => clearTimeout(timer));
}
