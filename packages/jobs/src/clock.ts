/**
 * Redis time for every timestamp and expiry a process writes or checks (case N-11).
 *
 * Replicas' clocks disagree; Redis' does not (one server, or one primary). `RedisClock.now()` is
 * Redis' `TIME` as last sampled, carried forward by this process' monotonic clock
 * (`performance.now()`), so neither the process' wall clock nor a step of it (NTP, a
 * misconfigured host 2 minutes off) moves a task's `createdAt`, `lastUpdatedAt`, expiry
 * (PEXPIREAT), a holder lease or a continuation's expiry check.
 *
 * Sampling: once at `start()`, every `resampleMs` (30 s) and on every reconnect (`ready`). A
 * sample whose round trip took longer than `toleranceMs` is dropped (its midpoint could be off
 * by more than half of that). Tolerance: `now()` is within `TOLERANCE_MS` (1 s) of Redis' own
 * clock — half a round trip (< 0.5 s, else the sample is dropped) plus the monotonic clock's
 * drift over 30 s (microseconds). Until the first sample succeeds (Redis away at start) `now()`
 * is the process clock.
 */
import { performance } from 'node:perf_hooks';
import type { RedisClient } from './redis.js';

/** A source of "now" in unix milliseconds. */
export interface Clock {
  now(): number;
}

/** How far `RedisClock.now()` may be from Redis' `TIME` (ms); continuations are checked with no more slack than this. */
export const TOLERANCE_MS = 1000;

export class RedisClock implements Clock {
  /** Redis time (ms) minus `performance.now()` at the last good sample; undefined before one. */
  private base: number | undefined;
  private timer: ReturnType<typeof setInterval> | undefined;
  private readonly onReady = () => void this.sample();

  constructor(
    private readonly redis: RedisClient,
    private readonly o: { resampleMs?: number; toleranceMs?: number } = {},
  ) {}

  /** Samples once (waits for it; a failure leaves the process clock in use), then keeps sampling. */
  async start(): Promise<void> {
    await this.sample();
    this.timer = setInterval(() => void this.sample(), this.o.resampleMs ?? 30_000);
    this.timer.unref();
    this.redis.on('ready', this.onReady);
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.redis.off('ready', this.onReady);
  }

  /** Unix ms, Redis' clock. */
  now(): number {
    return this.base === undefined ? Date.now() : Math.round(this.base + performance.now());
  }

  /** Redis' clock minus this process' wall clock (ms), for the start log; 0 before a sample. */
  get skewMs(): number {
    return this.base === undefined ? 0 : Math.round(this.base + performance.now() - Date.now());
  }

  /** One `TIME` round trip; kept when it took at most `toleranceMs`. @returns whether it was kept. */
  async sample(): Promise<boolean> {
    try {
      const t0 = performance.now();
      const [s, us] = await this.redis.time();
      const t1 = performance.now();
      if (t1 - t0 > (this.o.toleranceMs ?? TOLERANCE_MS)) return false;
      this.base = Number(s) * 1000 + Number(us) / 1000 - (t0 + t1) / 2;
      return true;
    } catch {
      return false;
    }
  }
}
