/**
 * A worker's drain (SIGTERM / SIGINT, R-02), bounded whatever Redis does:
 *  1. stop fetching (BullMQ `close()` on every worker, in this tick: case B-07b);
 *  2. abort `ctx.drainSignal` of every running step (reason: a `ToolHandOver`): a tool that
 *     honours it checkpoints and throws, and its step is released to the queue at once, for
 *     another worker to resume from the checkpoint ("Moving to another worker");
 *  3. stop the heartbeat and the tools advert (not awaited before the grace: with Redis away
 *     they would wait for it);
 *  4. steps still running after SHUTDOWN_GRACE_MS (tools that ignore the drain) are aborted
 *     with `'shutdown'` and released the same way;
 *  5. connections closed, exit 0.
 * A deadline of SHUTDOWN_GRACE_MS + WORKER_EXIT_MARGIN_MS (3 s) ends the process in any case
 * (exit 0 and a `worker.exit_forced` log line): a Redis that does not answer cannot hold it.
 */
import type { Worker } from 'bullmq';
import type { Logger } from '@mcp-tasks/observability';
import { ToolHandOver } from '@mcp-tasks/tools';

/** Longest a draining worker lives past SHUTDOWN_GRACE_MS (ms). */
export const WORKER_EXIT_MARGIN_MS = 3000;

export interface DrainDeps {
  graceMs: number;
  log: Logger;
  /** The tools queue workers (one per shard). */
  toolsWorkers: Worker[];
  /** The other BullMQ workers (maintenance, webhooks). */
  otherWorkers: { close(): Promise<void> }[];
  /** Aborted at once with a `ToolHandOver`: every step's `ctx.drainSignal`. */
  drain: AbortController;
  /** Says this worker is gone (heartbeat, tools advert): started at once, awaited briefly. */
  leave: () => Promise<unknown>;
  /** Closes everything else (ops server, tracing, liveness, Redis connections). */
  finish: () => Promise<unknown>;
}

const timer = (ms: number) => new Promise<false>((r) => setTimeout(() => r(false), ms).unref());

/** Drains and exits the process (see the module doc). Never returns. */
export async function drainAndExit(sig: string, d: DrainDeps): Promise<never> {
  const deadline = setTimeout(() => {
    d.log.warn({ graceMs: d.graceMs, marginMs: WORKER_EXIT_MARGIN_MS }, 'worker.exit_forced');
    process.exit(0);
  }, d.graceMs + WORKER_EXIT_MARGIN_MS);
  const closing = Promise.all([...d.toolsWorkers.map((w) => w.close()), ...d.otherWorkers.map((w) => w.close())]);
  closing.catch(() => undefined);
  d.drain.abort(new ToolHandOver());
  d.log.info({ sig, graceMs: d.graceMs }, 'worker.draining');
  const leaving = d.leave().catch(() => undefined);
  const finished = await Promise.race([closing.then(() => true), timer(d.graceMs)]);
  if (!finished) {
    d.log.info('worker.releasing_active_jobs');
    for (const w of d.toolsWorkers) w.cancelAllJobs('shutdown');
    await Promise.race([closing, timer(WORKER_EXIT_MARGIN_MS - 1000)]);
  }
  await Promise.race([leaving, timer(300)]);
  await Promise.race([d.finish().catch(() => undefined), timer(500)]);
  clearTimeout(deadline);
  d.log.info('worker.stopped');
  process.exit(0);
}
