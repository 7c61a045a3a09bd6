// @needs redis
/**
 * Completion webhooks against the real shared Redis (own random key prefix, only its keys are
 * deleted) and a real HTTP receiver (issue 11 §5):
 *  - TaskStore tells its terminal listeners of every transition that ended a task, and only
 *    those; a throwing listener does not fail the transition;
 *  - WebhookOutbox enqueues one job `wh.<taskId>` per terminal task, marks the record, and never
 *    enqueues it again (not even after BullMQ dropped the job); no target, no job;
 *  - the reconciler enqueues the delivery of a terminal task whose process died before doing so
 *    (a store without the listener stands for that process), then forgets the task;
 *  - one delivery attempt (`deliverOnce`): signed so the library verifies it, 2xx accepted,
 *    anything else, a redirect, a timeout or a refused connection is a failed attempt.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { Webhook } from 'standardwebhooks';
import { parseWebhookConfig, type WebhookConfig } from '@mcp-tasks/config';
import { createLogger } from '@mcp-tasks/observability';
import { TaskStore, type CreateTaskInput } from '@mcp-tasks/task-store';
import { JobQueues, WebhookOutbox, webhookJobId, webhookMessageId, type WebhookJobData } from '@mcp-tasks/jobs';
import { reconcileOnce } from '../../apps/worker/src/reconcile.js';
import { deliverOnce } from '../../apps/worker/src/webhook-worker.js';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver.js';
import { waitFor } from '../support/cluster.js';
import { deleteKeysUnder } from '../support/redis-keys.js';

const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const PREFIX = `unit-${randomBytes(8).toString('hex')}`;
const SECRET = `whsec_${randomBytes(32).toString('base64')}`;
const log = createLogger('test', 'silent');

let redis: Redis;
let rx: WebhookReceiver;
const closers: (() => Promise<unknown>)[] = [];

function webhookConfig(env: Record<string, string>): WebhookConfig {
  const c = parseWebhookConfig(env);
  if ('problem' in c) throw new Error(c.problem);
  return c;
}

const input = (owner = 'key:alice'): CreateTaskInput => ({
  owner,
  tool: 'countdown',
  args: { seconds: 1 },
  mode: 'task',
  ttlMs: 120_000,
  pollIntervalMs: 1000,
});

/** Creates a task and ends it `completed` through the store (claim + complete). */
async function completedTask(store: TaskStore, owner?: string): Promise<string> {
  const rec = await store.create(input(owner));
  const claim = await store.claimStep(rec.taskId, 1, 'job-token');
  assert.equal(claim.code, 'ok');
  assert.equal(
    (
      await store.complete(
        rec.taskId,
        (claim as { fence: string }).fence,
        { content: [{ type: 'text', text: 'done' }] },
        'Done',
      )
    ).code,
    'ok',
  );
  return rec.taskId;
}

before(async () => {
  redis = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  rx = await startWebhookReceiver();
});
after(async () => {
  for (const c of closers) await c().catch(() => undefined);
  await rx.close();
  await deleteKeysUnder(redis, PREFIX);
  redis.disconnect();
});

describe('TaskStore terminal listeners', () => {
  it('are told of every transition that ended a task, once, and of nothing else; a throwing listener changes nothing', async () => {
    const store = new TaskStore(redis, PREFIX);
    const told: string[] = [];
    store.onTerminal(() => {
      throw new Error('a bad listener');
    });
    store.onTerminal((id) => told.push(id));
    const done = await completedTask(store);
    // A second terminal write is refused and tells nobody.
    assert.equal((await store.fail(done, {}, { code: -32603, message: 'late' }, 'late')).code, 'terminal');
    // Cancel at once (input not yet claimed), then a repeated cancel.
    const cancelled = (await store.create(input())).taskId;
    assert.equal((await store.requestCancel(cancelled)).code, 'cancelled');
    assert.equal((await store.requestCancel(cancelled)).code, 'terminal');
    // A cancel requested on a claimed step does not end it; the worker's markCancelled does.
    const running = (await store.create(input())).taskId;
    const claim = await store.claimStep(running, 1, 'tok');
    assert.equal((await store.requestCancel(running)).code, 'requested');
    assert.deepEqual(told, [done, cancelled]);
    assert.equal((await store.markCancelled(running, (claim as { fence: string }).fence, 'stopped')).code, 'ok');
    assert.deepEqual(told, [done, cancelled, running]);
  });
});

describe('WebhookOutbox', () => {
  let store: TaskStore;
  let outbox: WebhookOutbox;
  before(() => {
    store = new TaskStore(redis, PREFIX);
    outbox = new WebhookOutbox(
      redis,
      PREFIX,
      store,
      webhookConfig({ TASK_WEBHOOK_URL: rx.url, TASK_WEBHOOK_SECRET: SECRET }),
      log,
    );
    closers.push(() => outbox.close());
  });

  it('enqueues one job wh.<taskId> holding the body, marks the record, and never enqueues it again (not even after the job is gone)', async () => {
    const id = await completedTask(store);
    assert.equal(await outbox.enqueue(id), 'queued');
    const job = await outbox.queue.getJob(webhookJobId(id));
    assert.ok(job, 'job exists');
    assert.equal(job.name, 'task.completed');
    const data = job.data as WebhookJobData;
    assert.deepEqual(
      { ...data, body: undefined },
      { taskId: id, tool: 'countdown', principal: 'key:alice', status: 'completed', body: undefined },
    );
    const body = JSON.parse(data.body);
    assert.equal(body.data.statusMessage, 'Done');
    assert.ok(!('result' in body.data));
    assert.equal(job.opts.attempts, 12);
    assert.deepEqual(job.opts.backoff, { type: 'exponential', delay: 2000 });
    assert.ok((await store.get(id))!.webhookQueuedAt! > 0);
    assert.equal(await outbox.enqueue(id), 'already');
    await job.remove(); // what BullMQ's retention does after a day
    assert.equal(await outbox.enqueue(id), 'already');
    assert.equal(await outbox.queue.getJob(webhookJobId(id)), undefined);
  });

  it('a task that is not finished, a principal without a target, a config without webhooks: no job', async () => {
    const live = (await store.create(input())).taskId;
    assert.equal(await outbox.enqueue(live), 'not_terminal');
    assert.equal(await outbox.enqueue('00000000-0000-4000-8000-000000000000'), 'gone');
    const onlyBob = new WebhookOutbox(
      redis,
      PREFIX,
      store,
      webhookConfig({ TASK_WEBHOOKS_BY_PRINCIPAL: JSON.stringify({ 'key:bob': { url: rx.url, secret: SECRET } }) }),
      log,
    );
    closers.push(() => onlyBob.close());
    const alices = await completedTask(store, 'key:alice');
    assert.equal(await onlyBob.enqueue(alices), 'no_target');
    const off = new WebhookOutbox(redis, PREFIX, store, webhookConfig({}), log);
    closers.push(() => off.close());
    assert.equal(await off.enqueue(alices), 'disabled');
    assert.equal(await outbox.queue.getJob(webhookJobId(alices)), undefined);
    assert.equal((await store.get(alices))!.webhookQueuedAt, undefined);
  });

  it('TASK_WEBHOOK_INCLUDE_RESULT=true puts the result of a completed task in the body', async () => {
    const withResult = new WebhookOutbox(
      redis,
      `${PREFIX}-r`,
      store,
      webhookConfig({ TASK_WEBHOOK_URL: rx.url, TASK_WEBHOOK_SECRET: SECRET, TASK_WEBHOOK_INCLUDE_RESULT: 'true' }),
      log,
    );
    closers.push(() => withResult.close());
    const id = await completedTask(store);
    assert.equal(await withResult.enqueue(id), 'queued');
    const job = await withResult.queue.getJob(webhookJobId(id));
    assert.deepEqual(JSON.parse(job!.data.body).data.result, { content: [{ type: 'text', text: 'done' }] });
  });

  it('as a listener, enqueues the delivery of a task as soon as a transition ends it', async () => {
    const listening = new TaskStore(redis, PREFIX);
    listening.onTerminal(outbox.listener);
    const id = await completedTask(listening);
    await waitFor(async () => (await store.get(id))?.webhookQueuedAt, 5000, 20, 'the mark');
    assert.ok(await outbox.queue.getJob(webhookJobId(id)));
  });
});

describe('the reconciler and lost enqueues', () => {
  it('enqueues the delivery of a terminal task whose process died before doing so, then forgets the task', async () => {
    const prefix = `${PREFIX}-rec`;
    const store = new TaskStore(redis, prefix); // no listener: the process that ends the task "dies" before enqueueing
    const queues = new JobQueues(redis, prefix, 120_000);
    const outbox = new WebhookOutbox(
      redis,
      prefix,
      store,
      webhookConfig({ TASK_WEBHOOK_URL: rx.url, TASK_WEBHOOK_SECRET: SECRET }),
      log,
    );
    closers.push(
      () => queues.close(),
      () => outbox.close(),
    );
    const id = await completedTask(store);
    await store.scheduleReconcile(id, 0, 120_000);
    assert.equal(await outbox.queue.getJob(webhookJobId(id)), undefined);
    const deps = {
      store,
      queues,
      log,
      afterMs: 3000,
      inputTimeoutMs: 60_000,
      syncHolderTimeoutMs: 3000,
      maxTtlMs: 120_000,
      webhooks: outbox,
    };
    const counts = await reconcileOnce(deps, Date.now() + 1);
    assert.equal(counts.dropped, 1);
    assert.ok(await outbox.queue.getJob(webhookJobId(id)), 'the reconciler enqueued it');
    assert.ok((await store.get(id))!.webhookQueuedAt);
    assert.equal(await redis.zscore(store.reconcileKey, id), null, 'then dropped from the index');
  });

  it('keeps a terminal task in its index while the enqueue fails', async () => {
    const prefix = `${PREFIX}-rec2`;
    const store = new TaskStore(redis, prefix);
    const queues = new JobQueues(redis, prefix, 120_000);
    closers.push(() => queues.close());
    const id = await completedTask(store);
    await store.scheduleReconcile(id, 0, 120_000);
    const failing = { enqueueRecord: async () => Promise.reject(new Error('Redis went away')) };
    const now = Date.now() + 1;
    await reconcileOnce(
      {
        store,
        queues,
        log,
        afterMs: 3000,
        inputTimeoutMs: 60_000,
        syncHolderTimeoutMs: 3000,
        maxTtlMs: 120_000,
        webhooks: failing,
      },
      now,
    );
    assert.equal(Number(await redis.zscore(store.reconcileKey, id)), now + 3000, 'looked at again on the next pass');
  });
});

describe('deliverOnce (one attempt)', () => {
  const o = () => ({ url: rx.url, secret: SECRET, timeoutMs: 2000 });

  it('POSTs the body signed so that the library verifies it; 2xx is accepted', async () => {
    rx.mode = { kind: 'status', status: 200 };
    const body = JSON.stringify({ type: 'task.completed', data: { taskId: 'x' } });
    assert.equal(await deliverOnce(webhookMessageId('x'), body, o()), 200);
    const w = rx.byId('msg_x').at(-1)!;
    assert.equal(w.body, body);
    assert.deepEqual(new Webhook(SECRET).verify(w.body, w.headers), JSON.parse(body));
  });

  it('any other status, a redirect, a timeout or a refused connection fails the attempt with a reason', async () => {
    rx.mode = { kind: 'status', status: 503 };
    await assert.rejects(deliverOnce('msg_y', '{}', o()), {
      name: 'WebhookDeliveryError',
      message: 'HTTP 503',
      status: 503,
    });
    rx.mode = { kind: 'status', status: 302 };
    await assert.rejects(deliverOnce('msg_y', '{}', o()), { message: 'HTTP 302' });
    rx.mode = { kind: 'hang' };
    const t0 = Date.now();
    await assert.rejects(deliverOnce('msg_y', '{}', { ...o(), timeoutMs: 300 }), {
      message: 'no answer within 300 ms',
    });
    assert.ok(Date.now() - t0 < 1500);
    const closed = await startWebhookReceiver();
    await closed.close();
    await assert.rejects(deliverOnce('msg_y', '{}', { ...o(), url: closed.url }), {
      message: 'network error: ECONNREFUSED',
    });
    rx.mode = { kind: 'status', status: 200 };
  });
});
