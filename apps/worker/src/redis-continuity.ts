/**
 * Whether Redis has been reachable without a break, as this worker sees it.
 *
 * A gateway holding a synchronous call renews its hold (`holderAt`) in Redis; while Redis is
 * away nobody can renew, so when it comes back every hold looks lapsed. The reconciler's
 * orphan check (reconcile.ts, C-01) asks `unbrokenForMs()` and acts only once Redis has been
 * back for a whole lease period (SYNC_HOLDER_TIMEOUT_MS): holders that are alive have renewed
 * by then (gateways renew at once on reconnect), so only the calls of a gateway that really
 * died are cancelled.
 *
 * One PING at a time (to every master of a Cluster, case N-10), every `everyMs` (500 ms): Redis
 * counts as away from the moment a PING has been unanswered for more than `awayAfterMs` (1 s),
 * has failed, or the connection is down, until a PING is answered again. Durations use the
 * monotonic clock (`performance.now()`), never the wall clock. At start Redis counts as
 * continuously reachable (the process just reached it).
 *
 * A stall of this process is not an outage of Redis: when the event loop was blocked or starved
 * of CPU (a busy machine), the timer that finds a PING overdue runs before the reply already
 * waiting on the socket is read. So an overdue PING counts only after pending I/O has been read
 * (`setImmediate`), and a reply's own round-trip time is not a verdict: a reply that came at all
 * was read, and a PING that Redis left unanswered for long is caught by the ticks meanwhile.
 * Consequence: a Redis pause shorter than `awayAfterMs + everyMs` (1.5 s) may go unseen, far
 * shorter than the gap a live holder's renewals survive (SYNC_HOLDER_TIMEOUT_MS × 2/3).
 */
import { performance } from 'node:perf_hooks';
import { pingAll, type RedisClient } from '@mcp-tasks/jobs';

export interface RedisContinuity {
  /** Ms Redis has been reachable without a break (0 while it is away; Infinity since start if it never was). */
  unbrokenForMs(): number;
  /** True while Redis counts as away. */
  readonly away: boolean;
  stop(): void;
}

/** Starts watching `redis` (a connection of its own is not needed: PING shares the worker's). */
export function watchContinuity(
  redis: RedisClient,
  o: { everyMs?: number; awayAfterMs?: number; now?: () => number } = {},
): RedisContinuity {
  const everyMs = o.everyMs ?? 500;
  const awayAfterMs = o.awayAfterMs ?? 1000;
  const now = o.now ?? (() => performance.now());
  let away = false;
  let backAt = -Infinity;
  let pingSentAt: number | undefined;
  const markAway = () => {
    away = true;
  };
  const tick = () => {
    if (pingSentAt !== undefined) {
      // One PING at a time: an unanswered one is waited for, and counts against Redis once
      // what is already on the socket has been read (its reply may be there: this process
      // may have been the one that stalled).
      const sentAt = pingSentAt;
      if (now() - sentAt > awayAfterMs) {
        setImmediate(() => {
          if (pingSentAt === sentAt) markAway();
        });
      }
      return;
    }
    if (redis.status !== 'ready') {
      markAway();
      return;
    }
    pingSentAt = now();
    pingAll(redis).then(
      () => {
        pingSentAt = undefined;
        if (away) {
          away = false;
          backAt = now();
        }
      },
      () => {
        pingSentAt = undefined;
        markAway();
      },
    );
  };
  redis.on('close', markAway);
  const timer = setInterval(tick, everyMs);
  timer.unref();
  return {
    unbrokenForMs: () => (away ? 0 : now() - backAt),
    get away() {
      return away;
    },
    stop() {
      clearInterval(timer);
      redis.off('close', markAway);
    },
  };
}
