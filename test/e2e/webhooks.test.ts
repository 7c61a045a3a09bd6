// @needs redis
/**
 * Completion webhooks end to end (issue 11 §5): two gateways, two workers, API keys for alice and
 * bob, a global target and a target of bob's own, receivers that are real HTTP servers in this
 * test. Every delivery is checked with the library's own verifier
 * (`new Webhook(secret).verify(body, headers)`).
 *
 *  - every finished task (completed, failed, cancelled by its worker, cancelled at once by a
 *    gateway) gets exactly one accepted delivery, also after reconcile passes that look at it;
 *  - a principal with a target of its own gets its deliveries there, signed with its secret;
 *  - a receiver that answers 500 twice gets the same delivery (same webhook-id, same bytes) a
 *    third time and accepts it; nothing after that; one that is down (connection refused) for
 *    two attempts gets it on the third;
 *  - a receiver that never answers does not delay the task's end: tasks/get shows `completed`
 *    while the delivery is still hanging, and the task takes as long as with a receiver that answers.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { startCluster, sleep, waitFor, type Cluster } from '../support/cluster.js';
import { callTool, cancelTask, getTask, pollTask, roundRobin, type CallOptions } from '../support/mcp.js';
import { startWebhookReceiver, type ReceivedWebhook, type WebhookReceiver } from '../support/webhook-receiver.js';

const ALICE = { token: 'alice-key-0123456789abcdef' } satisfies CallOptions;
const BOB = { token: 'bob-key-0123456789abcdef01' } satisfies CallOptions;
const SECRET = `whsec_${randomBytes(32).toString('base64')}`;
const BOB_SECRET = `whsec_${randomBytes(32).toString('base64')}`;
const BACKOFF_MS = 300;
/** One attempt's timeout: long, so a hanging delivery is visibly still hanging. */
const TIMEOUT_MS = 20_000;
/** RECONCILE_AFTER_MS (3000) + RECONCILE_INTERVAL_MS (1000) of the test env, with a margin. */
const RECONCILE_SPAN_MS = 5500;

const isTerminal = (s: string) => s === 'completed' || s === 'failed' || s === 'cancelled';

/** Verifies a delivery with the library's verifier and returns its parsed body. */
function verified(w: ReceivedWebhook, secret = SECRET): any {
  const payload = new Webhook(secret).verify(w.body, w.headers);
  assert.deepEqual(payload, JSON.parse(w.body));
  return payload;
}

describe('completion webhooks (Standard Webhooks) through two gateways and two workers', () => {
  let c: Cluster;
  let rx: WebhookReceiver;
  let bobRx: WebhookReceiver;
  let next: () => string;

  before(async () => {
    rx = await startWebhookReceiver();
    bobRx = await startWebhookReceiver();
    c = await startCluster({
      gateways: 2,
      workers: 2,
      env: {
        AUTH_API_KEYS: `alice:${ALICE.token},bob:${BOB.token}`,
        TASK_WEBHOOK_URL: rx.url,
        TASK_WEBHOOK_SECRET: SECRET,
        TASK_WEBHOOKS_BY_PRINCIPAL: JSON.stringify({ 'key:bob': { url: bobRx.url, secret: BOB_SECRET } }),
        TASK_WEBHOOK_BACKOFF_MS: String(BACKOFF_MS),
        TASK_WEBHOOK_ATTEMPTS: '5',
        TASK_WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS),
        TASK_WEBHOOK_CONCURRENCY: '2',
      },
    });
    next = roundRobin(c.urls);
  });
  after(async () => {
    await c?.stop();
    await rx?.close();
    await bobRx?.close();
  });

  /** Starts a task as `who` and returns its id. */
  async function start(tool: string, args: Record<string, unknown>, who: CallOptions = ALICE): Promise<string> {
    const r = await callTool(next(), tool, args, who);
    assert.equal(r.body.result?.resultType, 'task', JSON.stringify(r.body));
    return r.body.result!.taskId as string;
  }
  const finished = (taskId: string, who: CallOptions = ALICE) =>
    pollTask(next, taskId, (t) => isTerminal(t.status), 20_000, 50, who);

  it('every finished task gets exactly one valid signed delivery: completed, failed, cancelled by its worker, cancelled at once by a gateway', async () => {
    rx.mode = { kind: 'status', status: 204 };
    const completed = await start('slow_echo', { seconds: 0.2, quiet: true, text: 'hi' });
    const failed = await start('throw_error', { kind: 'protocol', message: 'refused on purpose' });
    const running = await start('countdown', { seconds: 10 });
    const parked = await start('ask_confirm', {});
    await pollTask(next, running, (t) => /1\/10/.test(t.statusMessage ?? ''), 10_000, 50, ALICE);
    await pollTask(next, parked, (t) => t.status === 'input_required', 10_000, 50, ALICE);
    assert.equal((await cancelTask(next(), running, ALICE)).body.result?.resultType, 'complete');
    assert.equal((await cancelTask(next(), parked, ALICE)).body.result?.resultType, 'complete');

    const expected = { [completed]: 'completed', [failed]: 'failed', [running]: 'cancelled', [parked]: 'cancelled' };
    const final: Record<string, Record<string, any>> = {};
    for (const id of Object.keys(expected)) final[id] = await finished(id);
    await waitFor(
      () => Object.keys(expected).every((id) => rx.byId(`msg_${id}`).length >= 1),
      15_000,
      50,
      'a delivery for every task',
    );
    // Reconcile passes look at every one of these terminal tasks meanwhile: no second delivery.
    await sleep(RECONCILE_SPAN_MS);

    for (const [id, status] of Object.entries(expected)) {
      const got = rx.byId(`msg_${id}`);
      assert.equal(got.length, 1, `exactly one delivery for the ${status} task ${id}`);
      const w = got[0]!;
      const body = verified(w);
      assert.throws(
        () => new Webhook(BOB_SECRET).verify(w.body, w.headers),
        /signature/i,
        'another secret does not verify it',
      );
      assert.equal(w.headers['content-type'], 'application/json');
      assert.match(w.headers['webhook-signature']!, /^v1,[A-Za-z0-9+/=]+$/);
      assert.ok(Math.abs(Number(w.headers['webhook-timestamp']) - Date.now() / 1000) < 120);
      const t = final[id]!;
      assert.equal(t.status, status);
      assert.deepEqual(body, {
        type: `task.${status}`,
        timestamp: t.lastUpdatedAt,
        data: {
          taskId: id,
          tool: { [completed]: 'slow_echo', [failed]: 'throw_error', [running]: 'countdown', [parked]: 'ask_confirm' }[
            id
          ],
          principal: 'key:alice',
          status,
          ...(t.statusMessage ? { statusMessage: t.statusMessage } : {}),
          createdAt: t.createdAt,
          lastUpdatedAt: t.lastUpdatedAt,
        },
      });
      assert.ok(
        !('result' in body.data) && !('error' in body.data),
        'no result or error unless TASK_WEBHOOK_INCLUDE_RESULT=true',
      );
    }
    assert.equal(bobRx.received.length, 0, "alice's tasks never reach bob's target");
    // Each was enqueued by the process that ended it (worker or gateway), not repaired later.
    const repaired = c.workers
      .flatMap((w) => w.logs)
      .filter((l) => l.msg === 'reconcile.webhook_queued' && (l.taskId as string) in expected);
    assert.deepEqual(repaired, []);
    const lags = Object.keys(expected).map((id) => rx.byId(`msg_${id}`)[0]!.at - Date.parse(final[id]!.lastUpdatedAt));
    console.log(
      `# delivery after the task ended (completed/failed/cancelled by worker/by gateway): ${lags.join('/')} ms`,
    );
  });

  it('a principal with a target of its own (TASK_WEBHOOKS_BY_PRINCIPAL) gets its deliveries there, signed with its secret', async () => {
    const id = await start('slow_echo', { seconds: 0.1, quiet: true }, BOB);
    await finished(id, BOB);
    await waitFor(() => bobRx.byId(`msg_${id}`).length === 1, 15_000, 50, "bob's delivery");
    const body = verified(bobRx.byId(`msg_${id}`)[0]!, BOB_SECRET);
    assert.equal(body.data.principal, 'key:bob');
    assert.throws(() => new Webhook(SECRET).verify(bobRx.received[0]!.body, bobRx.received[0]!.headers));
    assert.equal(rx.byId(`msg_${id}`).length, 0, "bob's task does not go to the global target");
  });

  it('a receiver that answers 500 twice gets the same delivery a third time (same webhook-id and body, exponential backoff) and nothing after it accepted', async () => {
    rx.mode = { kind: 'fail-first', failures: 2 };
    const id = await start('slow_echo', { seconds: 0.1, quiet: true });
    await finished(id);
    await waitFor(() => rx.byId(`msg_${id}`).some((w) => w.answered === 200), 20_000, 50, 'the accepted third attempt');
    await sleep(4 * BACKOFF_MS + 1000); // a fourth attempt would have come by now
    const got = rx.byId(`msg_${id}`);
    assert.deepEqual(
      got.map((w) => w.answered),
      [500, 500, 200],
    );
    for (const w of got) verified(w);
    assert.equal(new Set(got.map((w) => w.body)).size, 1, 'the same bytes on every attempt');
    assert.ok(got.every((w) => w.headers['webhook-id'] === `msg_${id}`));
    // BullMQ exponential backoff: BACKOFF_MS, then 2 × BACKOFF_MS (a little less is BullMQ's rounding, never much).
    assert.ok(got[1]!.at - got[0]!.at >= BACKOFF_MS - 50, `first retry after ${got[1]!.at - got[0]!.at} ms`);
    assert.ok(got[2]!.at - got[1]!.at >= 2 * BACKOFF_MS - 50, `second retry after ${got[2]!.at - got[1]!.at} ms`);
    // The failures are in the workers' logs.
    const logs = c.workers.flatMap((w) => w.logs).filter((l) => l.taskId === id);
    assert.equal(logs.filter((l) => l.msg === 'webhook.attempt_failed').length, 2, JSON.stringify(logs));
    assert.ok(
      logs
        .filter((l) => l.msg === 'webhook.attempt_failed')
        .every((l) => l.err === 'HTTP 500' && l.target === new URL(rx.url).origin),
    );
    assert.equal(logs.filter((l) => l.msg === 'webhook.delivered').length, 1);
    assert.ok(!JSON.stringify(logs).includes('receiver-path-secret'), 'the target URL is logged by origin only');
  });

  it('a receiver that is down (connection refused) for the first two attempts gets the delivery on the third', async () => {
    rx.mode = { kind: 'status', status: 204 };
    await rx.down();
    const id = await start('slow_echo', { seconds: 0.1, quiet: true });
    try {
      await finished(id);
      const refused = () =>
        c.workers.flatMap((w) => w.logs).filter((l) => l.taskId === id && l.msg === 'webhook.attempt_failed');
      await waitFor(() => refused().length >= 2, 15_000, 10, 'two refused attempts');
      assert.ok(
        refused().every((l) => l.err === 'network error: ECONNREFUSED'),
        JSON.stringify(refused()),
      );
    } finally {
      await rx.up(); // the third attempt comes 4 × BACKOFF_MS after the second
    }
    await waitFor(() => rx.byId(`msg_${id}`).length === 1, 15_000, 50, 'the third attempt');
    const w = rx.byId(`msg_${id}`)[0]!;
    assert.equal(verified(w).data.taskId, id);
    assert.equal(w.answered, 204);
    await sleep(8 * BACKOFF_MS);
    assert.equal(rx.byId(`msg_${id}`).length, 1, 'nothing after it was accepted');
    // The third attempt, unless this process was too slow to bring the receiver up in time.
    const failedBefore = c.workers
      .flatMap((x) => x.logs)
      .filter((l) => l.taskId === id && l.msg === 'webhook.attempt_failed').length;
    const delivered = c.workers.flatMap((x) => x.logs).filter((l) => l.taskId === id && l.msg === 'webhook.delivered');
    assert.deepEqual(
      delivered.map((l) => l.attempt),
      [failedBefore + 1],
    );
    assert.ok(failedBefore >= 2);
  });

  it("a receiver that never answers does not delay the task's end: completed on tasks/get while its delivery hangs, as fast as with a receiver that answers", async () => {
    const run = async (n: number) => {
      const ids = await Promise.all(Array.from({ length: n }, () => start('slow_echo', { seconds: 0.5, quiet: true })));
      const ends = await Promise.all(ids.map((id) => finished(id)));
      return { ids, ms: ends.map((t) => Date.parse(t.lastUpdatedAt) - Date.parse(t.createdAt)) };
    };
    rx.mode = { kind: 'status', status: 204 };
    const answering = await run(3);
    // Their deliveries are answered before the receiver starts hanging.
    await waitFor(
      () => answering.ids.every((id) => rx.byId(`msg_${id}`).some((w) => w.answered === 204)),
      15_000,
      50,
      'the answered deliveries',
    );
    rx.mode = { kind: 'hang' };
    const hanging = await run(3); // 3 deliveries, 2 at a time (TASK_WEBHOOK_CONCURRENCY): all stuck
    const stuck = () => hanging.ids.filter((id) => rx.byId(`msg_${id}`).some((w) => w.answered === undefined));
    await waitFor(() => stuck().length >= 2, 15_000, 50, 'deliveries hanging at the receiver');
    // The receiver still holds these requests, and every task already reads completed.
    for (const id of hanging.ids) assert.equal((await getTask(next(), id, ALICE)).body.result?.status, 'completed');
    assert.ok(stuck().length >= 2 && rx.hanging >= 2, `deliveries still hanging: ${stuck().length}`);
    // A task whose end waited for its receiver would take TIMEOUT_MS (20 s) or more.
    const worst = (ms: number[]) => Math.max(...ms);
    console.log(
      `# task duration (created → completed), slow_echo 0.5 s: receiver answering ${answering.ms.join('/')} ms, receiver hanging ${hanging.ms.join('/')} ms`,
    );
    assert.ok(worst(hanging.ms) < TIMEOUT_MS / 4, `tasks took ${hanging.ms.join('/')} ms with a hanging receiver`);
    assert.ok(
      worst(hanging.ms) < worst(answering.ms) + 2000,
      `hanging ${hanging.ms.join('/')} ms vs answering ${answering.ms.join('/')} ms`,
    );
  });
});
