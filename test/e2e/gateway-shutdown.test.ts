/**
 * Gateway shutdown (cases B-07, B-10 d): on SIGTERM it drains — /readyz fails and responses say
 * `Connection: close` — then stops accepting and lets in-flight requests finish; a synchronous
 * call in flight gets its result instead of being cut (and cancelled); one that would outlast
 * the grace period is handed off as a task (`task_status`), never cancelled by a deploy.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startCluster, sleep, type Cluster } from '../support/cluster.js';
import { callTool, getTask, rpc } from '../support/mcp.js';

describe('gateway SIGTERM', () => {
  let c: Cluster;
  before(async () => {
    c = await startCluster({ gateways: 1, workers: 1, env: { SHUTDOWN_DRAIN_DELAY_MS: '1500', SHUTDOWN_GRACE_MS: '8000' } });
  });
  after(async () => c?.stop());

  it('drains: readiness fails, in-flight synchronous call completes, exit 0', async () => {
    const g = c.gateways[0]!;
    const base = g.url!.replace(/\/mcp$/, '');
    assert.equal((await fetch(`${base}/readyz`)).status, 200);
    const inflight = callTool(g.url!, 'countdown', { seconds: 3 }, { tasks: false });
    await sleep(500);
    const exited = g.stop('SIGTERM');
    await g.waitLog((l) => l.msg === 'gateway.draining', 3000);
    const ready = await fetch(`${base}/readyz`);
    assert.equal(ready.status, 503, 'not ready while draining');
    assert.equal(ready.headers.get('connection'), 'close');
    // MCP responses say it too: through the SDK (tools/list) and on the hot path (tasks/get).
    const list = await rpc(g.url!, 'tools/list');
    assert.equal(list.status, 200);
    assert.equal(list.headers.get('connection'), 'close', 'an SDK-path response while draining');
    const poll = await getTask(g.url!, '00000000-0000-4000-8000-000000000000');
    assert.equal(poll.body.error?.code, -32602);
    assert.equal(poll.headers.get('connection'), 'close', 'a hot-path response while draining');
    const r = await inflight;
    assert.equal(r.status, 200);
    assert.equal(r.body.result?.content?.[0]?.text, 'Countdown from 3 finished.', JSON.stringify(r.body));
    assert.equal(await exited, 0);
    assert.ok(!g.logs.some((l) => l.msg === 'sync.disconnected'), 'the in-flight call was not cancelled');
  });

  it('a synchronous call longer than the grace period is handed off, not cancelled: the result names task_status, and the work completes', async () => {
    const c2 = await startCluster({ gateways: 2, workers: 1, env: { SHUTDOWN_DRAIN_DELAY_MS: '300', SHUTDOWN_GRACE_MS: '1500' } });
    try {
      const [g1, g2] = c2.gateways as [typeof c2.gateways[0], typeof c2.gateways[0]];
      const inflight = callTool(g1.url!, 'countdown', { seconds: 6 }, { tasks: false, meta: { progressToken: 'p' } });
      await g1.waitLog((l) => l.msg === 'task.created', 5000);
      await sleep(500);
      const t0 = Date.now();
      const exited = g1.stop('SIGTERM');
      const r = await inflight;
      const waited = Date.now() - t0;
      assert.equal(r.status, 200);
      const result = r.body.result!;
      assert.equal(result.isError, undefined, JSON.stringify(result));
      assert.match(result.content[0].text, /is still running and the server holding this call is restarting, so it continues in the background as task [0-9a-f-]{36}.*task_status/s);
      const taskId = result.structuredContent.taskId as string;
      assert.deepEqual(result.structuredContent.next, { tool: 'task_status', arguments: { taskId } });
      assert.ok(waited >= 1500 && waited < 5000, `handed off after the grace period (${waited} ms)`);
      assert.equal(await exited, 0);
      assert.ok(!g1.logs.some((l) => l.msg === 'sync.disconnected'), 'not treated as a disconnect');
      // The work goes on; the other gateway reports it, then its result.
      let text = '';
      for (let i = 0; i < 40 && !/finished/.test(text); i++) {
        const s2 = await callTool(g2.url!, 'task_status', { taskId }, { tasks: false });
        text = s2.body.result?.content?.[0]?.text ?? '';
        if (!/finished/.test(text)) await sleep(250);
      }
      assert.equal(text, 'Countdown from 6 finished.');
    } finally {
      await c2.stop();
    }
  });
});
