/**
 * Per-process subscriber for task status channels (`<prefix>:task:<taskId>`), used by a
 * gateway holding a synchronous request open. Messages are hints (D5): the waiter re-reads
 * the record on every message and at least every `pollMs`, so a lost message costs at most
 * `pollMs`. Listeners exist only while a request waits (no per-task memory otherwise, B-16).
 */
import type { Redis } from 'ioredis';

type Listener = () => void;

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
   * Resolves on the next message on `channel`, after `timeoutMs`, or when `signal` aborts,
   * whichever comes first. Never rejects.
   */
  async next(channel: string, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    await this.subscribe(channel);
    const listeners = this.listeners.get(channel)!;
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        listeners.delete(done);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      listeners.add(done);
      signal?.addEventListener('abort', done, { once: true });
    });
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
