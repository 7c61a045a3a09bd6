// @needs redis
/**
 * Clients that do not declare the Tasks extension (issue 2 §7): a task-capable tool runs on a
 * worker while the gateway holds the request, and the CallToolResult comes back; closing the
 * request cancels the job (C-01). Also the MRTR form of the same tool (D2) and inline tools.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startCluster, waitFor, type Cluster } from '../support/cluster.js';
import { callTool, rpc } from '../support/mcp.js';

describe('synchronous calls (no Tasks extension on the request)', () => {
  let c: Cluster;
  before(async () => {
    c = await startCluster({ gateways: 2, workers: 2 });
  });
  after(async () => c?.stop());

  /** Finds the internal sync task record of a tool (the client never sees its id). */
  async function syncTasks(tool: string) {
    const keys = (await c.keys()).filter((k) => k.endsWith(':task'));
    const out: Record<string, string>[] = [];
    for (const k of keys) {
      const h = await c.redis.hgetall(k);
      if (h.tool === tool && h.mode === 'sync') out.push({ ...h, taskId: /\{t:([^}]+)\}/.exec(k)![1]! });
    }
    return out;
  }

  /** What the workers logged about the reconciler and `taskId`, for a failure's message. */
  function reconcileLogs(taskId: string) {
    return JSON.stringify(
      c.workers.flatMap((w, i) =>
        w.logs
          .filter(
            (l) =>
              l.taskId === taskId || String(l.msg).startsWith('reconcile') || String(l.msg).startsWith('maintenance'),
          )
          .slice(-30)
          .map((l) => ({
            worker: i,
            time: l.time,
            msg: l.msg,
            ...(l.taskId ? { taskId: l.taskId } : {}),
            ...(l.redisBackForMs !== undefined ? { redisBackForMs: l.redisBackForMs } : {}),
            ...(l.err ? { err: l.err } : {}),
          })),
      ),
    );
  }

  it('countdown returns its CallToolResult, never a task (T-01)', async () => {
    const r = await callTool(c.urls[0]!, 'countdown', { seconds: 2 }, { tasks: false });
    assert.equal(r.status, 200);
    assert.equal(r.body.result?.resultType, 'complete');
    assert.ok(!('taskId' in r.body.result!));
    assert.equal(r.body.result!.content[0].text, 'Countdown from 2 finished.');
  });

  it('a protocol error in the tool is the JSON-RPC error of the call', async () => {
    const r = await callTool(c.urls[1]!, 'protocol_error_job', {}, { tasks: false });
    assert.equal(r.body.error?.code, -32603);
    assert.match(r.body.error!.message, /protocol_error_job/);
  });

  it('closing the request cancels the job on the worker (C-01)', async () => {
    const ac = new AbortController();
    const pending = callTool(
      c.urls[0]!,
      'slow_echo',
      { seconds: 20, text: 'disconnect-me' },
      { tasks: false, signal: ac.signal },
    ).catch((e) => e);
    const [task] = await waitFor(
      async () => {
        const t = await syncTasks('slow_echo');
        return t.length && t[0]!.claimedStep ? t : undefined;
      },
      10_000,
      50,
      'the sync task to start on a worker',
    );
    const started = Date.now();
    ac.abort();
    assert.equal((await pending).name, 'AbortError');
    const final = await waitFor(
      async () => {
        const [t] = await syncTasks('slow_echo');
        return t && t.status !== 'working' ? t : undefined;
      },
      3000,
      20,
      'the task to leave working',
    );
    assert.equal(final.status, 'cancelled');
    assert.ok(Date.now() - started < 2000, 'cancelled within 2 s of the disconnect');
    assert.ok(!final.result, 'no result was recorded');
    // Exactly one worker ran it, and its job's AbortSignal fired (the tool stopped).
    await waitFor(
      () => c.workers.some((w) => w.logs.some((l) => l.msg === 'step.cancelled' && l.taskId === task!.taskId)),
      3000,
      20,
      'step.cancelled log',
    );
    const ranOn = c.workers.filter((w) => w.logs.some((l) => l.msg === 'step.started' && l.taskId === task!.taskId));
    assert.equal(ranOn.length, 1);
    assert.ok(
      !ranOn[0]!.logs.some((l) => l.msg === 'step.completed' && l.taskId === task!.taskId),
      'the step never completed',
    );
  });

  it('a synchronous call whose gateway is killed is cancelled by the reconciler (C-01: the client stream closed)', async () => {
    const g = await c.addGateway();
    const pending = callTool(g.url!, 'slow_echo', { seconds: 30, text: 'orphan' }, { tasks: false }).catch((e) => e);
    const task = await waitFor(
      async () => {
        const t = (await syncTasks('slow_echo')).find(
          (x) => x.text === undefined && x.args?.includes('orphan') && x.claimedStep,
        );
        return t;
      },
      10_000,
      50,
      'the orphan-to-be to start',
    );
    await g.kill();
    await pending;
    const killedAt = Date.now();
    // SYNC_HOLDER_TIMEOUT_MS=3000, RECONCILE_AFTER_MS=3000, RECONCILE_INTERVAL_MS=1000 in the test env.
    const final = await waitFor(
      async () => {
        const t = (await syncTasks('slow_echo')).find((x) => x.taskId === task.taskId);
        return t && t.status !== 'working' ? t : undefined;
      },
      15_000,
      100,
      () => `the orphaned call to be cancelled; the workers' reconcile logs: ${reconcileLogs(task.taskId!)}`,
    );
    assert.equal(final.status, 'cancelled');
    assert.match(final.statusMessage ?? '', /the request that started it is gone/, JSON.stringify(final));
    assert.ok(Date.now() - killedAt < 12_000);
    await waitFor(
      () => c.workers.some((w) => w.logs.some((l) => l.msg === 'step.cancelled' && l.taskId === task.taskId)),
      3000,
      50,
      'the worker stopped the tool',
    );
  });

  it("a killed gateway's call is cancelled within SYNC_HOLDER_TIMEOUT_MS + RECONCILE_INTERVAL_MS, however long RECONCILE_AFTER_MS is", async () => {
    const c2 = await startCluster({
      gateways: 1,
      workers: 1,
      env: { RECONCILE_AFTER_MS: '20000', SYNC_HOLDER_TIMEOUT_MS: '3000', RECONCILE_INTERVAL_MS: '1000' },
    });
    try {
      const g = c2.gateways[0]!;
      const pending = callTool(g.url!, 'slow_echo', { seconds: 60, text: 'orphan2' }, { tasks: false }).catch((e) => e);
      const started = await c2.workers[0]!.waitLog((l) => l.msg === 'step.started', 10_000);
      await g.kill();
      await pending;
      const killedAt = Date.now();
      const key = `${c2.prefix}:{t:${started.taskId}}:task`;
      await waitFor(
        async () => (await c2.redis.hget(key, 'status')) === 'cancelled',
        15_000,
        100,
        'the orphaned call to be cancelled',
      );
      const took = Date.now() - killedAt;
      assert.ok(
        took < 3000 + 1000 + 3000,
        `cancelled ${took} ms after the kill (hold 3 s + one 1 s pass, with slack; RECONCILE_AFTER_MS is 20 s)`,
      );
    } finally {
      await c2.stop();
    }
  });

  it('deep_research without the extension: MRTR input_required, then the report on the retry (D2)', async () => {
    const first = await callTool(c.urls[0]!, 'deep_research', { topic: 'bees' }, { tasks: false });
    assert.equal(first.body.result?.resultType, 'input_required', JSON.stringify(first.body));
    const [key] = Object.keys(first.body.result!.inputRequests);
    assert.ok(key);
    assert.equal(typeof first.body.result!.requestState, 'string');
    const second = await callTool(
      c.urls[1]!,
      'deep_research',
      { topic: 'bees' },
      { tasks: false },
      {
        inputResponses: { [key!]: { action: 'accept', content: { audience: 'team' } } },
        requestState: first.body.result!.requestState,
      },
    );
    assert.equal(second.body.result?.resultType, 'complete', JSON.stringify(second.body));
    assert.match(second.body.result!.content[0].text, /bees/);
    assert.match(second.body.result!.content[0].text, /team/);
  });

  it('the same MRTR retry sent twice: the second copy is refused (single use, M-07, case B-17h) and the first completes', async () => {
    const first = await callTool(c.urls[0]!, 'deep_research', { topic: 'ants' }, { tasks: false });
    const [key] = Object.keys(first.body.result!.inputRequests);
    const extra = {
      inputResponses: { [key!]: { action: 'accept', content: { audience: 'company' } } },
      requestState: first.body.result!.requestState,
    };
    const a = callTool(c.urls[0]!, 'deep_research', { topic: 'ants' }, { tasks: false }, extra);
    await new Promise((r) => setTimeout(r, 300));
    const b = await callTool(c.urls[1]!, 'deep_research', { topic: 'ants' }, { tasks: false }, extra);
    assert.equal(b.body.error?.code, -32602, JSON.stringify(b.body));
    assert.match(b.body.error!.message, /already used/);
    const ra = await a;
    assert.equal(ra.body.result?.resultType, 'complete', JSON.stringify(ra.body));
    assert.ok(!ra.body.result!.isError, JSON.stringify(ra.body));
    assert.match(ra.body.result!.content[0].text, /ants/);
  });

  it('a tampered requestState is rejected with -32602 (M-05)', async () => {
    const first = await callTool(c.urls[0]!, 'share_report', { channel: '#general' }, { tasks: false });
    assert.equal(first.body.result?.resultType, 'input_required');
    const rs = first.body.result!.requestState as string;
    const flipped = rs.slice(0, -2) + (rs.at(-2) === 'A' ? 'B' : 'A') + rs.at(-1);
    const bad = await callTool(
      c.urls[1]!,
      'share_report',
      { channel: '#general' },
      { tasks: false },
      {
        inputResponses: { confirm: { action: 'accept', content: { notify: true } } },
        requestState: flipped,
      },
    );
    assert.equal(bad.body.error?.code, -32602);
    const good = await callTool(
      c.urls[1]!,
      'share_report',
      { channel: '#general' },
      { tasks: false },
      {
        inputResponses: { confirm: { action: 'accept', content: { notify: true } } },
        requestState: rs,
      },
    );
    assert.equal(good.body.result?.content[0].text, 'Shared the report to #general and notified its members.');
    // The state is bound to the arguments: another channel with the same state is refused.
    const other = await callTool(
      c.urls[0]!,
      'share_report',
      { channel: '#random' },
      { tasks: false },
      {
        inputResponses: { confirm: { action: 'accept', content: {} } },
        requestState: rs,
      },
    );
    assert.equal(other.body.error?.code, -32602);
  });

  it('add answers inline; an unknown tool gives -32602, bad arguments an isError result (SEP-1303)', async () => {
    const r = await callTool(c.urls[0]!, 'add', { a: 2, b: 40 }, { tasks: false });
    assert.equal(r.body.result?.content[0].text, '2 + 40 = 42');
    assert.equal((await callTool(c.urls[0]!, 'nope', {})).body.error?.code, -32602);
    const bad = await callTool(c.urls[0]!, 'countdown', { seconds: 99 });
    assert.equal(bad.body.result?.isError, true, JSON.stringify(bad.body));
    assert.match(bad.body.result?.content[0].text, /^Invalid arguments for tool countdown: seconds: /);
    const list = await rpc(c.urls[1]!, 'tools/list', {});
    const names = list.body.result!.tools.map((t: any) => t.name);
    for (const n of ['countdown', 'deep_research', 'share_report', 'add']) assert.ok(names.includes(n), n);
  });
});
