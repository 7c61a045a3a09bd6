// @needs redis
/**
 * `subscriptions/listen` with `notifications.taskIds` (Tasks extension §11: T-39, T-41, T-44,
 * T-49; core transport §5: S-01..S-03; clients.md §2.13) on real processes: two gateways, two
 * workers. Status changes are written by a worker process or by the other gateway, and must
 * reach the listen stream held by gateway 1 as full `DetailedTask` notifications.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { startCluster, type Cluster } from '../support/cluster.js';
import { callTool, getTask, pollTask, roundRobin, rpc, TASKS, updateTask } from '../support/mcp.js';
import { sseCall, type SseCall, type SseFrame } from '../support/sse.js';

const SUB_ID = 'io.modelcontextprotocol/subscriptionId';
const KEEPALIVE_MS = 1000;

const messages = (s: SseCall) => s.frames.filter((f) => f.kind === 'message').map((f) => f.message!);
const taskFrames = (s: SseCall, taskId: string) =>
  s.frames.filter((f) => f.message?.method === 'notifications/tasks' && f.message.params?.taskId === taskId);
const statusesOf = (s: SseCall, taskId: string) => taskFrames(s, taskId).map((f) => f.message!.params.status as string);
const isTaskFrame = (taskId: string, status: string) => (f: SseFrame) =>
  f.message?.method === 'notifications/tasks' &&
  f.message.params?.taskId === taskId &&
  f.message.params?.status === status;

/** A notification's DetailedTask without its `_meta`; a tasks/get result without the result envelope. */
const detailed = (params: Record<string, any>) => {
  const { _meta, ...rest } = params;
  return rest;
};
const fromGet = (result: Record<string, any>) => {
  const { _meta, resultType, ...rest } = result;
  return rest;
};

/** Checks the DetailedTask shape of one `notifications/tasks` params object (T-39, §4.2). */
function assertDetailedTask(p: Record<string, any>, subscriptionId: string) {
  const what = JSON.stringify(p);
  assert.equal(p._meta?.[SUB_ID], subscriptionId, `S-03: subscriptionId on every notification: ${what}`);
  assert.equal(typeof p.taskId, 'string', what);
  assert.ok(['working', 'input_required', 'completed', 'failed', 'cancelled'].includes(p.status), what);
  for (const k of ['createdAt', 'lastUpdatedAt'])
    assert.ok(typeof p[k] === 'string' && !Number.isNaN(Date.parse(p[k])), `${k}: ${what}`);
  assert.ok(Date.parse(p.lastUpdatedAt) >= Date.parse(p.createdAt), what);
  assert.equal(p.ttlMs, 86_400_000, what);
  assert.equal(p.pollIntervalMs, 500, what);
  assert.equal(
    'inputRequests' in p,
    p.status === 'input_required',
    `inputRequests exactly when input_required: ${what}`,
  );
  assert.equal('result' in p, p.status === 'completed', `result exactly when completed: ${what}`);
  assert.equal('error' in p, p.status === 'failed', `error exactly when failed: ${what}`);
}

describe('subscriptions/listen for task status, 2 gateways + 2 workers', () => {
  let c: Cluster;
  const open: SseCall[] = [];
  before(async () => {
    c = await startCluster({ gateways: 2, workers: 2, env: { SSE_KEEPALIVE_MS: String(KEEPALIVE_MS) } });
  });
  after(async () => {
    for (const s of open) s.close();
    await c?.stop();
  });

  it("T-39, S-02, S-03, T-41, T-44: ack lists only the caller's real task ids; full DetailedTask on every status change made by a worker or by the other gateway", async (t) => {
    const [g1, g2] = c.urls as [string, string];
    const next = roundRobin(c.urls);

    // Two tasks, created on gateway 2: one parks in input_required, one counts down 3 s.
    const ask = await callTool(g2, 'ask_confirm', { question: 'Ship it?' });
    const askId = ask.body.result?.taskId as string;
    assert.equal(ask.body.result?.resultType, 'task', JSON.stringify(ask.body));
    await pollTask(next, askId, (r) => r.status === 'input_required', 10_000, 50);
    const cd = await callTool(g2, 'countdown', { seconds: 3 });
    const cdId = cd.body.result?.taskId as string;
    assert.equal(cd.body.result?.resultType, 'task', JSON.stringify(cd.body));
    // A synchronous call's internal record (mode sync): the caller cannot poll it, so it cannot
    // subscribe to it either (T-44).
    const sync = callTool(g1, 'slow_echo', { seconds: 4, quiet: true }, { tasks: false });
    const syncId = (
      await c.gateways[0]!.waitLog((l) => l.msg === 'task.created' && l.tool === 'slow_echo' && l.mode === 'sync', 5000)
    ).taskId as string;

    const listenId = `listen-${randomUUID()}`;
    const unknownId = randomUUID();
    const s = sseCall(
      g1,
      'subscriptions/listen',
      { notifications: { taskIds: [askId, cdId, unknownId, 'not-a-uuid', syncId] } },
      { id: listenId },
    );
    open.push(s);
    const res = await s.response;
    assert.equal(res.status, 200, s.raw());
    assert.match(String(res.headers['content-type']), /^text\/event-stream/);

    // S-02: the acknowledgement is the first message, naming exactly the two real task ids.
    await s.waitFrame((f) => f.kind === 'message', 5000);
    const ack = messages(s)[0]!;
    assert.equal(ack.method, 'notifications/subscriptions/acknowledged', JSON.stringify(ack));
    assert.equal(ack.id, undefined, 'the ack is a notification');
    assert.deepEqual([...ack.params.notifications.taskIds].sort(), [askId, cdId].sort(), JSON.stringify(ack.params));
    assert.equal(ack.params._meta?.[SUB_ID], listenId, 'S-03 on the ack');

    // The current state of each granted task right after the ack.
    const parked = (await s.waitFrame(isTaskFrame(askId, 'input_required'), 5000)).message!.params;
    assertDetailedTask(parked, listenId);
    const parkedGet = await getTask(g2, askId);
    assert.deepEqual(detailed(parked), fromGet(parkedGet.body.result!), 'the notification is what tasks/get returns');
    const [key] = Object.keys(parked.inputRequests);
    assert.equal(parked.inputRequests[key!].method, 'elicitation/create', JSON.stringify(parked.inputRequests));

    // The countdown: working, then completed with its result, written by a worker process.
    const working = (await s.waitFrame(isTaskFrame(cdId, 'working'), 5000)).message!.params;
    assertDetailedTask(working, listenId);
    const doneFrame = await s.waitFrame(isTaskFrame(cdId, 'completed'), 10_000);
    const completed = doneFrame.message!.params;
    assertDetailedTask(completed, listenId);
    assert.equal(completed.result?.content?.[0]?.text, 'Countdown from 3 finished.', JSON.stringify(completed));
    assert.notEqual(completed.result?.isError, true);
    const cdGet = await getTask(g2, cdId);
    assert.deepEqual(
      detailed(completed),
      fromGet(cdGet.body.result!),
      'the completed notification is what tasks/get returns',
    );
    // The worker's log line can trail the notification through its stdout pipe on a loaded
    // machine: wait for it (on whichever worker ran the step) rather than read what has arrived.
    const stepDone = await Promise.any(
      c.workers.map((w) => w.waitLog((l) => l.msg === 'step.completed' && l.taskId === cdId, 10_000)),
    ).catch(() => undefined);
    assert.ok(stepDone, 'a worker process completed the countdown');
    const lagMs = doneFrame.at - Date.parse(String(stepDone.time));
    t.diagnostic(`countdown completed on a worker → notification on gateway 1: ${lagMs} ms`);
    assert.ok(lagMs < 1000, `pushed, not found by the ${5000} ms backstop re-read: ${lagMs} ms`);
    assert.deepEqual(statusesOf(s, cdId), ['working', 'completed']);

    // Answer the question on gateway 2: the stream on gateway 1 sees working, then completed.
    const upd = await updateTask(g2, askId, { [key!]: { action: 'accept', content: { confirm: true } } });
    assert.equal(upd.status, 200, JSON.stringify(upd.body));
    assert.equal(upd.body.error, undefined, JSON.stringify(upd.body));
    const askDone = (await s.waitFrame(isTaskFrame(askId, 'completed'), 10_000)).message!.params;
    assertDetailedTask(askDone, listenId);
    assert.equal(askDone.result?.content?.[0]?.text, 'confirmed: true', JSON.stringify(askDone));
    assert.deepEqual(statusesOf(s, askId), ['input_required', 'working', 'completed']);
    for (const f of taskFrames(s, askId)) assertDetailedTask(f.message!.params, listenId);

    // T-41 / H-24 / S-01: nothing but the ack and task notifications (the countdown reported
    // progress the whole time); never a frame for an id that was not granted.
    for (const m of messages(s)) {
      assert.ok(
        ['notifications/subscriptions/acknowledged', 'notifications/tasks'].includes(m.method),
        `unexpected message on the listen stream: ${JSON.stringify(m)}`,
      );
      assert.equal(m.params?._meta?.[SUB_ID], listenId, 'S-03');
    }
    for (const id of [unknownId, syncId]) assert.equal(taskFrames(s, id).length, 0, `a frame for ${id}`);
    assert.equal(s.final(), undefined, 'no final result while the subscription is open');
    // clients.md §2.13: keep-alive comments hold the stream open.
    assert.ok(
      s.frames.some((f) => f.kind === 'comment' && f.text === 'keepalive'),
      'keep-alive comments',
    );

    const r = await sync;
    assert.equal(r.body.result?.content?.[0]?.text, 'echo: ');
    // The subscription is held on Redis while the stream is open, and dropped when it closes.
    const numsub = async (id: string) =>
      Number(((await c.redis.pubsub('NUMSUB', `${c.prefix}:task:${id}`)) as (string | number)[])[1]);
    assert.ok((await numsub(askId)) >= 1, 'gateway 1 subscribes to the task channel');
    s.close();
    assert.equal((await s.done).how, 'closed');
    await c.gateways[0]!.waitLog((l) => l.msg === 'listen.closed' && l.subscriptionId === listenId, 3000);
    assert.equal(await numsub(askId), 0, 'closing the stream drops the subscription');
  });

  it('S-02 under a race: a status change while the listen is being set up (100 ids, update sent 0-27 ms after the listen) still gets the SSE headers and the ack first, then states in order', async () => {
    const [g1, g2] = c.urls as [string, string];
    const failures: string[] = [];
    const raced: string[] = [];
    for (let attempt = 0; attempt < 10; attempt++) {
      const ask = await callTool(g2, 'ask_confirm', {});
      const askId = ask.body.result?.taskId as string;
      raced.push(askId);
      const parked = await pollTask(roundRobin([g2]), askId, (r) => r.status === 'input_required', 10_000, 20);
      const key = Object.keys(parked.inputRequests)[0]!;
      const listenId = `race-${attempt}`;
      const s = sseCall(
        g1,
        'subscriptions/listen',
        { notifications: { taskIds: [askId, ...Array.from({ length: 99 }, () => randomUUID())] } },
        { id: listenId },
      );
      open.push(s);
      await new Promise((r) => setTimeout(r, attempt * 3));
      await updateTask(g2, askId, { [key]: { action: 'accept', content: { confirm: true } } });
      await s.waitFrame(isTaskFrame(askId, 'completed'), 5000).catch(() => undefined);
      const res = await s.response.catch(() => undefined);
      const seq = messages(s).map((m) => (m.method === 'notifications/tasks' ? m.params.status : m.method));
      const statuses = statusesOf(s, askId);
      const inOrder = statuses.every(
        (st, i) =>
          i === 0 ||
          ['input_required', 'working', 'completed'].indexOf(st) >
            ['input_required', 'working', 'completed'].indexOf(statuses[i - 1]!),
      );
      const ok =
        /^text\/event-stream/.test(String(res?.headers['content-type'])) &&
        seq[0] === 'notifications/subscriptions/acknowledged' &&
        statuses.at(-1) === 'completed' &&
        inOrder &&
        messages(s).every((m) => m.params?._meta?.[SUB_ID] === listenId);
      if (!ok)
        failures.push(
          `update after ${attempt * 3} ms: content-type ${res?.headers['content-type']}, messages ${seq.join(' → ') || '(none)'}`,
        );
      s.close();
    }
    const errors = [
      ...new Set(
        c.gateways[0]!.logs.filter((l) => Number(l.level) >= 50).map((l) =>
          String((l.err as { message?: string })?.message ?? l.msg),
        ),
      ),
    ];
    // Every stream is closed: gateway 1 holds no subscription to these tasks' channels any more.
    await new Promise((r) => setTimeout(r, 300));
    const numsub = (await c.redis.pubsub('NUMSUB', ...raced.map((id) => `${c.prefix}:task:${id}`))) as (
      string | number
    )[];
    const leaked = raced.filter((_, i) => Number(numsub[2 * i + 1]) > 0);
    assert.deepEqual(
      { brokenStreams: failures, gatewayErrors: errors, channelsStillSubscribed: leaked.length },
      { brokenStreams: [], gatewayErrors: [], channelsStillSubscribed: 0 },
    );
  });

  it("a later state stamped earlier (another process's estimate of Redis time, N-11) is still sent: working at step 2, then cancelled stamped 900 ms before it", async () => {
    // The gateway and the worker stamp lastUpdatedAt each from its own RedisClock; a worker's
    // terminal write right after a gateway's `working` can carry an earlier stamp. Written here
    // directly, each write announced on the task's channel as the scripts do.
    const [g1, g2] = c.urls as [string, string];
    const ask = await callTool(g2, 'ask_confirm', { question: 'Stamped?' });
    const askId = ask.body.result?.taskId as string;
    const parked = await pollTask(
      () => g2,
      askId,
      (r) => r.status === 'input_required',
      10_000,
      50,
    );
    const s = sseCall(
      g1,
      'subscriptions/listen',
      { notifications: { taskIds: [askId] } },
      { id: `listen-${randomUUID()}` },
    );
    open.push(s);
    await s.waitFrame(isTaskFrame(askId, 'input_required'), 5000);
    const key = `${c.prefix}:{t:${askId}}:task`;
    const channel = `${c.prefix}:task:${askId}`;
    const step = Number(await c.redis.hget(key, 'step'));
    const at = Date.parse(parked.lastUpdatedAt) + 5000;
    await c.redis.hset(key, { status: 'working', step: String(step + 1), lastUpdatedAt: String(at) });
    await c.redis.publish(channel, 'working');
    await s.waitFrame(isTaskFrame(askId, 'working'), 5000);
    await c.redis.hset(key, {
      status: 'cancelled',
      statusMessage: 'Cancelled by the test',
      lastUpdatedAt: String(at - 900),
    });
    await c.redis.publish(channel, 'cancelled');
    const end = (await s.waitFrame(isTaskFrame(askId, 'cancelled'), 5000)).message!.params;
    assert.equal(end.statusMessage, 'Cancelled by the test');
    assert.deepEqual(statusesOf(s, askId), ['input_required', 'working', 'cancelled']);
  });

  it('T-49: taskIds without declaring the extension on the request → HTTP 400, -32021 naming the extension (both gateways)', async () => {
    const task = await callTool(c.urls[0]!, 'countdown', { seconds: 1 });
    const taskId = task.body.result?.taskId as string;
    for (const url of c.urls) {
      const r = await rpc(
        url,
        'subscriptions/listen',
        { notifications: { taskIds: [taskId] } },
        { tasks: false, id: 'no-ext' },
      );
      assert.equal(r.status, 400, JSON.stringify(r.body));
      assert.equal(r.body.id, 'no-ext');
      assert.equal(r.body.error?.code, -32021, JSON.stringify(r.body));
      assert.deepEqual(r.body.error?.data?.requiredCapabilities?.extensions?.[TASKS], {}, JSON.stringify(r.body));
    }
  });

  it('taskIds that is not an array of strings → -32602 (HTTP 200), no stream', async () => {
    for (const taskIds of ['00000000-0000-4000-8000-000000000000', { a: 1 }, [1, 2]]) {
      const r = await rpc(c.urls[1]!, 'subscriptions/listen', { notifications: { taskIds } }, { id: 'bad-ids' });
      assert.equal(r.status, 200, `${JSON.stringify(taskIds)}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body.id, 'bad-ids');
      assert.equal(r.body.error?.code, -32602, `${JSON.stringify(taskIds)}: ${JSON.stringify(r.body)}`);
      assert.doesNotMatch(r.contentType, /event-stream/);
    }
  });

  it('H-15: Mcp-Method that does not match the body (tools/list) → HTTP 400, -32020', async () => {
    const r = await rpc(
      c.urls[0]!,
      'subscriptions/listen',
      { notifications: { taskIds: [randomUUID()] } },
      { headers: { 'mcp-method': 'tools/list' } },
    );
    assert.equal(r.status, 400, JSON.stringify(r.body));
    assert.equal(r.body.error?.code, -32020, JSON.stringify(r.body));
  });

  it('a listen without taskIds ({toolsListChanged: true}) is answered by the SDK: 200 and an acknowledgement (S-02)', async () => {
    const listenId = `plain-${randomUUID()}`;
    const s = sseCall(
      c.urls[1]!,
      'subscriptions/listen',
      { notifications: { toolsListChanged: true } },
      { id: listenId },
    );
    open.push(s);
    const res = await s.response;
    assert.equal(res.status, 200, s.raw());
    const first = (await s.waitFrame((f) => f.kind === 'message', 5000)).message!;
    assert.equal(first.method, 'notifications/subscriptions/acknowledged', JSON.stringify(first));
    assert.equal(first.params?._meta?.[SUB_ID], listenId);
    const honoured = first.params?.notifications ?? {};
    assert.ok(
      Object.keys(honoured).every((k) => k === 'toolsListChanged'),
      `only a subset of what was asked: ${JSON.stringify(honoured)}`,
    );
    s.close();
  });

  it('gateway SIGTERM: the listen stream gets the final result {resultType: "complete", _meta: {subscriptionId}} and ends normally; the client re-listens on another gateway (transport §5, clients.md §2.13)', async (t) => {
    const g3 = await c.addGateway();
    const ask = await callTool(c.urls[0]!, 'ask_confirm', {});
    const askId = ask.body.result?.taskId as string;
    await pollTask(roundRobin(c.urls), askId, (r) => r.status === 'input_required', 10_000, 50);
    const listenId = `drain-${randomUUID()}`;
    const s = sseCall(g3.url!, 'subscriptions/listen', { notifications: { taskIds: [askId] } }, { id: listenId });
    open.push(s);
    assert.equal((await s.response).status, 200, s.raw());
    await s.waitFrame(isTaskFrame(askId, 'input_required'), 5000);

    const sigAt = Date.now();
    const exited = g3.stop('SIGTERM');
    const end = await s.done;
    const final = s.final();
    assert.ok(final, `no final result; frames: ${JSON.stringify(messages(s))}`);
    assert.equal(final.id, listenId);
    assert.equal(final.error, undefined, JSON.stringify(final));
    assert.equal(final.result?.resultType, 'complete', JSON.stringify(final));
    assert.equal(final.result?._meta?.[SUB_ID], listenId, JSON.stringify(final));
    assert.deepEqual(Object.keys(final.result!).sort(), ['_meta', 'resultType'], JSON.stringify(final));
    assert.equal(messages(s).at(-1), final, 'the final result is the last message');
    assert.equal(end.how, 'end', `the stream ended ${end.how}${end.error ? `: ${end.error.message}` : ''}`);
    t.diagnostic(`SIGTERM → listen stream ended after ${end.at - sigAt} ms`);
    assert.ok(end.at - sigAt < 3000, `ended ${end.at - sigAt} ms after SIGTERM`);
    assert.equal(await exited, 0);

    // The task lives on: the client reopens the subscription on a remaining gateway.
    const again = sseCall(
      c.urls[0]!,
      'subscriptions/listen',
      { notifications: { taskIds: [askId] } },
      { id: `${listenId}-2` },
    );
    open.push(again);
    const ack = (await again.waitFrame((f) => f.kind === 'message', 5000)).message!;
    assert.deepEqual(ack.params?.notifications?.taskIds, [askId]);
    await again.waitFrame(isTaskFrame(askId, 'input_required'), 5000);
    again.close();
  });
});
