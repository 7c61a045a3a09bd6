/**
 * Server-Sent Events as an MCP server sends them on a POST response (spec transport §2.4):
 * `data:` lines joined by a newline make one message, a blank line ends it, lines starting with
 * `:` are comments (keep-alives). Incremental, so a long stream (a synchronous call's progress,
 * a `subscriptions/listen` stream) is read as it arrives.
 */

export type SseEvent = { kind: 'comment'; text: string } | { kind: 'message'; data: string };

/** Feeds text chunks in, gets complete events out. */
export class SseParser {
  private buf = '';
  private data: string[] = [];

  /** Adds a chunk (any split, even mid-line); returns the events it completed. */
  push(chunk: string): SseEvent[] {
    this.buf += chunk;
    const out: SseEvent[] = [];
    let i: number;
    while ((i = this.buf.search(/\r\n|\r|\n/)) >= 0) {
      const line = this.buf.slice(0, i);
      // A lone '\r' at the end of the buffer may be the first half of '\r\n': wait for more.
      if (this.buf[i] === '\r' && i === this.buf.length - 1) break;
      this.buf = this.buf.slice(i + (this.buf.startsWith('\r\n', i) ? 2 : 1));
      this.line(line, out);
    }
    return out;
  }

  /** Ends the stream: a message not yet closed by a blank line is still delivered. */
  end(): SseEvent[] {
    const out: SseEvent[] = [];
    if (this.buf) this.line(this.buf.replace(/\r$/, ''), out);
    this.buf = '';
    this.line('', out);
    return out;
  }

  private line(line: string, out: SseEvent[]): void {
    if (line === '') {
      if (this.data.length) out.push({ kind: 'message', data: this.data.join('\n') });
      this.data = [];
    } else if (line.startsWith(':')) {
      out.push({ kind: 'comment', text: line.slice(1).trimStart() });
    } else if (line.startsWith('data:')) {
      this.data.push(line.slice(5).replace(/^ /, ''));
    }
    // `event:`, `id:`, `retry:` carry nothing MCP uses.
  }
}
