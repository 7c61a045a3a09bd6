/**
 * The BullMQ side shared by gateway and worker: queues, job payloads, job ids, and the
 * cross-process signals (design D5). One BullMQ job per task step, job id
 * `t.<taskId>.<step>`, so re-adding a step is idempotent (BullMQ ignores an add whose job id exists).
 *
 * Redis keys (owned by BullMQ's retention settings below):
 *   `<prefix>:{jobs}:tools:*`        step jobs and input-timeout jobs (shard 0: every task when
 *                                    TOOL_QUEUE_SHARDS = 1, the default): finished ones kept by
 *                                    count (KEEP_COMPLETED_JOBS / KEEP_FAILED_JOBS, per shard) and
 *                                    at most the task TTL (`jobRetention`, `cleanFinished`);
 *                                    events stream capped at EVENTS_MAX_LEN
 *   `<prefix>:{jobs-<i>}:tools:*`    shard i (1 ≤ i < TOOL_QUEUE_SHARDS) of the tools queue: a
 *                                    task's jobs are on shard `toolShard(taskId, n)` (own hash
 *                                    tag, so under Redis Cluster the shards spread over slots)
 *   `<prefix>:{jobs}:maintenance:*`  the reconciler's repeatable job
 *   `<prefix>:{jobs}:webhooks:*`     completion webhook deliveries (webhooks.ts)
 *   `<prefix>:worker-tools`          the live workers' tool adverts (worker-tools.ts, expiring)
 */
import { Queue, type JobsOptions } from 'bullmq';
import type { RedisClient } from './redis.js';
import { stepJobId } from '@mcp-tasks/task-store';

export * from './redis.js';
export * from './clock.js';
export * from './process-redis.js';
export { TaskEvents, type ChannelWatch } from './events.js';
export { WorkerPresence, newWorkerId, startHeartbeat, type Heartbeat } from './presence.js';
export { queueDepth, queueDepthAll, type QueueDepth } from './queue-depth.js';
export * from './webhooks.js';
export * from './worker-tools.js';

export const TOOLS_QUEUE = 'tools';
export const MAINTENANCE_QUEUE = 'maintenance';

/** Job names on the tools queue. */
export const JOB_STEP = 'step';
export const JOB_INPUT_TIMEOUT = 'input-timeout';
export const JOB_RECONCILE = 'reconcile';

/**
 * W3C trace context carried with a job (case N-14): the `traceparent` (and `tracestate`) of the
 * span the worker's step span becomes a child of. Never used for anything but tracing.
 */
export interface JobTrace {
  traceparent: string;
  tracestate?: string;
}

/**
 * Payload of a step job and of an input-timeout job. `tool` and `createdAt` (ms) label the
 * worker's metrics; `trace` parents the step's span (N-14). All three are absent in
 * jobs enqueued before they existed.
 */
export interface StepJobData {
  taskId: string;
  step: number;
  tool?: string;
  createdAt?: number;
  trace?: JobTrace;
  /** Retries of this step so far (`ToolRetry`, R-04): set by the worker before it delays the job. */
  retries?: number;
}

/** What an enqueue may add to a job's payload (see StepJobData). */
export type StepJobExtras = Pick<StepJobData, 'tool' | 'createdAt' | 'trace'>;

/** The extras of `data` that are set (so a payload never carries `undefined` keys). */
function extras(data: StepJobExtras): StepJobExtras {
  const out: StepJobExtras = {};
  if (data.tool !== undefined) out.tool = data.tool;
  if (data.createdAt !== undefined) out.createdAt = data.createdAt;
  if (data.trace !== undefined) out.trace = data.trace;
  return out;
}

/**
 * BullMQ prefix: one hash tag so every queue key sits in one Cluster slot (BullMQ's scripts touch
 * many keys of a queue at once: CROSSSLOT otherwise).
 */
export function bullPrefix(keyPrefix: string): string {
  return `${keyPrefix}:{jobs}`;
}

/** FNV-1a, 32 bits, of the UTF-8 bytes of `s` (an unsigned integer). */
export function fnv1a32(s: string): number {
  let h = 0x811c9dc5;
  for (const byte of Buffer.from(s, 'utf8')) {
    h ^= byte;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

/**
 * The tools-queue shard of a task: FNV-1a(taskId) mod `shards`; always 0 with one
 * shard. Pure: every gateway and worker computes the same shard for a task.
 */
export function toolShard(taskId: string, shards: number): number {
  return shards <= 1 ? 0 : fnv1a32(taskId) % shards;
}

/**
 * BullMQ prefix of tools-queue shard `shard`: shard 0 is today's `<prefix>:{jobs}` (so one shard
 * is exactly the layout before sharding, and going from 1 to N shards keeps the queued jobs on
 * shard 0), shard i is `<prefix>:{jobs-i}`: its own hash tag, its own Cluster slot.
 */
export function toolsPrefix(keyPrefix: string, shard: number): string {
  return shard === 0 ? bullPrefix(keyPrefix) : `${keyPrefix}:{jobs-${shard}}`;
}

/** Finished step jobs kept at most, whatever their age (BullMQ `removeOnComplete.count`). */
export const KEEP_COMPLETED_JOBS = 1000;
/** Failed step jobs kept at most, whatever their age (BullMQ `removeOnFail.count`): kept longer for the queue view. */
export const KEEP_FAILED_JOBS = 5000;

/**
 * Retention of finished step jobs (case B-15): by count (the last KEEP_COMPLETED_JOBS
 * completed and KEEP_FAILED_JOBS failed jobs) and by age, no longer than the task they belong
 * to lives (its `ttlMs`, at least 1 s; at most 1 day for completed and 7 days for failed
 * jobs). Nothing depends on a finished job: the task record is the truth, and a step job
 * re-added after its removal does nothing (the claim script checks the task). BullMQ applies
 * both bounds only when another job of the queue finishes, so `JobQueues.cleanFinished`
 * (every reconciler pass) removes aged jobs on a quiet queue too.
 * @returns the job options, ages in seconds.
 */
export function jobRetention(taskTtlMs: number): JobRetention {
  const ttlS = Math.max(1, Math.ceil(taskTtlMs / 1000));
  const completedAgeS = Math.min(ttlS, 86_400);
  const failedAgeS = Math.min(ttlS, 7 * 86_400);
  return {
    removeOnComplete: { age: completedAgeS, count: KEEP_COMPLETED_JOBS },
    removeOnFail: { age: failedAgeS, count: KEEP_FAILED_JOBS },
    completedAgeS,
    failedAgeS,
  };
}

/** BullMQ's `removeOnComplete` / `removeOnFail` of a step job, and their ages (seconds). */
export type JobRetention = Pick<JobsOptions, 'removeOnComplete' | 'removeOnFail'> & {
  completedAgeS: number;
  failedAgeS: number;
};

/** Highest BullMQ job priority (2^21 - 1); lower runs first, 0 = none (runs before all prioritized jobs). */
export const MAX_JOB_PRIORITY = 2_097_151;

/**
 * Fair share of worker slots (docs/architecture.md "Fair share of workers"): the
 * BullMQ priority of a step job is its principal's outstanding-task count when it is enqueued
 * (`TaskStore.reserveOutstanding(...).count`, or `outstandingCount` for a resumed step), so a
 * principal's n-th queued task waits behind every other principal's first n. Clamped to
 * [1, MAX_JOB_PRIORITY]: never 0, which would run before every prioritized job.
 */
export function fairPriority(outstanding: number): number {
  if (!Number.isFinite(outstanding)) return MAX_JOB_PRIORITY;
  return Math.min(MAX_JOB_PRIORITY, Math.max(1, Math.floor(outstanding)));
}

/**
 * Events stream cap per queue (`<prefix>:{jobs}:<queue>:events`, BullMQ `streams.events.maxLen`,
 * trimmed approximately). Nothing of this service reads the stream (status lives in the task
 * record, D5); it serves BullMQ tooling only, so it is kept short.
 */
export const EVENTS_MAX_LEN = 200;

/** The queues a gateway or worker writes to. */
export class JobQueues {
  /** Shard 0 of the tools queue (the whole tools queue with one shard). */
  readonly tools: Queue;
  /** Every shard of the tools queue, index = shard (`toolShard`). */
  readonly toolShards: readonly Queue[];
  readonly maintenance: Queue;

  /**
   * @param onError receives connection errors of the queues (log them; BullMQ prints them to
   *                stderr when nobody listens).
   * @param shards  TOOL_QUEUE_SHARDS: how many shards the tools queue has (default 1).
   */
  private readonly retention: JobRetention;

  constructor(
    private readonly connection: RedisClient,
    keyPrefix: string,
    taskTtlMs: number,
    onError: (err: Error) => void = () => undefined,
    shards = 1,
  ) {
    this.retention = jobRetention(taskTtlMs);
    const opts = { connection, prefix: bullPrefix(keyPrefix), streams: { events: { maxLen: EVENTS_MAX_LEN } } };
    this.toolShards = Array.from(
      { length: Math.max(1, shards) },
      (_, i) => new Queue(TOOLS_QUEUE, { ...opts, prefix: toolsPrefix(keyPrefix, i) }),
    );
    this.tools = this.toolShards[0]!;
    this.maintenance = new Queue(MAINTENANCE_QUEUE, opts);
    for (const q of this.toolShards) q.on('error', onError);
    this.maintenance.on('error', onError);
  }

  /**
   * Redis `WAIT` on the queues' connection (every shard's Queue uses the client it was given;
   * BullMQ shares a passed ioredis instance, not a Cluster: see REDIS_WAIT_REPLICAS): how many replicas
   * acknowledged every write made on it so far, after at most `timeoutMs` (REDIS_WAIT_REPLICAS,
   * REDIS_WAIT_TIMEOUT_MS). `WAIT` blocks its connection meanwhile (commands behind it wait).
   */
  async replicasAcked(replicas: number, timeoutMs: number): Promise<number> {
    return Number(await this.connection.call('WAIT', String(replicas), String(timeoutMs)));
  }

  /** The tools-queue shard holding the jobs of `taskId`. */
  toolsFor(taskId: string): Queue {
    return this.toolShards[toolShard(taskId, this.toolShards.length)]!;
  }

  /**
   * Enqueues step `step` of a task (idempotent: same job id).
   * @param opts.priority the principal's outstanding-task count (fair share, see `fairPriority`);
   *        clamped to [1, MAX_JOB_PRIORITY]; default 1 (a step is never unprioritized).
   * @param opts.tool, opts.createdAt, opts.trace carried in the payload (StepJobData).
   */
  async enqueueStep(taskId: string, step: number, opts: { priority?: number } & StepJobExtras = {}): Promise<void> {
    await this.toolsFor(taskId).add(JOB_STEP, { taskId, step, ...extras(opts) } satisfies StepJobData, {
      jobId: stepJobId(taskId, step),
      attempts: 1,
      priority: fairPriority(opts.priority ?? 1),
      removeOnComplete: this.retention.removeOnComplete,
      removeOnFail: this.retention.removeOnFail,
    });
  }

  /**
   * Schedules the end of an `input_required` wait (case B-05.6). No priority on purpose: once due it
   * runs before every queued step (one script call), never behind a principal's backlog.
   */
  async scheduleInputTimeout(taskId: string, step: number, delayMs: number, data: StepJobExtras = {}): Promise<void> {
    await this.toolsFor(taskId).add(
      JOB_INPUT_TIMEOUT,
      { taskId, step, ...extras({ tool: data.tool, createdAt: data.createdAt }) } satisfies StepJobData,
      {
        jobId: `${stepJobId(taskId, step)}.timeout`,
        delay: delayMs,
        attempts: 1,
        removeOnComplete: this.retention.removeOnComplete,
        removeOnFail: this.retention.removeOnFail,
      },
    );
  }

  /** Removes a pending input timeout once the answer came (best effort; the job re-checks anyway). */
  async cancelInputTimeout(taskId: string, step: number): Promise<void> {
    await this.toolsFor(taskId)
      .remove(`${stepJobId(taskId, step)}.timeout`)
      .catch(() => 0);
  }

  /**
   * Removes finished jobs of the tools queue older than their retention age (`jobRetention`),
   * at most `limit` of each kind per shard and call: BullMQ's own age bound runs only when another job
   * finishes, so a queue that went quiet would keep them. The reconciler
   * calls it on every pass. @returns how many completed and failed jobs were removed.
   */
  async cleanFinished(limit = 1000): Promise<{ completed: number; failed: number }> {
    const removed = await Promise.all(
      this.toolShards.flatMap((q) => [
        q
          .clean(this.retention.completedAgeS * 1000, limit, 'completed')
          .then((ids) => ({ completed: ids.length, failed: 0 })),
        q
          .clean(this.retention.failedAgeS * 1000, limit, 'failed')
          .then((ids) => ({ completed: 0, failed: ids.length })),
      ]),
    );
    return removed.reduce((a, b) => ({ completed: a.completed + b.completed, failed: a.failed + b.failed }), {
      completed: 0,
      failed: 0,
    });
  }

  /**
   * BullMQ state of a step's job (`unknown` when it does not exist). Looked up on the task's
   * shard, then on the others: a job enqueued before TOOL_QUEUE_SHARDS changed is on the shard of
   * the old count, and the reconciler must not take it for lost.
   */
  async stepState(taskId: string, step: number): Promise<string> {
    const home = this.toolsFor(taskId);
    const state = await home.getJobState(stepJobId(taskId, step));
    if (state !== 'unknown' || this.toolShards.length === 1) return state;
    for (const q of this.toolShards) {
      if (q === home) continue;
      const s = await q.getJobState(stepJobId(taskId, step));
      if (s !== 'unknown') return s;
    }
    return 'unknown';
  }

  async close(): Promise<void> {
    await Promise.allSettled([...this.toolShards.map((q) => q.close()), this.maintenance.close()]);
  }
}
