/**
 * The base of `TaskStore`: its Redis connections, clock, scripts and terminal listeners. Every
 * concern of the store (slots.ts, records.ts, step-writes.ts, client-writes.ts) extends it.
 */
import type { Cluster, Redis } from 'ioredis';
import { TaskKeys } from './layout.js';
import { loadScripts, type Scripts } from './scripts.js';

/**
 * Told the id of every task that a transition of this store just ended (completed, failed,
 * cancelled), after the script returned: the transition is already durable and its caller is
 * not kept waiting (the listener runs synchronously, so it must only start async work and never
 * throw). A process can die before a listener's work is done: whatever must happen at least once
 * also needs a repair path (the reconciler visits every terminal task in its index).
 */
export type TerminalListener = (taskId: string) => void;

/** What every part of `TaskStore` shares: the connections, clock, scripts and terminal listeners. */
export class StoreCore extends TaskKeys {
  /** The transition scripts (`../lua/`), defined on `redis`. */
  protected readonly scripts: Scripts;
  private readonly terminalListeners: TerminalListener[] = [];
  /** How long a progress stream outlives its last event (ms; PROGRESS_STREAM_KEEP_MS). */
  readonly progressStreamKeepMs: number;
  /** Where `get` reads (constructor, `options.reader`). */
  protected readonly reader: Redis | Cluster;

  /**
   * @param clock where "now" comes from for every timestamp and expiry this store writes or
   * compares (createdAt, lastUpdatedAt, PEXPIREAT, holder leases, scores): the apps pass a
   * `RedisClock` (packages/jobs clock.ts), so replicas with wrong clocks agree (case N-11);
   * default the process clock.
   * @param options.progressStreamKeepMs a synchronous call's progress stream expires this long
   *        after its last event, never later than the task (ms; default 300,000 = 5 min).
   * @param options.reader the connection `get` reads on (default `redis`): the gateway gives it
   *        one on which no script is defined, because ioredis copies every script defined on a
   *        client onto each automatic pipeline it builds, and a poll is nothing but a `get`.
   *        Same Redis (or master): a read issued after a write's reply sees that write.
   */
  constructor(
    readonly redis: Redis | Cluster,
    prefix: string,
    readonly clock: { now(): number } = { now: () => Date.now() },
    options: { progressStreamKeepMs?: number; reader?: Redis | Cluster } = {},
  ) {
    super(prefix);
    this.scripts = loadScripts(redis);
    this.progressStreamKeepMs = options.progressStreamKeepMs ?? 300_000;
    this.reader = options.reader ?? redis;
  }

  /** Adds a listener told of every task a transition of this store ended (see `TerminalListener`). */
  onTerminal(listener: TerminalListener): void {
    this.terminalListeners.push(listener);
  }

  /** Tells the listeners that `taskId` just ended; a listener's throw is swallowed (never fails the transition's caller). */
  protected ended(taskId: string): void {
    for (const l of this.terminalListeners) {
      try {
        l(taskId);
      } catch {
        // A listener must not throw; the transition stands either way.
      }
    }
  }
}
