/**
 * SSE plumbing shared by the responses the gateway streams (H-22, case B-10): every
 * `text/event-stream` response sends its headers and a first comment line the moment they are
 * written, so a client sees its first byte at once (Claude Code aborts a request with no byte
 * in 60 s; Node otherwise holds the headers until the first body chunk, which for a quiet tool
 * can be the keep-alive 15 s later).
 */
import type { ServerResponse } from 'node:http';

/** Headers of every SSE response this gateway writes itself (listen streams). */
export const SSE_HEADERS = {
  'content-type': 'text/event-stream',
  'cache-control': 'no-cache, no-transform',
  connection: 'keep-alive',
  'x-accel-buffering': 'no',
};

/** The first bytes of every SSE response: a comment, ignored by clients. */
export const SSE_OPEN_COMMENT = ': stream open\n\n';

/**
 * Makes an SSE response written by the SDK send its headers and `SSE_OPEN_COMMENT` as soon as
 * they are written. The SDK writes through `res.writeHead`; it offers no hook, so this wraps
 * that one method on this one response.
 */
export function primeSse(res: ServerResponse): void {
  const writeHead = res.writeHead;
  res.writeHead = function (this: ServerResponse, ...args: Parameters<ServerResponse['writeHead']>) {
    const out = writeHead.apply(this, args);
    const type = this.getHeader('content-type') ?? headerIn(args);
    if (typeof type === 'string' && type.startsWith('text/event-stream')) this.write(SSE_OPEN_COMMENT);
    return out;
  } as ServerResponse['writeHead'];
}

/** The content-type passed to `writeHead(status, headers)` as an object, if any. */
function headerIn(args: unknown[]): unknown {
  const h = args.find((a) => typeof a === 'object' && a !== null && !Array.isArray(a)) as Record<string, unknown> | undefined;
  if (!h) return undefined;
  const k = Object.keys(h).find((n) => n.toLowerCase() === 'content-type');
  return k ? h[k] : undefined;
}
