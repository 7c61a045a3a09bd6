/**
 * Per-process subscriber for task channels (`<prefix>:task:<taskId>`), used by a gateway
 * holding a synchronous request or a task listen stream open. Messages are hints (D5): the
 * holder re-reads the record on every message and at least every second (sync) or 5 s
 * (listen), so a lost message costs at most that. Listeners exist only while a request is
 * open (no per-task memory otherwise, case B-16).
 */
import type { RedisClient } from './redis.js';

type Listener = () => void;

/** A watch on one channel (see `TaskEvents.watch`). */
export interface ChannelWatch {
  wait(timeoutMs: number, signal?: AbortSignal): Promise<void>;
  close(): Promise<void>;
}

export class TaskEvents {
  /** One entry per subscribed channel: its listeners and the SUBSCRIBE in flight. */
  private readonly channels = new Map<string, { listeners: Set<Listener>; ready: Promise<void> }>();

  constructor(private readonly sub: RedisClient) {
    sub.on('message', (channel: string) => {
      for (const l of this.channels.get(channel)?.listeners ?? []) l();
    });
  }

  /**
   * Calls `fn` on every message on `channel` until the returned function is called (which also
   * drops the subscription when nobody else listens). Subscribed when this resolves. The
   * listener joins its channel's entry before any await, so a concurrent release cannot drop
   * the entry under it; commands reach Redis in the order they are issued on the one
   * connection, so an UNSUBSCRIBE never overtakes a later SUBSCRIBE.
   */
  async listen(channel: string, fn: Listener): Promise<() => Promise<void>> {
    let entry = this.channels.get(channel);
    if (!entry) {
      entry = {
        listeners: new Set(),
        ready: this.sub.subscribe(channel).then(
          () => undefined,
          () => undefined,
        ),
      };
      this.channels.set(channel, entry);
    }
    entry.listeners.add(fn);
    const mine = entry;
    await mine.ready;
    return async () => {
      mine.listeners.delete(fn);
      await this.release(channel, mine);
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

  /** Drops the subscription of `channel` when its entry `entry` has no listener left. */
  private async release(channel: string, entry: { listeners: Set<Listener> }): Promise<void> {
    if (this.channels.get(channel) !== entry || entry.listeners.size > 0) return;
    this.channels.delete(channel);
    await this.sub.unsubscribe(channel).catch(() => undefined);
  }
}
