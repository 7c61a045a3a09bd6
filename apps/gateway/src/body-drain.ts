/**
 * A request answered before its body was read whole (a refusal in `onRequest`: 401, 403, 415,
 * 429; a body the parser refused part way: 400, 413) must not end in a way a proxy counts as a
 * failure of the gateway. Node closes such a connection with unread bytes in it, which the
 * kernel answers with a TCP reset: nginx, still sending the body, gets "broken pipe" / "reset by
 * peer", counts the gateway as failed (`max_fails`) and, once every gateway is so marked,
 * answers every client 502 "no live upstreams" for `fail_timeout` (measured: six concurrent
 * 4.5 MiB bodies → 502 for every call for about 10 s).
 *
 * So before such an answer is written (`onSend`):
 *  - a body whose declared `Content-Length` is at most MAX_BODY_BYTES (every body nginx passes:
 *    it refuses larger ones itself) is read to its end and thrown away, unparsed, and the answer
 *    keeps the connection open; at most BODY_READ_TIMEOUT_MS is spent on it (then Node's own
 *    request timeout answers 408 and closes);
 *  - a larger or unsized (chunked) body, only possible straight to a gateway: the answer is
 *    written at once (with keep-alive framing, even to a client that sent `Connection: close`)
 *    and what follows is thrown away for at most LINGER_MS, then the connection is closed (the
 *    "lingering close" proxies themselves use), so a client that reads its answer gets it
 *    before the close.
 */
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance } from 'fastify';

/** How long the rest of an oversized body is read and thrown away after the answer (ms). */
export const LINGER_MS = 2000;

/** Resolves once `req` has ended (or failed), or after `timeoutMs`. */
function drained(req: IncomingMessage, timeoutMs: number): Promise<void> {
  return new Promise((resolve) => {
    const finish = () => {
      clearTimeout(timer);
      req.off('end', finish).off('error', finish).off('close', finish);
      resolve();
    };
    const timer = setTimeout(finish, timeoutMs);
    req.once('end', finish).once('error', finish).once('close', finish);
    req.resume();
  });
}

export interface BodyDrainOptions {
  /** MAX_BODY_BYTES: the largest body read to its end before a refusal. */
  maxBodyBytes: number;
  /** BODY_READ_TIMEOUT_MS: the longest wait for it. */
  bodyReadTimeoutMs: number;
  /** True while the gateway drains (SIGTERM): its `Connection: close` answers stay so. */
  closing: () => boolean;
}

/** Registers the `onSend` hook. */
export function registerBodyDrain(
  app: FastifyInstance,
  { maxBodyBytes, bodyReadTimeoutMs, closing }: BodyDrainOptions,
): void {
  app.addHook('onSend', async (req, reply, payload) => {
    const raw = req.raw;
    if (raw.complete || raw.readableEnded || raw.destroyed) return payload;
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared <= maxBodyBytes) {
      await drained(raw, bodyReadTimeoutMs);
      // Fastify asks to close after a body it refused; read to its end, the connection is reusable.
      if (raw.complete && !closing()) reply.removeHeader('connection');
      return payload;
    }
    // Too large to read: answer now and close after LINGER_MS unless the body ends first. The
    // answer keeps the connection open even when the client asked to close it
    // (`Connection: close`): Node would otherwise close the socket right after the answer with
    // the body still arriving, the kernel would answer those bytes with a reset, and the client
    // could lose the answer before reading it (measured straight to a gateway, a 256 KiB body
    // over a 64 KiB limit: 4 of 30 and 39 of 60 such clients got EPIPE instead of their 413;
    // 0 of 60 now). Such a client's connection is ended once its body is in.
    const askedToClose = !reply.raw.shouldKeepAlive;
    if (!closing()) {
      reply.removeHeader('connection');
      reply.raw.shouldKeepAlive = true;
    }
    const socket = raw.socket;
    const timer = setTimeout(() => socket.destroy(), LINGER_MS);
    timer.unref();
    raw.once('end', () => {
      clearTimeout(timer);
      if (askedToClose) socket.end();
    });
    raw.resume();
    return payload;
  });
}
