/**
 * Completion webhooks, the sending side: a BullMQ Worker on the `webhooks` queue
 * that POSTs each delivery job's body to its principal's target, signed the Standard Webhooks way
 * (`standardwebhooks`: `webhook-id`, `webhook-timestamp`, `webhook-signature`).
 *
 *  - `webhook-id` is `msg_<taskId>` on every attempt (receivers deduplicate on it); the timestamp
 *    and signature are made fresh for each attempt;
 *  - one attempt waits at most TASK_WEBHOOK_TIMEOUT_MS (10 s) for the answer; redirects are not
 *    followed; any answer but 2xx, a timeout or a network error fails the attempt, and BullMQ
 *    retries it TASK_WEBHOOK_ATTEMPTS times in all with exponential backoff from
 *    TASK_WEBHOOK_BACKOFF_MS;
 *  - the target (URL, secret) comes from this process' configuration, looked up by principal at
 *    send time; a principal without one is skipped (`no_target`, logged);
 *  - failures are logged (`webhook.attempt_failed` each time, `webhook.gave_up` after the last
 *    attempt) and stay listed as failed jobs in the queue view for 7 days. The target is logged
 *    by origin only (a URL's path or query may hold a token).
 */
import { Worker, type Job } from 'bullmq';
import type { RedisClient } from '@mcp-tasks/jobs';
import { Webhook } from 'standardwebhooks';
import { webhookTargetFor, type WebhookConfig } from '@mcp-tasks/config';
import { bullPrefix, webhookMessageId, WEBHOOKS_QUEUE, type WebhookJobData } from '@mcp-tasks/jobs';
import type { Logger } from '@mcp-tasks/observability';

/**
 * A failed attempt: `HTTP <status>` for an answer that is not 2xx (`status` set), `no answer
 * within <n> ms`, or `network error: <code>`. The message becomes the job's failed reason.
 */
export class WebhookDeliveryError extends Error {
  override name = 'WebhookDeliveryError';
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(message);
  }
}

/** What one attempt needs. */
export interface DeliveryOptions {
  url: string;
  secret: string;
  /** ms. */
  timeoutMs: number;
  /** `User-Agent` header. */
  userAgent?: string;
}

/**
 * Sends one signed attempt of `body` with `webhook-id` `msgId`.
 * @returns the HTTP status (2xx).
 * @throws WebhookDeliveryError for any other status, a timeout or a network failure.
 */
export async function deliverOnce(msgId: string, body: string, o: DeliveryOptions, now = new Date()): Promise<number> {
  const signature = new Webhook(o.secret).sign(msgId, now, body);
  let res: Response;
  try {
    res = await fetch(o.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'user-agent': o.userAgent ?? 'mcp-task-service-webhooks',
        'webhook-id': msgId,
        'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
        'webhook-signature': signature,
      },
      body,
      redirect: 'manual',
      signal: AbortSignal.timeout(o.timeoutMs),
    });
  } catch (e) {
    const err = e as Error & { cause?: { code?: string; message?: string } };
    if (err.name === 'TimeoutError' || err.name === 'AbortError')
      throw new WebhookDeliveryError(`no answer within ${o.timeoutMs} ms`);
    throw new WebhookDeliveryError(`network error: ${err.cause?.code ?? err.cause?.message ?? err.message}`);
  }
  // The answer's body is not read: release the connection.
  await res.body?.cancel().catch(() => undefined);
  if (res.status < 200 || res.status > 299) throw new WebhookDeliveryError(`HTTP ${res.status}`, res.status);
  return res.status;
}

/** Origin of a URL for logs (never its path or query). */
function originOf(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return '[invalid]';
  }
}

/**
 * Starts the delivery worker.
 * @param connection a client BullMQ duplicates for its blocking connection (`maxRetriesPerRequest: null`).
 * @returns the BullMQ Worker (close it on shutdown).
 */
export function startWebhookWorker(o: {
  connection: RedisClient;
  keyPrefix: string;
  config: WebhookConfig;
  log: Logger;
}): Worker<WebhookJobData> {
  const { config, log } = o;
  const worker = new Worker<WebhookJobData>(
    WEBHOOKS_QUEUE,
    async (job: Job<WebhookJobData>) => {
      const { taskId, principal, body } = job.data;
      const target = webhookTargetFor(config, principal);
      if (!target) {
        log.warn(
          { taskId, jobId: job.id, principal },
          'webhook.no_target: this worker has no TASK_WEBHOOK_URL or TASK_WEBHOOKS_BY_PRINCIPAL entry for the principal; set the same webhook settings on every process',
        );
        return 'no_target';
      }
      const started = Date.now();
      const status = await deliverOnce(webhookMessageId(taskId), body, {
        url: target.url,
        secret: target.secret,
        timeoutMs: config.timeoutMs,
      });
      log.info(
        {
          taskId,
          jobId: job.id,
          principal,
          target: originOf(target.url),
          status,
          attempt: job.attemptsMade + 1,
          ms: Date.now() - started,
        },
        'webhook.delivered',
      );
      return status;
    },
    {
      connection: o.connection,
      prefix: bullPrefix(o.keyPrefix),
      concurrency: config.concurrency,
      // An attempt may take the whole timeout: the job lock must outlast it.
      lockDuration: Math.max(30_000, config.timeoutMs + 10_000),
    },
  );
  worker.on('failed', (job, err) => {
    if (!job) return;
    const target = webhookTargetFor(config, job.data.principal);
    const fields = {
      taskId: job.data.taskId,
      jobId: job.id,
      principal: job.data.principal,
      target: target ? originOf(target.url) : undefined,
      attempt: job.attemptsMade,
      attempts: job.opts.attempts ?? 1,
      err: err.message,
    };
    if (job.attemptsMade >= (job.opts.attempts ?? 1)) log.error(fields, 'webhook.gave_up');
    else log.warn(fields, 'webhook.attempt_failed');
  });
  worker.on('error', (err) => log.warn({ err: err.message }, 'webhook.worker_error'));
  return worker;
}
