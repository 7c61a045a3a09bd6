// @needs redis
/**
 * Protocol edges on real processes (one gateway, one worker): extension advertisement,
 * removed methods, capability gating without the extension, routing-header mismatches,
 * the 2025 `initialize` lane, non-POST methods and the health endpoints.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startCluster, type Cluster } from '../support/cluster.js';
import { callTool, getTask, rpc, TASKS, updateTask, cancelTask } from '../support/mcp.js';

describe('legacy lane and protocol edges', () => {
  let c: Cluster;
  let url: string;
  let origin: string;
  before(async () => {
    c = await startCluster({ gateways: 1, workers: 1 });
    url = c.urls[0]!;
    origin = new URL(url).origin;
  });
  after(async () => c?.stop());

  it('server/discover advertises the tasks extension and no legacy capabilities.tasks (T-06, T-08)', async () => {
    const r = await rpc(url, 'server/discover', {}, { tasks: false });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const caps = r.body.result?.capabilities;
    assert.ok(caps, JSON.stringify(r.body));
    assert.deepEqual(caps.extensions?.[TASKS], {}); // ext-tasks requires exactly {}
    assert.ok(!('tasks' in caps), `capabilities.tasks must be absent: ${JSON.stringify(caps)}`);
    assert.ok(caps.tools);
    assert.ok(r.body.result?.supportedVersions?.includes('2026-07-28'), JSON.stringify(r.body.result));
  });

  for (const method of ['tasks/list', 'tasks/result']) {
    it(`${method} is removed: HTTP 404 with -32601 (T-47)`, async () => {
      const r = await rpc(url, method, method === 'tasks/result' ? { taskId: 'removed-method-probe' } : {});
      assert.equal(r.status, 404, JSON.stringify(r.body));
      assert.equal(r.body.error?.code, -32601, JSON.stringify(r.body));
    });
  }

  it('a 2025 initialize (no _meta, no MCP headers) gets 200, a protocolVersion and an Mcp-Session-Id (LG-01)', async () => {
    const r = await rpc(
      url,
      'initialize',
      {},
      {
        rawBody: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'initialize',
          params: {
            protocolVersion: '2025-11-25',
            capabilities: {},
            clientInfo: { name: 'old-client', version: '1.0.0' },
          },
        }),
        headers: { 'mcp-protocol-version': null, 'mcp-method': null },
      },
    );
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.id, 1);
    assert.equal(typeof r.body.result?.protocolVersion, 'string', JSON.stringify(r.body));
    assert.equal(r.body.result!.protocolVersion, '2025-11-25');
    assert.ok(!('tasks' in (r.body.result!.capabilities ?? {})), 'no legacy 2025-11 tasks capability (T-08)');
    assert.equal(
      r.body.result!.capabilities?.extensions?.['io.modelcontextprotocol/tasks'],
      undefined,
      'the extension is not advertised under 2025-11-25 (T-07)',
    );
    assert.equal(r.body.result!.serverInfo?.name, 'mcp-task-service');
    assert.match(r.headers.get('mcp-session-id') ?? '', /^[\x21-\x7E]{43}$/, 'a session id, visible ASCII');
  });

  it('a 2025 tasks/get gets -32601: no tasks are offered under 2025-11-25 (T-07, T-48 does not apply)', async () => {
    const r = await rpc(
      url,
      'tasks/get',
      {},
      {
        rawBody: JSON.stringify({
          jsonrpc: '2.0',
          id: 7,
          method: 'tasks/get',
          params: { taskId: '00000000-0000-4000-8000-000000000000' },
        }),
        headers: { 'mcp-protocol-version': '2025-11-25', 'mcp-method': null, 'mcp-name': null },
      },
    );
    assert.equal(r.body.error?.code, -32601, JSON.stringify(r.body));
  });

  it('tools/call countdown from a client without the extension runs on a worker and returns a plain CallToolResult (T-01)', async () => {
    const r = await callTool(url, 'countdown', { seconds: 1 }, { tasks: false });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const result = r.body.result!;
    assert.ok(result, JSON.stringify(r.body));
    assert.notEqual(result.resultType, 'task');
    assert.ok(!('taskId' in result), 'no task handle for a non-declaring client');
    assert.ok(!result.isError);
    assert.equal(result.content?.[0]?.text, 'Countdown from 1 finished.');
    // It went through the queue: the gateway created a sync-mode record and a worker ran it.
    const created = await c.gateways[0]!.waitLog(
      (l) => l.msg === 'task.created' && l.tool === 'countdown' && l.mode === 'sync',
      2000,
    );
    await c.workers[0]!.waitLog((l) => l.msg === 'step.completed' && l.taskId === created.taskId, 2000);
  });

  it('failing_job (taskSupport required) without the extension: HTTP 400, -32021 naming the extension (T-04)', async () => {
    const r = await callTool(url, 'failing_job', {}, { tasks: false });
    assert.equal(r.status, 400, JSON.stringify(r.body));
    assert.equal(r.body.error?.code, -32021, JSON.stringify(r.body));
    assert.deepEqual(r.body.error?.data?.requiredCapabilities?.extensions?.[TASKS], {});
  });

  it('tasks/get, tasks/update, tasks/cancel without the extension: -32021 even for an unknown id (T-05)', async () => {
    const id = 'no-such-task-for-gate-test';
    for (const r of [
      await getTask(url, id, { tasks: false }),
      await updateTask(url, id, {}, { tasks: false }),
      await cancelTask(url, id, { tasks: false }),
    ]) {
      assert.equal(r.body.error?.code, -32021, JSON.stringify(r.body));
      assert.equal(r.status, 400);
      assert.deepEqual(r.body.error?.data?.requiredCapabilities?.extensions?.[TASKS], {});
    }
    // With the extension, the same unknown id is -32602 (T-33).
    const known = await getTask(url, id);
    assert.equal(known.body.error?.code, -32602, JSON.stringify(known.body));
  });

  it('a mismatched Mcp-Name is rejected with HTTP 400 and -32020 (T-42)', async () => {
    const create = await callTool(url, 'slow_compute', { seconds: 5 });
    const taskId = create.body.result?.taskId as string;
    assert.ok(taskId, JSON.stringify(create.body));
    try {
      const wrongTask = await getTask(url, taskId, { headers: { 'mcp-name': 'some-other-task-id' } });
      assert.equal(wrongTask.status, 400, JSON.stringify(wrongTask.body));
      assert.equal(wrongTask.body.error?.code, -32020);
      const missing = await getTask(url, taskId, { headers: { 'mcp-name': null } });
      assert.equal(missing.status, 400, JSON.stringify(missing.body));
      assert.equal(missing.body.error?.code, -32020);
      const wrongTool = await callTool(url, 'greet', { name: 'x' }, { headers: { 'mcp-name': 'add' } });
      assert.equal(wrongTool.status, 400, JSON.stringify(wrongTool.body));
      assert.equal(wrongTool.body.error?.code, -32020);
      // The matching header still works.
      const ok = await getTask(url, taskId);
      assert.equal(ok.status, 200);
      assert.equal(ok.body.result?.taskId, taskId);
    } finally {
      await cancelTask(url, taskId);
    }
  });

  it('GET /mcp is 405 (no standalone SSE stream)', async () => {
    const r = await fetch(url, { method: 'GET', headers: { accept: 'text/event-stream' } });
    assert.equal(r.status, 405);
    await r.body?.cancel();
  });

  it('/healthz and /readyz answer 200', async () => {
    const h = await fetch(`${origin}/healthz`);
    assert.equal(h.status, 200);
    assert.deepEqual(await h.json(), { status: 'ok' });
    const r = await fetch(`${origin}/readyz`);
    assert.equal(r.status, 200);
    // `workers`: live workers by their heartbeats (issue 9 §5).
    assert.deepEqual(await r.json(), { status: 'ready', workers: 1 });
  });
});
