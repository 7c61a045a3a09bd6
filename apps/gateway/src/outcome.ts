/**
 * The outcome of a `POST /mcp` exchange, read from the bytes written: JSON-RPC
 * errors mostly travel with HTTP 200 (D10), so the status alone cannot tell a `-32603` from a
 * result. Only small chunks that contain `"error"` are parsed (an error message is small; a
 * result rarely contains the word), so a poll's cost is one `indexOf`.
 *
 * A JSON body or an SSE `data:` line that parses to a JSON-RPC response (`id` present) sets the
 * outcome: its `error.code`, or `ok` for a `result`. Notifications are ignored.
 */

/** Largest chunk (bytes) looked into; a larger one is a result, not an error. */
const MAX_SNIFF_BYTES = 64 * 1024;
const ERROR_MARK = '"error"';

/** The JSON-RPC error code (or `ok`) of the response in `chunk`, or undefined when it holds none. */
export function sniffResponse(chunk: unknown): number | 'ok' | undefined {
  if (chunk === null || chunk === undefined) return undefined;
  let text: string;
  if (typeof chunk === 'string') {
    if (chunk.length > MAX_SNIFF_BYTES || !chunk.includes(ERROR_MARK)) return undefined;
    text = chunk;
  } else if (chunk instanceof Uint8Array) {
    if (chunk.byteLength > MAX_SNIFF_BYTES) return undefined;
    const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    if (buf.indexOf(ERROR_MARK) < 0) return undefined;
    text = buf.toString('utf8');
  } else {
    return undefined;
  }
  const first = text.trimStart()[0];
  const candidates =
    first === '{'
      ? [text]
      : text
          .split('\n')
          .filter((l) => l.startsWith('data:'))
          .map((l) => l.slice(5));
  let found: number | 'ok' | undefined;
  for (const c of candidates) {
    try {
      const msg = JSON.parse(c) as { id?: unknown; error?: { code?: unknown }; result?: unknown };
      if (!msg || typeof msg !== 'object' || !('id' in msg)) continue;
      if (msg.error && typeof msg.error.code === 'number') found = msg.error.code;
      else if ('result' in msg) found = 'ok';
    } catch {
      // not JSON: ignore
    }
  }
  return found;
}
