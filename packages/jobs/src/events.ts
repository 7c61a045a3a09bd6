/**
 * Per-process subscriber for task channels (`<prefix>:task:<taskId>`), used by a gateway
 * holding a synchronous request or a task listen stream open. Messages are hints (D5): the
 * holder re-reads the record on every message and at least every second (sync) or 5 s
 * (listen), so a lost message costs at most that. Listeners exist only while a request is
 * open (no per-task memory otherwise, B-16).
 */
import type { Redis } from 'ioredis';

type Listener = () => void;

/** A watch on one channel (see `TaskEvents.watch`). */
export interface ChannelWatch {
  wait(timeoutMs: number, signal?: AbortSignal): Promise<void>;
  close(): Promise<void>;
}

export class TaskEvents {
  private readonly listeners = new Map<string, Set<Listener>>();

  constructor(private readonly sub: Redis) {
    sub.on('message', (channel: string) => {
      for (const l of this.listeners.get(channel) ?? []) l();
    });
  }

  /** Subscribes to `channel` (call before the first read of the record, so no change is missed). */
  async subscribe(channel: string): Promise<void> {
    if (this.listeners.has(channel)) return;
    this.listeners.set(channel, new Set());
    await this.sub.subscribe(channel).catch(() => undefined);
  }

  /**
   * Calls `fn` on every message on `channel` until the returned function is called (which also
   * drops the subscription when nobody else listens). Subscribed when this resolves.
   */
  async listen(channel: string, fn: Listener): Promise<() => Promise<void>> {
    await this.subscribe(channel);
    const set = this.listeners.get(channel)!;
    set.add(fn);
    return async () => {
      set.delete(fn);
      await this.release(channel);
    };
  }

  /**
   * Watches `channel` from now on: `wait()` resolves at once when a message arrived since the
   * previous `wait()` (none is lost between two waits), else on the next message, after
   * `timeoutMs`, or when `signal` aborts. Subscribed when this resolves; `close()` releases it.
   */
  async watch(channel: string): Promise<ChannelWatch> {
    let pending = false;
    let wake: (() => void) | undefined;
    const stop = await this.listen(channel, () => {
      pending = true;
      wake?.();
    });
    return {
      async wait(timeoutMs: number, signal?: AbortSignal): Promise<void> {
        if (!pending && !signal?.aborted) {
          await new Promise<void>((resolve) => {
            const done = () => {
              clearTimeout(timer);
              wake = undefined;
              signal?.removeEventListener('abort', done);
              resolve();
            };
            const timer = setTimeout(done, timeoutMs);
            wake = done;
            signal?.addEventListener('abort', done, { once: true });
          });
        }
        pending = false;
      },
      close: stop,
    };
  }

  /** Drops the subscription of `channel` when nobody waits on it any more. */
  async release(channel: string): Promise<void> {
    const set = this.listeners.get(channel);
    if (set && set.size === 0) {
      this.listeners.delete(channel);
      await this.sub.unsubscribe(channel).catch(() => undefined);
    }
  }
}
