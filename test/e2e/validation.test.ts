// @needs redis redis-server
/**
 * Bad input gets a clear error and loses nothing (brief; E-05, M-07, M-08, T-49, D10).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startCluster, startRedis, waitFor, type Cluster, type ThrowawayRedis } from '../support/cluster.js';
import { callTool, getTask, pollTask, roundRobin, rpc, updateTask } from '../support/mcp.js';

describe('answers and continuations are validated', () => {
  let c: Cluster;
  before(async () => {
    c = await startCluster({ gateways: 2, workers: 1 });
  });
  after(async () => c?.stop());

  async function parked(tool: string, args: Record<string, unknown>) {
    const next = roundRobin(c.urls);
    const taskId = (await callTool(next(), tool, args)).body.result!.taskId as string;
    const t = await pollTask(next, taskId, (x) => x.status === 'input_required', 15_000, 50);
    return { taskId, key: Object.keys(t.inputRequests)[0]!, next };
  }

  it('tasks/update: inputResponses missing, null or an array → -32602, task unchanged', async () => {
    const { taskId, next } = await parked('ask_confirm', {});
    for (const bad of [undefined, null, [1]]) {
      const r = await rpc(next(), 'tasks/update', bad === undefined ? { taskId } : { taskId, inputResponses: bad });
      assert.equal(r.body.error?.code, -32602, `inputResponses=${JSON.stringify(bad)}: ${JSON.stringify(r.body)}`);
    }
    assert.equal((await getTask(next(), taskId)).body.result!.status, 'input_required');
  });

  it('an accepted answer that does not match the requested schema → -32602, the question stays open (E-05)', async () => {
    const dr = await parked('deep_research', { topic: 'x' });
    for (const content of [{ audience: 'world' }, { audience: 42 }, {}]) {
      const r = await updateTask(dr.next(), dr.taskId, { [dr.key]: { action: 'accept', content } });
      assert.equal(r.body.error?.code, -32602, `${JSON.stringify(content)}: ${JSON.stringify(r.body)}`);
    }
    const still = await getTask(dr.next(), dr.taskId);
    assert.equal(still.body.result!.status, 'input_required');
    assert.ok(dr.key in still.body.result!.inputRequests);
    const ac = await parked('ask_confirm', {});
    const r = await updateTask(ac.next(), ac.taskId, {
      [ac.key]: { action: 'accept', content: { confirmed: 'definitely not' } },
    });
    assert.equal(r.body.error?.code, -32602);
    // A valid answer still works afterwards.
    const ok = await updateTask(ac.next(), ac.taskId, { [ac.key]: { action: 'accept', content: { confirm: true } } });
    assert.equal(ok.body.result?.resultType, 'complete');
    const done = await pollTask(ac.next, ac.taskId, (t) => t.status === 'completed');
    assert.equal(done.result.content[0].text, 'confirmed: true');
  });

  it('share_report: a retry without the answer asks again with a new state and spends the old one (M-08, N-02), a wrong type is -32602, a replayed retry is refused (M-07)', async () => {
    const url = c.urls[0]!;
    const first = await callTool(url, 'share_report', { channel: '#ops' }, { tasks: false });
    const rs = first.body.result!.requestState as string;
    const retry = (requestState: string, inputResponses?: Record<string, unknown>) =>
      callTool(
        c.urls[1]!,
        'share_report',
        { channel: '#ops' },
        { tasks: false },
        { requestState, ...(inputResponses ? { inputResponses } : {}) },
      );
    const again = await retry(rs);
    assert.equal(again.body.result?.resultType, 'input_required', JSON.stringify(again.body));
    assert.deepEqual(Object.keys(again.body.result!.inputRequests), ['confirm']);
    const rs2 = again.body.result!.requestState as string;
    assert.notEqual(rs2, rs);
    // The re-ask made the first state unusable: it can no longer run the step.
    const stale = await retry(rs, { confirm: { action: 'accept', content: { notify: true } } });
    assert.equal(stale.body.error?.code, -32602, JSON.stringify(stale.body));
    assert.match(stale.body.error!.message, /already used/);
    // A malformed answer is refused without spending the state.
    const wrongType = await retry(rs2, { confirm: { action: 'accept', content: { notify: 'yes' } } });
    assert.equal(wrongType.body.error?.code, -32602);
    const done = await retry(rs2, { confirm: { action: 'accept', content: { notify: true } } });
    assert.equal(done.body.result?.content[0].text, 'Shared the report to #ops and notified its members.');
    const replay = await retry(rs2, { confirm: { action: 'accept', content: { notify: true } } });
    assert.equal(replay.body.error?.code, -32602, JSON.stringify(replay.body));
    assert.match(replay.body.error!.message, /already used/);
  });

  it('tools/call with arguments not an object, or a name not a string → -32602 with a short sentence naming the field (not zod JSON)', async () => {
    const cases = [
      { params: { name: 'add', arguments: [1] }, field: 'params.arguments', received: 'an array' },
      { params: { name: 'countdown', arguments: null }, field: 'params.arguments', received: 'null' },
      { params: { name: 5, arguments: {} }, field: 'params.name', received: 'a number' },
    ];
    for (const { params, field, received } of cases) {
      for (const tasks of [true, false]) {
        const r = await rpc(c.urls[0]!, 'tools/call', params, { tasks });
        const what = `${JSON.stringify(params)} tasks=${tasks}: ${JSON.stringify(r.body)}`;
        assert.equal(r.body.error?.code, -32602, what);
        const message = r.body.error!.message;
        assert.ok(message.startsWith(`Invalid params: ${field} must be`), what);
        assert.ok(message.length < 100 && !/[[{\n]/.test(message), `one short sentence: ${what}`);
        assert.deepEqual(r.body.error!.data, { field, received }, what);
      }
    }
  });

  it('a body nested 200,000 levels deep → 400 -32600, the gateway stays up', async () => {
    const deep = '['.repeat(200_000) + ']'.repeat(200_000);
    const body = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add","arguments":{"a":1,"b":2,"x":${deep}},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`;
    const r = await rpc(c.urls[0]!, 'tools/call', { name: 'add' }, { rawBody: body });
    assert.equal(r.status, 400);
    assert.equal(r.body.error?.code, -32600);
    assert.equal((await callTool(c.urls[0]!, 'add', { a: 1, b: 2 })).body.result?.content[0].text, '1 + 2 = 3');
  });

  it('subscriptions/listen asking for taskIds without the extension → 400 -32021 (T-49)', async () => {
    const r = await rpc(c.urls[0]!, 'subscriptions/listen', { notifications: { taskIds: ['x'] } }, { tasks: false });
    assert.equal(r.status, 400);
    assert.equal(r.body.error?.code, -32021);
    assert.deepEqual(r.body.error?.data?.requiredCapabilities, { extensions: { 'io.modelcontextprotocol/tasks': {} } });
  });
});

describe('a hung Redis (connection up, no answers) → readiness off and 503 + Retry-After (D10)', () => {
  let redis: ThrowawayRedis;
  let c: Cluster;
  before(async () => {
    redis = await startRedis();
    c = await startCluster({ redisUrl: redis.url, gateways: 1, workers: 0 });
  });
  after(async () => {
    redis.proc.kill('SIGCONT');
    await c?.stop();
    await redis?.stop();
  });

  it('SIGSTOP the Redis: /readyz 503 and tasks/get 503 with Retry-After; SIGCONT: recovers', async () => {
    const url = c.urls[0]!;
    const base = url.replace(/\/mcp$/, '');
    const taskId = (await callTool(url, 'slow_echo', { seconds: 1 })).body.result!.taskId as string;
    redis.proc.kill('SIGSTOP');
    try {
      await waitFor(async () => (await fetch(`${base}/readyz`)).status === 503, 8000, 100, 'readiness off');
      const r = await getTask(url, taskId);
      assert.equal(r.status, 503);
      assert.ok(r.headers.get('retry-after'));
      assert.equal(r.body.error?.code, -32603);
    } finally {
      redis.proc.kill('SIGCONT');
    }
    await waitFor(async () => (await fetch(`${base}/readyz`)).status === 200, 8000, 100, 'ready again');
    assert.equal((await getTask(url, taskId)).body.result?.taskId, taskId);
  });
});
