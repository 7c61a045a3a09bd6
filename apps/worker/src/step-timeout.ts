/**
 * A tool's maximum run time on a worker (design D9): `defineTool({ timeoutMs })`, else the
 * service's TOOL_TIMEOUT_MS. Per run of a step: the clock starts when the worker has claimed the
 * step, so time queued, waiting for the principal's share of the workers, or parked for input
 * never counts, and each step after a round of input gets the whole limit again. Past it the
 * step's AbortSignal aborts with the reason `STEP_TIMEOUT` (a tool tells it from a cancel by
 * `ctx.signal.reason`) and the processor ends the task `failed` with `toolTimeoutError`
 * (packages/task-store wire.ts). A tool that ignores its signal runs on in the background, as
 * after a cancel, but its writes are refused (the task is terminal).
 */

/** The abort reason of a step that ran past its time limit (`ctx.signal.reason`). */
export const STEP_TIMEOUT = 'timeout';

/** Largest delay a Node timer takes (ms); longer ones fire at once. */
const MAX_TIMER_MS = 2_147_483_647;

/** The time limit of a run of `tool`'s step (ms): its own `timeoutMs`, else `defaultMs`. */
export function stepTimeoutMs(tool: { timeoutMs?: number }, defaultMs: number): number {
  return tool.timeoutMs ?? defaultMs;
}

/** Calls `onTimeout` after `ms` unless the returned function is called first (it stops the timer). */
export function startStepTimeout(ms: number, onTimeout: () => void): () => void {
  const timer = setTimeout(onTimeout, Math.min(ms, MAX_TIMER_MS));
  return () => clearTimeout(timer);
}
