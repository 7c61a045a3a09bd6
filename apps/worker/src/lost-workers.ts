/**
 * A dead worker noticed in seconds. BullMQ alone notices a killed worker when its job
 * lock expires and the stall check runs (WORKER_LOCK_DURATION_MS + WORKER_STALLED_INTERVAL_MS,
 * 20-25 s by default). Here each worker, every `everyMs`, looks at the active step jobs of
 * every shard (one worker per round: a lease `<prefix>:lost-check`, PX `everyMs`): a job whose
 * lock token names a BullMQ worker that writes liveness keys (`alive-known`) but whose
 * `alive` key is gone (WORKER_LOST_AFTER_MS without a refresh) is moved back to the queue at
 * once with that token (`moveToDelayed(now, token)`: BullMQ removes the lock only when the
 * token still holds it, so a job whose worker renewed or finished meanwhile is left alone), and
 * its task says "Its worker was lost; waiting to resume" until another worker claims the step
 * (with a new fence: the lost run's late writes, if it was only cut off, are refused).
 *
 * Continuity guard: a Redis outage stops every refresh, so right after one every key may be
 * gone. The check acts only once this worker has seen Redis answer without a break for
 * WORKER_LOST_AFTER_MS + 3 s (every live worker, reconnect back-off of 2 s included, has
 * refreshed by then), so a blip that job locks ride out restarts no step. The trade-off: a
 * worker cut off from Redis alone for longer than WORKER_LOST_AFTER_MS loses its steps to
 * another worker (they resume from their checkpoints), where job locks alone would have waited
 * out 17 s.
 */
import { Job, type Queue } from 'bullmq';
import type { Logger } from '@mcp-tasks/observability';
import type { Checkpoints } from '@mcp-tasks/task-store';
import { parseStepJobId } from '@mcp-tasks/task-store';
import type { RedisClient } from '@mcp-tasks/jobs';
import type { RedisContinuity } from './redis-continuity.js';
import { aliveKey, aliveKnownKey } from './liveness.js';

/** What a task whose worker was lost says until its step resumes. */
export const WORKER_LOST_MESSAGE = 'Its worker was lost; waiting to resume';

export interface LostWorkerDeps {
  redis: RedisClient;
  keyPrefix: string;
  shards: readonly Queue[];
  checkpoints: Checkpoints;
  continuity: RedisContinuity;
  lostAfterMs: number;
  /**
   * WORKER_MAX_STALLED_COUNT: how many times a step whose worker died may be run again. A move
   * here counts as one, on BullMQ's own stalled counter (the job's `stc` field); a step past it
   * is left to BullMQ's stall check, which fails it once its lock lapses, as without this check.
   */
  maxStalledCount: number;
  log: Logger;
  /** Called for every step moved (metrics, tests). */
  onMoved?: (jobId: string) => void;
}

/** One round over every shard; @returns how many steps were moved. */
export async function moveLostSteps(d: LostWorkerDeps): Promise<number> {
  if (d.continuity.unbrokenForMs() < d.lostAfterMs + 3000) return 0;
  let moved = 0;
  for (const queue of d.shards) {
    const active = await d.redis.lrange(`${queue.opts.prefix}:${queue.name}:active`, 0, -1);
    for (const id of active) {
      const token = await d.redis.get(`${queue.opts.prefix}:${queue.name}:${id}:lock`);
      if (!token) continue; // no lock: BullMQ's own stall check takes it
      const owner = token.slice(0, token.lastIndexOf(':'));
      const [alive, known] = await Promise.all([
        d.redis.exists(aliveKey(d.keyPrefix, owner)),
        d.redis.exists(aliveKnownKey(d.keyPrefix, owner)),
      ]);
      if (alive === 1 || known === 0) continue;
      if (await moveOne(d, queue, id, token)) moved++;
    }
  }
  return moved;
}

async function moveOne(d: LostWorkerDeps, queue: Queue, id: string, token: string): Promise<boolean> {
  const job = await Job.fromId(queue, id);
  if (!job) return false;
  const jobKey = `${queue.opts.prefix}:${queue.name}:${id}`;
  const stalled = Number((await d.redis.hget(jobKey, 'stc')) ?? 0);
  if (stalled >= d.maxStalledCount) return false; // not re-run: BullMQ's stall check fails it
  await d.redis.hincrby(jobKey, 'stc', 1);
  const ids = parseStepJobId(id);
  if (ids) await d.checkpoints.noteStepStatus(ids.taskId, ids.step, WORKER_LOST_MESSAGE).catch(() => undefined);
  try {
    await job.moveToDelayed(Date.now(), token);
  } catch (e) {
    // The lock changed hands or the job finished meanwhile: nothing to do.
    d.log.debug({ jobId: id, err: (e as Error).message }, 'worker_lost.move_skipped');
    return false;
  }
  d.log.warn(
    { jobId: id, ...(ids ?? {}), lostWorker: token.slice(0, token.lastIndexOf(':')) },
    'worker_lost.step_moved',
  );
  d.onMoved?.(id);
  return true;
}

/**
 * Runs `moveLostSteps` every `everyMs` on one worker at a time (the lease); errors are logged
 * at debug level (an outage is reported by the connections themselves). @returns stop().
 */
export function startLostWorkerCheck(d: LostWorkerDeps, everyMs: number): () => void {
  let running = false;
  const lease = `${d.keyPrefix}:lost-check`;
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    d.redis
      .set(lease, '1', 'PX', everyMs, 'NX')
      .then((got) => (got === 'OK' ? moveLostSteps(d) : 0))
      .catch((e: Error) => d.log.debug({ err: e.message }, 'worker_lost.check_failed'))
      .finally(() => (running = false));
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
