/**
 * A principal's share of the workers (design D9, case N-08), around every step job a worker
 * takes: at most MAX_RUNNING_STEPS_PER_PRINCIPAL steps of one principal run at once across all
 * workers, counted in Redis (`PrincipalShares`, packages/task-store principal-share.ts).
 *
 *  - Before the claim the worker asks for a share (`enterShare-3.lua`). Admitted: the step runs
 *    and its lease is renewed every `leaseMs`/4 while it does; a re-run of the same step (its
 *    worker died or lost the lock) takes the same lease over, so a task counts once.
 *  - Over the limit: the job goes back to BullMQ's delayed set (`moveToDelayed` + `DelayedError`,
 *    as the shutdown release does: not an attempt, not a stall) and the task's statusMessage says
 *    why it waits. It holds no worker slot and its task is untouched (no claim, no fence).
 *  - When a step of the principal stops running on a worker (ended, parked for input, released,
 *    aborted), its lease is dropped and the first waiting steps, as many as shares are free, are
 *    promoted (`Job.promote`): they start at once, in the order they first waited.
 *  - Backstops, so no waiting step is lost: a waiting job is due again by itself after
 *    SHARE_RECHECK_MS × (1 + its place in line ÷ the limit), at most SHARE_RECHECK_MAX_MS, and
 *    asks again (a lost wake, a waker that crashed); a lease that is not renewed lapses after
 *    `leaseMs` (a SIGKILLed worker's steps stop counting).
 *
 * The gate is outside the step processor (processor.ts) and its metrics: a step that waits is
 * not a step run. Redis errors while asking let the step run (the share is a fairness bound, not
 * a security one; the claim that follows needs Redis anyway).
 */
import { DelayedError, type Job } from 'bullmq';
import type { Logger } from '@mcp-tasks/observability';
import { parseStepJobId, type PrincipalShares, type ShareEntry, type ShareSubject } from '@mcp-tasks/task-store';
import type { JobQueues, StepJobData } from '@mcp-tasks/jobs';

/** A waiting step asks again after at least this long even if nobody wakes it (ms). */
export const SHARE_RECHECK_MS = 5_000;
/** ... and at most this long, however far back in line it is (ms). */
export const SHARE_RECHECK_MAX_MS = 30_000;

/** statusMessage of a step that waits for its principal's share. */
export const waitingMessage = (limit: number) =>
  `Queued: ${limit} of your tasks are already running, the most that run at once; this one starts when one of them ends`;
/** statusMessage of a step that starts after waiting (until the tool reports progress). */
export const STARTED_AFTER_WAIT = 'Started';

/**
 * When a waiting step at place `rank` (0 = next) asks again by itself (ms from now): the steps
 * next in line soon, the ones far back less often, so a long line costs few re-checks.
 */
export function recheckDelayMs(rank: number, limit: number): number {
  return Math.min(SHARE_RECHECK_MAX_MS, SHARE_RECHECK_MS * (1 + Math.floor(rank / Math.max(1, limit))));
}

/** Whether step `step` of a task in this state is about to run (else the claim ends or skips it). */
function willRun(s: ShareSubject, step: number): boolean {
  return !!s.owner && s.status === 'working' && s.step === step && !s.cancelRequested;
}

export interface ShareGateDeps {
  shares: PrincipalShares;
  queues: JobQueues;
  log: Logger;
}

/**
 * Creates the gate: `gate(job, token, run)` runs `run` (the step) inside the principal's share,
 * or hands the job back to the queue (throws BullMQ's `DelayedError`) when the share is full.
 */
export function createShareGate(deps: ShareGateDeps) {
  const { shares, queues, log } = deps;

  /** Promotes the waiting jobs `jobIds` of `owner`; forgets those whose job is gone. Best effort. */
  const wake = async (owner: string, jobIds: string[]): Promise<void> => {
    for (const jobId of jobIds) {
      const parsed = parseStepJobId(jobId);
      const job = parsed ? await queues.toolsFor(parsed.taskId).getJob(jobId) : undefined;
      if (!job) {
        await shares.forgetWaiting(owner, jobId);
        continue;
      }
      // Not delayed any more: already woken, or running. Either way nothing to do.
      await job.promote().catch(() => undefined);
    }
  };

  /** A job that will not run leaves the line; the steps now first in it are woken. Best effort. */
  const passTurn = async (owner: string, taskId: string, jobId: string, runToken: string): Promise<void> => {
    try {
      await shares.forgetWaiting(owner, jobId);
      // leaveShare drops no lease this run does not hold: here it only names the steps to wake.
      const next = await shares.leave(owner, taskId, runToken);
      if (next.length) await wake(owner, next);
    } catch (e) {
      log.warn({ taskId, err: (e as Error).message }, 'share.pass_failed');
    }
  };

  return async function gate(
    job: Job<StepJobData>,
    token: string | undefined,
    run: () => Promise<string>,
  ): Promise<string> {
    const { taskId, step } = job.data;
    const jobId = job.id!;
    const runToken = token ?? jobId;
    let subject: ShareSubject;
    let entry: ShareEntry | undefined;
    try {
      subject = await shares.subject(taskId);
      if (willRun(subject, step)) entry = await shares.enter(subject.owner!, taskId, jobId, runToken);
    } catch (e) {
      log.warn({ taskId, jobId, err: (e as Error).message }, 'share.check_failed');
      return run();
    }
    // Nothing that will run: gone, ended, parked for input, another step, or a cancel the claim
    // will record. No share. Out of the line (it may have waited there, e.g. cancelled while
    // waiting, and been woken in place of a step that does wait): wake whoever is next instead.
    if (!entry) {
      if (subject.owner) void passTurn(subject.owner, taskId, jobId, runToken);
      return run();
    }
    const owner = subject.owner!;
    if (!entry.admitted) {
      const delayMs = recheckDelayMs(entry.rank, shares.limit);
      // Back to the queue first, then "Queued" on the task: a task that says it waits holds no
      // worker's lock (a worker killed between the two would otherwise leave a job that never
      // ran to BullMQ's stall check, failed outright under WORKER_MAX_STALLED_COUNT=0).
      await job.moveToDelayed(Date.now() + delayMs, token);
      if (entry.first) {
        await shares.noteWaiting(taskId, step, waitingMessage(shares.limit)).catch(() => false);
        log.info({ taskId, jobId, running: entry.running, place: entry.rank + 1 }, 'step.waiting_share');
      } else log.debug({ taskId, jobId, place: entry.rank + 1, delayMs }, 'step.still_waiting_share');
      throw new DelayedError();
    }
    if (entry.waited) await shares.noteWaiting(taskId, step, STARTED_AFTER_WAIT).catch(() => false);
    const renew = setInterval(
      () => {
        shares
          .renew(owner, taskId, runToken)
          .then((held) => held || clearInterval(renew))
          .catch((e: Error) => log.warn({ taskId, err: e.message }, 'share.renew_failed'));
      },
      Math.max(100, Math.floor(shares.leaseMs / 4)),
    );
    try {
      return await run();
    } finally {
      clearInterval(renew);
      const next = await shares.leave(owner, taskId, runToken).catch((e: Error) => {
        // The lease lapses by itself after leaseMs.
        log.warn({ taskId, err: e.message }, 'share.leave_failed');
        return [] as string[];
      });
      if (next.length) void wake(owner, next).catch((e: Error) => log.warn({ err: e.message }, 'share.wake_failed'));
    }
  };
}
