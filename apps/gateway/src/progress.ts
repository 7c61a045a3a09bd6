/**
 * Progress of a synchronous call, relayed from the task's progress stream to the request's SSE
 * response as `notifications/progress` (design D6; spec transport §7):
 *  - only when the request carried `_meta.progressToken` (P-02), echoed with its exact value and
 *    JSON type (a number stays a number, case B-12);
 *  - `progress` strictly increasing (P-01): a report that does not increase is dropped;
 *  - `total` only when the tool gave one; `message` at most 200 characters (clients cut there);
 *  - a heartbeat when nothing was sent for `heartbeatMs` (≤ 30 s), with a value that still
 *    increases and stays below `total` (once the tool reported all of `total`, the heartbeat
 *    omits `total`), so client idle timers (Claude Code: 5 min, reset only by
 *    progress) never fire;
 *  - nothing once `close()` was called (after the final response, P-02; case B-12e).
 * The rate limit (one per `PROGRESS_MIN_INTERVAL_MS`, P-04) is applied where progress is
 * produced, on the worker, so Redis carries no more than the client gets.
 */
import { STATUS_MESSAGE_MAX_CHARS, type ProgressEvent } from '@mcp-tasks/task-store';

export type ProgressToken = string | number;

/** `notifications/progress` params (spec transport §7). */
export interface ProgressParams {
  progressToken: ProgressToken;
  progress: number;
  total?: number;
  message?: string;
}

const MAX_MESSAGE = STATUS_MESSAGE_MAX_CHARS;
const clip = (s: string) => (s.length > MAX_MESSAGE ? `${s.slice(0, MAX_MESSAGE - 1)}…` : s);

/** Reads a valid progress token from a request's `_meta` (string or integer), else undefined. */
export function progressTokenOf(meta: Record<string, unknown> | undefined): ProgressToken | undefined {
  const t = meta?.progressToken;
  if (typeof t === 'string' || (typeof t === 'number' && Number.isInteger(t))) return t;
  return undefined;
}

export class ProgressRelay {
  /** Stream id of the last event read (exclusive start of the next read). */
  lastId: string;
  private lastSent: number | undefined;
  private total: number | undefined;
  private lastMessage: string | undefined;
  private lastSentAt: number;
  private closed = false;
  /** Notifications sent (for logs). */
  sent = 0;

  /**
   * @param token the request's progressToken; undefined = this request gets no progress.
   * @param send writes one notification on the request's stream.
   * @param heartbeatMs longest silence while the call runs (ms).
   * @param fromId stream id to start after (`'0'` = from the first event).
   */
  constructor(
    readonly token: ProgressToken | undefined,
    private readonly send: (params: ProgressParams) => Promise<void>,
    private readonly heartbeatMs: number,
    fromId = '0',
    private readonly startedAt = Date.now(),
  ) {
    this.lastId = fromId;
    this.lastSentAt = startedAt;
  }

  /** True when the request asked for progress and the response is not written yet. */
  get active(): boolean {
    return this.token !== undefined && !this.closed;
  }

  /** Relays events read from the stream, in order; drops non-increasing values. */
  async push(rows: { id: string; event: ProgressEvent }[], now = Date.now()): Promise<void> {
    for (const { id, event } of rows) {
      this.lastId = id;
      if (!this.active) continue;
      if (!Number.isFinite(event.progress)) continue;
      if (this.lastSent !== undefined && event.progress <= this.lastSent) continue;
      if (event.total !== undefined && Number.isFinite(event.total)) this.total = event.total;
      if (event.message) this.lastMessage = clip(event.message);
      await this.emit(event.progress, event.total, event.message ? clip(event.message) : undefined, now);
    }
  }

  /** Ms until a heartbeat is due (Infinity when the request has no token). */
  heartbeatDueIn(now = Date.now()): number {
    if (!this.active) return Infinity;
    return Math.max(0, this.lastSentAt + this.heartbeatMs - now);
  }

  /** Sends a heartbeat if one is due: the last value plus a small step (below `total`). */
  async heartbeat(now = Date.now()): Promise<boolean> {
    if (!this.active || this.heartbeatDueIn(now) > 0) return false;
    let value: number;
    if (this.lastSent === undefined) value = 0;
    else if (this.total !== undefined && this.total > this.lastSent)
      value = this.lastSent + (this.total - this.lastSent) / 1000;
    else value = this.lastSent + 0.001;
    // Readable on the wire (7.002, not 7.002000000000001) whenever rounding keeps it increasing.
    const rounded = Math.round(value * 1e6) / 1e6;
    const roundedFits =
      this.total === undefined || this.lastSent === undefined || value >= this.total || rounded < this.total;
    if (rounded > (this.lastSent ?? -Infinity) && roundedFits) value = rounded;
    if (!(value > (this.lastSent ?? -Infinity)))
      value = (this.lastSent ?? 0) + Number.EPSILON * Math.max(1, Math.abs(this.lastSent ?? 0)) * 4;
    const secs = Math.round((now - this.startedAt) / 1000);
    const message = clip(this.lastMessage ? `${this.lastMessage} (still working, ${secs} s)` : `Working (${secs} s)`);
    // A tool that reported all of `total` and is still busy: the value must still increase, so
    // this heartbeat leaves `total` out rather than claim more than all of it.
    const total = this.total !== undefined && value < this.total ? this.total : undefined;
    await this.emit(value, total, message, now);
    return true;
  }

  /** No notification is sent after this (the final response is about to be written). */
  close(): void {
    this.closed = true;
  }

  private async emit(
    progress: number,
    total: number | undefined,
    message: string | undefined,
    now: number,
  ): Promise<void> {
    const params: ProgressParams = { progressToken: this.token!, progress };
    if (total !== undefined) params.total = total;
    if (message) params.message = message;
    this.lastSent = progress;
    this.lastSentAt = now;
    this.sent++;
    await this.send(params);
  }
}
