/**
 * `testing` tools for durable steps (D14, R-01..R-04): `checkpoint_count` (checkpoints, drain
 * hand-over, resume after a killed worker) and `retry_flaky` (ToolRetry with backoff).
 */
import { z } from 'zod';
import { abortableSleep, defineTool, structuredResult } from '../kit.js';
import { ToolRetry } from '../durable.js';

/** The count a `checkpoint_count` checkpoint holds, or null. */
function countOf(checkpoint: unknown): number | null {
  const c = (checkpoint as { counted?: unknown } | undefined)?.counted;
  return typeof c === 'number' && Number.isInteger(c) && c >= 0 ? c : null;
}

/**
 * `checkpoint_count {seconds}`: counts one per second to `seconds`, checkpointing every count
 * and reporting progress; on a drain it hands its step over at once (its 1 s wait ends on
 * `ctx.drainSignal`). A re-run goes on from its checkpoint. Result: `{summary, counted,
 * resumedFrom, attempt}`, `resumedFrom` = the count of the checkpoint it last resumed from
 * (null on an uninterrupted run).
 */
export const checkpointCount = defineTool({
  name: 'checkpoint_count',
  description:
    'Counts one per second up to `seconds` (1-600), checkpointing every count; a run moved to another worker resumes from its last count. Reports the count it resumed from.',
  inputSchema: z.object({ seconds: z.number().int().min(1).max(600) }),
  taskSupport: 'optional',
  async run({ seconds }, ctx) {
    const resumedFrom = countOf(ctx.lastCheckpoint);
    let counted = resumedFrom ?? 0;
    if (resumedFrom !== null) await ctx.progress(counted, seconds, `Resumed at ${counted} of ${seconds}`);
    const wait = AbortSignal.any([ctx.signal, ctx.drainSignal]);
    // One count per second of this run's clock: each wait ends at the next whole second since the
    // run started, so the time the checkpoint and progress writes take (longer on a busy machine)
    // does not add up over the counts.
    const startedAt = Date.now();
    const first = counted;
    while (counted < seconds) {
      const dueAt = startedAt + (counted - first + 1) * 1000;
      await abortableSleep(Math.max(0, dueAt - Date.now()), wait); // a drain ends it: the step moves (an AbortError while draining)
      counted++;
      await ctx.checkpoint({ counted });
      await ctx.progress(counted, seconds, `Counted ${counted} of ${seconds}`);
    }
    const from = resumedFrom === null ? 'without interruption' : `resuming from ${resumedFrom}`;
    return structuredResult({
      summary: `Counted to ${counted} ${from} (run ${ctx.attempt}).`,
      counted,
      resumedFrom,
      attempt: ctx.attempt,
    });
  },
});

/**
 * `retry_flaky {failures, afterMs?}`: its first `failures` runs throw `ToolRetry` (after a
 * checkpoint of the runs so far), the next one succeeds. Retry policy: 4 runs, 500 ms backoff
 * doubled (or `afterMs`). Result: `{summary, runs, attempt}`.
 */
export const retryFlaky = defineTool({
  name: 'retry_flaky',
  description:
    'Fails transiently `failures` times (0-10), each time asking to be retried (after `afterMs`, or 0.5 s then doubled), then succeeds. At most 4 runs.',
  inputSchema: z.object({
    failures: z.number().int().min(0).max(10),
    afterMs: z.number().int().min(0).max(60_000).optional(),
  }),
  taskSupport: 'optional',
  retry: { attempts: 4, backoffMs: 500 },
  async run({ failures, afterMs }, ctx) {
    const before = (ctx.lastCheckpoint as { runs?: number } | undefined)?.runs ?? 0;
    const runs = before + 1;
    await ctx.checkpoint({ runs });
    if (runs <= failures)
      throw new ToolRetry(`flaky failure ${runs} of ${failures}`, afterMs === undefined ? {} : { afterMs });
    return structuredResult({
      summary: `Succeeded on run ${runs} after ${before} failures.`,
      runs,
      attempt: ctx.attempt,
    });
  },
});

export const durableTestingTools = [checkpointCount, retryFlaky];
