/**
 * The live view of a running call on stderr. On a terminal: one `cli-progress` bar with the
 * status, the percentage and `statusMessage`; elsewhere (a pipe, a log): one line per change.
 *
 * Where the percentage comes from: a synchronous call's `notifications/progress` carry numbers
 * (`progress` of `total`, P-01); a task carries only `statusMessage` (T-41: no progress
 * notifications for tasks), so the percentage is read from the message when it starts with
 * `N/M` (countdown: `3/5 s (2 left)`), holds `N of M` anywhere (`Mixing layer 2 of 6`, the
 * kit's message when a tool gives no text), or holds `N%`. Otherwise the bar shows no percentage, only the message.
 */
import cliProgress from 'cli-progress';

export interface ProgressState {
  status: string;
  message?: string;
  /** Known progress, if any (from a progress notification). */
  progress?: number;
  total?: number;
}

/** A fraction 0..1 read from a status message, or undefined (see the module docstring). */
export function fractionFromMessage(message: string | undefined): number | undefined {
  if (!message) return undefined;
  const ratio =
    /^\s*(\d+(?:\.\d+)?)\s*\/\s*(\d+(?:\.\d+)?)(?!\d)/.exec(message) ??
    /(?<![\d.])(\d+(?:\.\d+)?) of (\d+(?:\.\d+)?)(?![\d.])/.exec(message);
  if (ratio) {
    const total = Number(ratio[2]);
    return total > 0 ? Math.min(1, Number(ratio[1]) / total) : undefined;
  }
  const pct = /(\d+(?:\.\d+)?)\s*%/.exec(message);
  return pct ? Math.min(1, Number(pct[1]) / 100) : undefined;
}

const BAR_TOTAL = 1000;

/** `42s`, `3m05s`, `1h02m`: time since the view started (it survives pauses, unlike the bar's own timer). */
function elapsed(ms: number): string {
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor(s / 60) % 60).padStart(2, '0')}m`;
}

export class ProgressView {
  private bar: cliProgress.SingleBar | undefined;
  private running = false;
  private lastLine = '';
  private last: ProgressState | undefined;
  private readonly tty: boolean;
  private readonly startedAt = Date.now();

  /** @param label what runs, e.g. `countdown 7f3c…` (shown before the bar). */
  constructor(
    private readonly label: string,
    private readonly stream: NodeJS.WriteStream = process.stderr,
  ) {
    this.tty = stream.isTTY === true;
    if (this.tty) {
      this.bar = new cliProgress.SingleBar(
        {
          stream,
          format: `${label} {bar} {pct} {status} {elapsed} {message}`,
          barsize: 24,
          hideCursor: true,
          clearOnComplete: true,
          stopOnComplete: false,
          fps: 8,
        },
        cliProgress.Presets.shades_classic,
      );
    }
  }

  /** Shows a new state (starts the bar on first use or after `pause`). */
  update(s: ProgressState): void {
    this.last = s;
    const fraction =
      s.progress !== undefined && s.total ? Math.min(1, s.progress / s.total) : fractionFromMessage(s.message);
    const payload = {
      pct: fraction === undefined ? '   ' : `${String(Math.round(fraction * 100)).padStart(3)}%`,
      status: s.status.padEnd(14),
      message: (s.message ?? '').slice(0, 120),
      elapsed: elapsed(Date.now() - this.startedAt).padStart(6),
    };
    if (this.bar) {
      const value = Math.round((fraction ?? 0) * BAR_TOTAL);
      if (!this.running) {
        this.bar.start(BAR_TOTAL, value, payload);
        this.running = true;
      } else this.bar.update(value, payload);
      return;
    }
    if (s.status === 'calling') return; // lines only for what the server said
    const line = `${this.label} ${s.status}${fraction === undefined ? '' : ` ${Math.round(fraction * 100)}%`}${s.message ? `: ${s.message}` : ''}`;
    if (line !== this.lastLine) {
      this.stream.write(`${line}\n`);
      this.lastLine = line;
    }
  }

  /** Clears the bar so a prompt or a message can use the terminal; `resume` or `update` brings it back. */
  pause(): void {
    if (this.bar && this.running) {
      this.bar.stop();
      this.running = false;
    }
  }

  resume(): void {
    if (this.last) this.update(this.last);
  }

  /** Removes the bar for good. */
  stop(): void {
    this.pause();
  }
}
