/**
 * Completion webhooks, the enqueue side: when a task ends, one delivery job on the
 * `webhooks` queue; workers send it (apps/worker/src/webhook-worker.ts).
 *
 * At least once, never in the task's way:
 *  - every process attaches `WebhookOutbox.listener` to its TaskStore (`onTerminal`), so the
 *    process whose transition ended a task enqueues the delivery right after the script returned,
 *    without the transition's caller waiting for it;
 *  - the job id is `wh.<taskId>`: BullMQ ignores a second add while the job exists, and the
 *    task record remembers the enqueue (`webhookQueuedAt`, set after the add succeeded), so a
 *    later attempt after BullMQ's retention dropped the job does nothing either;
 *  - a process that dies between the transition and the add loses nothing: the reconciler visits
 *    every terminal task of its index and calls `enqueueRecord` for one without `webhookQueuedAt`.
 *
 * The job carries the exact request body (`body`, JSON text) built once from the record, so every
 * attempt sends the same bytes with the same `webhook-id`, even after the task record expired.
 * No URL and no secret ever reach Redis: workers look the target up by principal in their own
 * configuration when they send.
 *
 * Redis keys: `<prefix>:{jobs}:webhooks:*`, owned by BullMQ's retention (below).
 */
import { Queue, type JobsOptions } from 'bullmq';
import type { RedisClient } from './redis.js';
import { webhookTargetFor, type WebhookConfig } from '@mcp-tasks/config';
import { isTerminal, parseRecord, type TaskRecord, type TaskStatus, type TaskStore } from '@mcp-tasks/task-store';
import { bullPrefix, EVENTS_MAX_LEN } from './index.js';

export const WEBHOOKS_QUEUE = 'webhooks';

/** Event types, also the job names: `task.completed`, `task.failed`, `task.cancelled`. */
export type WebhookEventType = `task.${'completed' | 'failed' | 'cancelled'}`;

/** Payload of a delivery job. Shown as is in the queue view: no secret, no URL. */
export interface WebhookJobData {
  taskId: string;
  tool: string;
  principal: string;
  status: TaskStatus;
  /** The exact request body (JSON text), the same on every attempt. */
  body: string;
}

/**
 * The request body (JSON), Standard Webhooks' recommended envelope. Times are ISO 8601 (UTC),
 * like `createdAt` / `lastUpdatedAt` on `tasks/get`.
 */
export interface WebhookBody {
  type: WebhookEventType;
  /** When the task ended (its `lastUpdatedAt`). */
  timestamp: string;
  data: {
    taskId: string;
    tool: string;
    principal: string;
    status: 'completed' | 'failed' | 'cancelled';
    statusMessage?: string;
    createdAt: string;
    lastUpdatedAt: string;
    /** Only with TASK_WEBHOOK_INCLUDE_RESULT=true: the CallToolResult of a completed task. */
    result?: Record<string, unknown>;
    /** Only with TASK_WEBHOOK_INCLUDE_RESULT=true: the JSON-RPC error of a failed task. */
    error?: unknown;
  };
}

/** BullMQ job id of a task's delivery (one per task). */
export function webhookJobId(taskId: string): string {
  return `wh.${taskId}`;
}

/** The `webhook-id` header of a task's delivery: the same on every attempt (Standard Webhooks). */
export function webhookMessageId(taskId: string): string {
  return `msg_${taskId}`;
}

/** Builds the body of a terminal task's delivery. @throws when the task is not terminal. */
export function webhookBody(rec: TaskRecord, includeResult: boolean): WebhookBody {
  if (!isTerminal(rec.status)) throw new Error(`task ${rec.taskId} is ${rec.status}, not terminal`);
  const status = rec.status as WebhookBody['data']['status'];
  const lastUpdatedAt = new Date(rec.lastUpdatedAt).toISOString();
  return {
    type: `task.${status}`,
    timestamp: lastUpdatedAt,
    data: {
      taskId: rec.taskId,
      tool: rec.tool,
      principal: rec.owner,
      status,
      ...(rec.statusMessage ? { statusMessage: rec.statusMessage } : {}),
      createdAt: new Date(rec.createdAt).toISOString(),
      lastUpdatedAt,
      ...(includeResult && rec.result ? { result: rec.result } : {}),
      ...(includeResult && rec.error ? { error: rec.error } : {}),
    },
  };
}

/**
 * Retention of delivery jobs: delivered ones 1 day (at most 10,000), failed ones 7 days (at most
 * 10,000) so failures stay visible in the queue view. Dedup never depends on it (`webhookQueuedAt`).
 */
export const WEBHOOK_RETENTION: Pick<JobsOptions, 'removeOnComplete' | 'removeOnFail'> = {
  removeOnComplete: { age: 86_400, count: 10_000 },
  removeOnFail: { age: 7 * 86_400, count: 10_000 },
};

/** Task hash fields a delivery body is built from (see includes/common.lua). */
const BODY_FIELDS = ['status', 'owner', 'tool', 'createdAt', 'lastUpdatedAt', 'statusMessage', 'webhookQueuedAt'];

/** What `enqueue` did. */
export type EnqueueOutcome = 'queued' | 'already' | 'no_target' | 'not_terminal' | 'gone' | 'disabled';

/** Minimal logger (pino's shape). */
interface Log {
  warn(obj: object, msg: string): void;
  debug(obj: object, msg: string): void;
}

/** Enqueues completion webhooks (see the module comment). One per process, beside its TaskStore. */
export class WebhookOutbox {
  readonly queue: Queue<WebhookJobData>;

  /**
   * @param connection a client BullMQ may share (the process' main client).
   * @param config `config.webhooks`; when nothing is configured `enqueue` does nothing.
   */
  constructor(
    connection: RedisClient,
    keyPrefix: string,
    private readonly store: TaskStore,
    private readonly config: WebhookConfig,
    private readonly log: Log,
  ) {
    this.queue = new Queue<WebhookJobData>(WEBHOOKS_QUEUE, {
      connection,
      prefix: bullPrefix(keyPrefix),
      streams: { events: { maxLen: EVENTS_MAX_LEN } },
    });
    this.queue.on('error', (err) => log.warn({ err: err.message }, 'webhook.queue_error'));
  }

  /** For `TaskStore.onTerminal`: starts `enqueue` and logs its failure (the reconciler repairs it). */
  readonly listener = (taskId: string): void => {
    if (!this.config.enabled) return;
    this.enqueue(taskId).catch((e: Error) => this.log.warn({ taskId, err: e.message }, 'webhook.enqueue_failed'));
  };

  /**
   * Reads the fields of the task the body needs (one HMGET; with TASK_WEBHOOK_INCLUDE_RESULT the
   * whole record and its result key, `TaskStore.get`, so a large result is not read for nothing)
   * and enqueues its delivery (`enqueueRecord`).
   */
  async enqueue(taskId: string): Promise<EnqueueOutcome> {
    if (!this.config.enabled) return 'disabled';
    let rec: TaskRecord | null;
    if (this.config.includeResult) rec = await this.store.get(taskId);
    else {
      const values = await this.store.redis.hmget(this.store.key(taskId), ...BODY_FIELDS);
      const h: Record<string, string> = {};
      BODY_FIELDS.forEach((f, i) => {
        if (values[i] !== null && values[i] !== undefined) h[f] = values[i]!;
      });
      rec = parseRecord(taskId, h);
    }
    return rec ? this.enqueueRecord(rec) : 'gone';
  }

  /**
   * Enqueues the delivery of a terminal task unless it was enqueued before or its principal has
   * no target; then marks the record. Idempotent.
   * @throws the Redis / BullMQ error when the add or the mark failed (call again later).
   */
  async enqueueRecord(rec: TaskRecord): Promise<EnqueueOutcome> {
    if (!this.config.enabled) return 'disabled';
    if (!isTerminal(rec.status)) return 'not_terminal';
    if (rec.webhookQueuedAt !== undefined) return 'already';
    if (!webhookTargetFor(this.config, rec.owner)) return 'no_target';
    const body = webhookBody(rec, this.config.includeResult);
    await this.queue.add(
      body.type,
      { taskId: rec.taskId, tool: rec.tool, principal: rec.owner, status: rec.status, body: JSON.stringify(body) },
      {
        jobId: webhookJobId(rec.taskId),
        attempts: this.config.attempts,
        backoff: { type: 'exponential', delay: this.config.backoffMs },
        ...WEBHOOK_RETENTION,
      },
    );
    await this.store.markWebhookQueued(rec.taskId);
    this.log.debug({ taskId: rec.taskId, jobId: webhookJobId(rec.taskId) }, 'webhook.queued');
    return 'queued';
  }

  async close(): Promise<void> {
    await this.queue.close();
  }
}
