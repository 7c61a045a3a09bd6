/**
 * Long work that survives its worker (design D14, docs/writing-tools.md "Checkpoints, hand-over
 * and retries"): what a tool throws to hand its step over on a worker's drain (`ToolHandOver`)
 * or to have it run again later (`ToolRetry`), and a tool's retry policy (`RetryPolicy`).
 *
 * The promise: a step is at-least-once between checkpoints. What ran after the last
 * `ctx.checkpoint(value)` may run again (crash, SIGKILL, drain, lost lock, retry); the next run
 * gets `value` as `ctx.lastCheckpoint` and goes on from there.
 */

/**
 * Thrown by a tool that honours a worker's drain (`ctx.drainSignal`): the step is handed back
 * to the queue at once and another worker runs it again with `ctx.lastCheckpoint`.
 * `ctx.drainSignal.reason` is one, so `ctx.drainSignal.throwIfAborted()` throws it.
 */
export class ToolHandOver extends Error {
  override name = 'ToolHandOver';
  constructor(message = 'The worker is stopping: the step moves to another worker') {
    super(message);
  }
}

/**
 * Thrown by a tool for a transient failure (a 503 from an API it calls): the step runs again
 * after `afterMs` (default: the tool's `retry.backoffMs` doubled per retry, or 1 s), with its
 * checkpoint, up to the tool's `retry.attempts` runs (default 3). Meanwhile the task's
 * statusMessage says "Retrying in N s: <message>"; after the last run the task ends `failed`
 * with `-32603` and `message`.
 */
export class ToolRetry extends Error {
  override name = 'ToolRetry';
  readonly afterMs: number | undefined;
  constructor(message: string, opts: { afterMs?: number } = {}) {
    super(message);
    this.afterMs = opts.afterMs;
  }
}

/**
 * A tool's retry policy (`defineTool({ retry })`, R-04): `attempts` = the most runs of one step
 * counting the first (1..100; default 3 when a tool throws `ToolRetry` without a policy);
 * `backoffMs` = the delay before the first retry (ms, doubled for each further one; default
 * 1000), used when `ToolRetry` names no `afterMs`. With a policy, an unexpected exception is
 * retried too (its message stays in the log; the client sees "Retrying in N s: unexpected
 * error (error id …)").
 */
export interface RetryPolicy {
  attempts: number;
  backoffMs?: number;
}

/** Runs of a step when a tool throws `ToolRetry` without a `retry` policy. */
export const DEFAULT_RETRY_ATTEMPTS = 3;
/** First retry delay (ms) without `afterMs` or `retry.backoffMs`. */
export const DEFAULT_RETRY_BACKOFF_MS = 1000;

/** Longest delay before a retry (ms): one day. */
export const MAX_RETRY_DELAY_MS = 24 * 3600_000;

/** Delay before retry number `retry` (1 = the first) under `policy`, unless the tool named one. */
export function retryDelayMs(retry: number, policy: RetryPolicy | undefined, afterMs: number | undefined): number {
  if (afterMs !== undefined && Number.isFinite(afterMs) && afterMs >= 0)
    return Math.min(Math.round(afterMs), MAX_RETRY_DELAY_MS);
  const base = policy?.backoffMs ?? DEFAULT_RETRY_BACKOFF_MS;
  return Math.min(base * 2 ** Math.max(0, retry - 1), MAX_RETRY_DELAY_MS);
}

/** An AbortSignal that never aborts (a context with no drain: the gateway's inline runs). */
export const NEVER_ABORTED: AbortSignal = new AbortController().signal;
