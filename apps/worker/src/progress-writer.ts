/**
 * A running step's progress writes (P-04, case B-12e): coalesced to one write per
 * `minIntervalMs` (PROGRESS_MIN_INTERVAL_MS; leading edge, and the last value always lands);
 * writes are chained so they reach Redis in order, and the pending one is flushed before the
 * step's final write, so a synchronous caller gets every progress event before the result.
 * Each write is fenced (`TaskStore.reportProgress`); its answer may say that a cancel was
 * requested (`onCancelRequested`) or that the write was refused (`onRefused`: `fenced` = another
 * run holds the step).
 */
import type { Logger } from '@mcp-tasks/observability';
import { capStatusMessage, type TaskStore, type WriteOutcome } from '@mcp-tasks/task-store';

type Progress = { done: number; total?: number; message?: string };

export interface ProgressWriterOptions {
  store: TaskStore;
  taskId: string;
  fence: string;
  minIntervalMs: number;
  /** True once the step's signal aborted: no more writes are started. */
  stopped: () => boolean;
  onCancelRequested: () => void;
  onRefused: (code: WriteOutcome['code']) => void;
  log: Logger;
}

/** `report` is `ctx.progress`; `flush` writes the pending value now; `stop` drops the timer. */
export function progressWriter(o: ProgressWriterOptions) {
  let lastAt = 0;
  let pending: Progress | undefined;
  let trailing: ReturnType<typeof setTimeout> | undefined;
  let chain: Promise<void> = Promise.resolve();
  const write = async ({ done, total, message }: Progress) => {
    const statusMessage = capStatusMessage(message ?? (total ? `${done} of ${total}` : `${done}`));
    const progress = total === undefined ? { progress: done } : { progress: done, total };
    const event = { ...progress, ...(message ? { message: capStatusMessage(message) } : {}) };
    const r = await o.store.reportProgress(o.taskId, o.fence, { statusMessage, progress, event });
    if (o.stopped()) return;
    if (r.code === 'ok' && r.cancelRequested) o.onCancelRequested();
    if (r.code !== 'ok') o.onRefused(r.code);
  };
  const flush = (): Promise<void> => {
    if (trailing) clearTimeout(trailing);
    trailing = undefined;
    const p = pending;
    pending = undefined;
    if (p) {
      lastAt = Date.now();
      chain = chain
        .then(() => write(p))
        .catch((e) => o.log.warn({ err: (e as Error).message }, 'progress.write_failed'));
    }
    return chain;
  };
  return {
    flush,
    report: async (done: number, total?: number, message?: string): Promise<void> => {
      if (o.stopped() || !Number.isFinite(done)) return;
      pending = { done, ...(total === undefined ? {} : { total }), ...(message === undefined ? {} : { message }) };
      const wait = o.minIntervalMs - (Date.now() - lastAt);
      if (wait <= 0) return flush();
      trailing ??= setTimeout(() => void flush(), wait);
    },
    stop(): void {
      if (trailing) clearTimeout(trailing);
    },
  };
}
