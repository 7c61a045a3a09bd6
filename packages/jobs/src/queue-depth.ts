/**
 * Queue depth of the tools queue (`queueDepthAll`: summed over its shards) as the autoscalers and alerts read it, bounded:
 * one `getJobCounts` and at most `3 * sample` job reads per call, whatever the backlog.
 *
 *  - `waiting`: step jobs not started yet. Every step job has a priority (fair share), so BullMQ
 *    keeps them in its `prioritized` set; `wait` holds jobs without one (none today).
 *  - `active`: steps running on a worker.
 *  - `delayed`: jobs due later. On this queue those are the input timeouts, one per task parked
 *    in `input_required` (removed when the task is answered or cancelled), so
 *    `inputRequired` = `delayed`: tasks waiting for a person, holding no worker (D2).
 *  - `oldestWaitingMs`: age of the oldest step job not started (ms; 0 when none waits). Exact
 *    while at most `sample` jobs wait; beyond that the oldest of the next `sample` jobs to run
 *    and of the last `sample` in line (a lower bound: with fair share a job may wait in the
 *    middle).
 */
import type { Queue } from 'bullmq';

export interface QueueDepth {
  waiting: number;
  active: number;
  delayed: number;
  /** Tasks parked in `input_required` (their input-timeout jobs). */
  inputRequired: number;
  /** ms. */
  oldestWaitingMs: number;
}

/** Reads the depth of `queue` (see the module doc). Throws when Redis fails. */
export async function queueDepth(queue: Queue, now = Date.now(), sample = 10): Promise<QueueDepth> {
  const c = await queue.getJobCounts('wait', 'prioritized', 'waiting-children', 'active', 'delayed');
  const waiting = (c.wait ?? 0) + (c.prioritized ?? 0) + (c['waiting-children'] ?? 0);
  let oldestWaitingMs = 0;
  if (waiting > 0) {
    const [headWait, headPrio, tailPrio] = await Promise.all([
      c.wait ? queue.getJobs(['wait'], 0, sample - 1, true) : [],
      c.prioritized ? queue.getJobs(['prioritized'], 0, sample - 1, true) : [],
      (c.prioritized ?? 0) > sample ? queue.getJobs(['prioritized'], 0, sample - 1, false) : [],
    ]);
    for (const job of [...headWait, ...headPrio, ...tailPrio]) {
      if (job?.timestamp) oldestWaitingMs = Math.max(oldestWaitingMs, now - job.timestamp);
    }
  }
  return { waiting, active: c.active ?? 0, delayed: c.delayed ?? 0, inputRequired: c.delayed ?? 0, oldestWaitingMs };
}

/**
 * The depth of a queue split in shards (TOOL_QUEUE_SHARDS): counts summed, `oldestWaitingMs`
 * the largest of the shards'. Throws when Redis fails.
 */
export async function queueDepthAll(queues: readonly Queue[], now = Date.now(), sample = 10): Promise<QueueDepth> {
  const all = await Promise.all(queues.map((q) => queueDepth(q, now, sample)));
  return all.reduce(
    (a, d) => ({
      waiting: a.waiting + d.waiting,
      active: a.active + d.active,
      delayed: a.delayed + d.delayed,
      inputRequired: a.inputRequired + d.inputRequired,
      oldestWaitingMs: Math.max(a.oldestWaitingMs, d.oldestWaitingMs),
    }),
    { waiting: 0, active: 0, delayed: 0, inputRequired: 0, oldestWaitingMs: 0 },
  );
}
