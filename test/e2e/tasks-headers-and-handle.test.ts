// @needs redis
/**
 * The task handle exactly as the Tasks extension's schema has it (T-11: the flat task and
 * `resultType: "task"`, no `content`), on the hot path and through the SDK (HOT_PATH=false).
 *
 * Clients that omit `Mcp-Name` on `tasks/*` (H-15, T-42): refused by default (400 `-32020`) and
 * logged at info with the client's name and the missing header; with ACCEPT_MISSING_MCP_NAME=true
 * a missing one is accepted on `tasks/get|update|cancel` (logged too), a mismatching one never;
 * and the hot path answers such a request byte for byte like the SDK path (HOT_PATH=false).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { CreateTaskResultV2Schema } from '@modelcontextprotocol/ext-tasks/core/v2';
import { startCluster, type Cluster, type Proc } from '../support/cluster.js';
import { callTool, pollTask, rpc } from '../support/mcp.js';

describe('Mcp-Name missing on tasks/* (ACCEPT_MISSING_MCP_NAME)', () => {
  let c: Cluster;
  let strict: Proc;
  let lenientHot: Proc;
  let lenientSdk: Proc;
  before(async () => {
    c = await startCluster({ gateways: 1, workers: 1 });
    strict = c.gateways[0]!;
    lenientHot = await c.addGateway({ ACCEPT_MISSING_MCP_NAME: 'true' });
    lenientSdk = await c.addGateway({ ACCEPT_MISSING_MCP_NAME: 'true', HOT_PATH: 'false' });
  });
  after(async () => c?.stop());

  const noName = { headers: { 'mcp-name': null } };

  it("the task handle has exactly the schema's keys (no content), on the hot path and through the SDK, as JSON", async () => {
    for (const g of [lenientHot, lenientSdk]) {
      const r = await callTool(g.url!, 'countdown', { seconds: 1 });
      assert.equal(r.status, 200);
      assert.equal(r.headers.get('content-type'), 'application/json');
      const handle = r.body.result as Record<string, unknown>;
      assert.ok(!('content' in handle), JSON.stringify(handle));
      assert.deepEqual(
        Object.keys(handle).filter((k) => k !== 'statusMessage'),
        ['resultType', 'taskId', 'status', 'createdAt', 'lastUpdatedAt', 'ttlMs', 'pollIntervalMs', '_meta'],
      );
      CreateTaskResultV2Schema.strict().parse(handle);
      assert.equal(handle.status, 'working');
    }
  });

  it('default: refused with 400 -32020 naming the header, and logged at info with the client and what was missing', async () => {
    const taskId = (await callTool(strict.url!, 'ask_confirm', {})).body.result!.taskId as string;
    for (const method of ['tasks/get', 'tasks/update', 'tasks/cancel']) {
      const params = method === 'tasks/update' ? { taskId, inputResponses: {} } : { taskId };
      const r = await rpc(strict.url!, method, params, noName);
      assert.equal(r.status, 400, `${method}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body.error?.code, -32020);
      assert.equal(r.body.error?.data?.mismatch?.header, '(missing)');
      const line = await strict.waitLog((l) => l.msg === 'mcp.header_refused' && l.method === method, 5000);
      assert.equal(line.level, 30, 'info');
      assert.equal(line.client, 'test-client/0.0.1');
      assert.equal(line.header, 'Mcp-Name');
      assert.equal(line.missing, true);
    }
    // The task was not touched.
    const t = await pollTask(
      () => strict.url!,
      taskId,
      (x) => x.status === 'input_required',
    );
    assert.equal(t.status, 'input_required');
  });

  it('ACCEPT_MISSING_MCP_NAME=true: a missing Mcp-Name is accepted on tasks/get|update|cancel (logged), a mismatch is still refused', async () => {
    const taskId = (await callTool(lenientHot.url!, 'ask_confirm', {})).body.result!.taskId as string;
    const t = await pollTask(
      () => lenientHot.url!,
      taskId,
      (x) => x.status === 'input_required',
    );
    const get = await rpc(lenientHot.url!, 'tasks/get', { taskId }, noName);
    assert.equal(get.status, 200, JSON.stringify(get.body));
    assert.equal(get.body.result?.status, 'input_required');
    // Logged before the answer; the line reaches the test through a pipe, maybe after it.
    await lenientHot.waitLog((l) => l.msg === 'mcp.header_missing_accepted' && l.method === 'tasks/get', 10_000);
    const mismatch = await rpc(lenientHot.url!, 'tasks/get', { taskId }, { headers: { 'mcp-name': 'some-other-id' } });
    assert.equal(mismatch.status, 400);
    assert.equal(mismatch.body.error?.code, -32020);
    const refusal = await lenientHot.waitLog(
      (l) => l.msg === 'mcp.header_refused' && l.header === 'some-other-id',
      5000,
    );
    assert.equal(refusal.missing, false);
    // tools/call is not covered by the setting.
    const call = await rpc(lenientHot.url!, 'tools/call', { name: 'add', arguments: { a: 1, b: 2 } }, noName);
    assert.equal(call.status, 400, JSON.stringify(call.body));
    const [key] = Object.keys(t.inputRequests as object);
    const upd = await rpc(
      lenientHot.url!,
      'tasks/update',
      { taskId, inputResponses: { [key!]: { action: 'accept', content: { confirm: true } } } },
      noName,
    );
    assert.equal(upd.status, 200, JSON.stringify(upd.body));
    const done = await pollTask(
      () => lenientHot.url!,
      taskId,
      (x) => x.status === 'completed',
    );
    assert.equal(done.status, 'completed');
    const cancel = await rpc(lenientHot.url!, 'tasks/cancel', { taskId }, noName);
    assert.equal(cancel.status, 200, JSON.stringify(cancel.body));
  });

  it('hot path ≡ SDK path for the same requests without Mcp-Name (status, content type, body)', async () => {
    const taskId = (await callTool(lenientHot.url!, 'ask_confirm', {})).body.result!.taskId as string;
    await pollTask(
      () => lenientHot.url!,
      taskId,
      (x) => x.status === 'input_required',
    );
    const unknown = '00000000-0000-4000-8000-000000000000';
    const cases: [string, Record<string, unknown>][] = [
      ['tasks/get', { taskId }],
      ['tasks/get', { taskId: unknown }],
      ['tasks/update', { taskId, inputResponses: { nope: { action: 'accept' } } }],
      ['tasks/cancel', { taskId: unknown }],
      ['tasks/cancel', { taskId }],
    ];
    let n = 0;
    for (const [method, params] of cases) {
      n++;
      const hot = await rpc(lenientHot.url!, method, params, { ...noName, id: `eq-${n}` });
      const sdk = await rpc(lenientSdk.url!, method, params, { ...noName, id: `eq-${n}` });
      assert.equal(hot.status, sdk.status, `${method} ${JSON.stringify(params)}`);
      assert.equal(hot.headers.get('content-type'), sdk.headers.get('content-type'));
      // A cancel changes the task: compare the rest of the answer, not lastUpdatedAt.
      assert.deepEqual(hot.body, sdk.body, `${method}: ${JSON.stringify(hot.body)} vs ${JSON.stringify(sdk.body)}`);
    }
    await lenientSdk.waitLog((l) => l.msg === 'mcp.header_missing_accepted', 10_000);
  });
});
