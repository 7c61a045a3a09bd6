// @needs redis
/**
 * 2025-11-25 tasks (LG-10..LG-14, apps/gateway/src/legacy-tasks.ts) in raw HTTP, on 2 gateways
 * and 1 worker, each request of a session sent to the other gateway than the one before: what
 * the TypeScript SDK's tasks client (test/e2e/typescript-sdk-client.test.ts) does not show —
 * the capability only for a 2025-11-25 session that declared `tasks`, the shapes, another
 * principal's tasks unknown, the terminal-cancel error, `tasks/list` pages, `tasks/result`'s
 * stream, and a session without tasks served as before.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { startCluster, waitFor, type Cluster } from '../support/cluster.js';
import { post } from '../support/legacy.js';

const ALICE = `alice-${randomBytes(12).toString('hex')}`;
const BOB = `bob-${randomBytes(12).toString('hex')}`;
const TASKS_CAP = { list: {}, cancel: {}, requests: { elicitation: { create: {} } } };
const RELATED = 'io.modelcontextprotocol/related-task';
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/** SSE `data:` messages of a response body. */
const messagesOf = (text: string) =>
  text
    .split(/\r?\n/)
    .filter((l) => l.startsWith('data:'))
    .map((l) => JSON.parse(l.slice(5).trim()) as Record<string, any>);

describe('2025-11-25 tasks for sessions that declared them, 2 gateways (LG-10..LG-14)', () => {
  let c: Cluster;
  let n = 0;
  /** The gateway of the next request: they alternate. */
  const next = () => c.urls[n++ % 2]!;

  /** initialize (+ initialized on the other gateway); returns the session id and the initialize result. */
  async function open(token: string, capabilities: Record<string, unknown>, version = '2025-11-25') {
    const init = await post(
      next(),
      {
        jsonrpc: '2.0',
        id: 0,
        method: 'initialize',
        params: { protocolVersion: version, capabilities, clientInfo: { name: 'raw-tasks', version: '1' } },
      },
      { token, version: null },
    );
    assert.equal(init.status, 200, init.text);
    const sid = init.headers.get('mcp-session-id')!;
    assert.ok(sid);
    const ok = await post(next(), { jsonrpc: '2.0', method: 'notifications/initialized' }, { sid, token, version });
    assert.equal(ok.status, 202);
    return { sid, result: init.message?.result as Record<string, any> };
  }
  const rpc = (sid: string, token: string, id: number, method: string, params: Record<string, unknown>) =>
    post(next(), { jsonrpc: '2.0', id, method, params }, { sid, token });

  let alice: string;
  let bob: string;

  before(async () => {
    c = await startCluster({ gateways: 2, workers: 1, env: { AUTH_API_KEYS: `alice:${ALICE},bob:${BOB}` } });
    alice = (await open(ALICE, { tasks: TASKS_CAP, elicitation: {} })).sid;
    bob = (await open(BOB, { tasks: TASKS_CAP })).sid;
  });
  after(async () => {
    await c?.stop();
  });

  it('initialize declares capabilities.tasks only to a 2025-11-25 client that declared tasks (LG-10)', async () => {
    const withTasks = await open(ALICE, { tasks: TASKS_CAP });
    assert.deepEqual(withTasks.result.capabilities.tasks, { list: {}, cancel: {}, requests: { tools: { call: {} } } });
    const without = await open(ALICE, { elicitation: {} });
    assert.equal(without.result.capabilities.tasks, undefined, JSON.stringify(without.result.capabilities));
    const older = await open(ALICE, { tasks: TASKS_CAP }, '2025-06-18');
    assert.equal(older.result.capabilities.tasks, undefined, JSON.stringify(older.result.capabilities));
  });

  it('tools/list: execution.taskSupport per tool only for a session with tasks; a gateway tool is forbidden (LG-15)', async () => {
    const listed = await rpc(alice, ALICE, 5, 'tools/list', {});
    const tools = listed.message?.result?.tools as Record<string, any>[];
    const byName = new Map(tools.map((t) => [t.name, t]));
    assert.equal(byName.get('test_simple_text')?.execution?.taskSupport, 'forbidden', listed.text);
    const countdown = byName.get('countdown');
    assert.ok(['optional', 'required'].includes(countdown?.execution?.taskSupport), JSON.stringify(countdown));
    assert.equal(countdown?.execution?.taskSupport, countdown?._meta['mcp-tasks/taskSupport']);
    const { sid } = await open(ALICE, { elicitation: {} });
    const plain = await rpc(sid, ALICE, 6, 'tools/list', {});
    for (const t of plain.message?.result?.tools as Record<string, any>[]) assert.equal(t.execution, undefined, t.name);
  });

  it('tools/call with params.task for a tool listed forbidden: -32601 naming the tool, no task; the same call without params.task is answered (LG-15)', async () => {
    const before = await rpc(alice, ALICE, 7, 'tasks/list', {});
    const listedBefore = (before.message?.result?.tasks as unknown[]).length;
    for (const [name, args] of [
      ['test_simple_text', {}], // run in the gateway
      ['share_report', { channel: '#x' }], // asks before its task exists
    ] as const) {
      const asked = await rpc(alice, ALICE, 8, 'tools/call', { name, arguments: args, task: {} });
      assert.equal(asked.status, 200, asked.text);
      assert.equal(asked.message?.error?.code, -32601, asked.text);
      assert.match(asked.message!.error.message, new RegExp(`${name} does not support task-augmented execution`));
      assert.equal(asked.message?.result, undefined, asked.text);
    }
    const plain = await rpc(alice, ALICE, 9, 'tools/call', { name: 'test_simple_text', arguments: {} });
    assert.equal(plain.message?.error, undefined, plain.text);
    assert.ok(Array.isArray(plain.message?.result?.content), plain.text);
    // A session without tasks is served as before: params.task is not its business.
    const { sid } = await open(ALICE, { elicitation: {} });
    const other = await rpc(sid, ALICE, 10, 'tools/call', { name: 'test_simple_text', arguments: {}, task: {} });
    assert.equal(other.message?.error, undefined, other.text);
    const after = await rpc(alice, ALICE, 11, 'tasks/list', {});
    assert.equal((after.message?.result?.tasks as unknown[]).length, listedBefore, 'no task created');
  });

  it('a tool listed required (failing_job) becomes a task with params.task; its tool error shows as failed (LG-10, LG-11, LG-15)', async () => {
    const created = await rpc(alice, ALICE, 12, 'tools/call', { name: 'failing_job', arguments: {}, task: {} });
    assert.equal(created.status, 200, created.text);
    const task = created.message?.result?.task as Record<string, any>;
    assert.equal(task?.status, 'working', created.text);
    const result = await rpc(alice, ALICE, 13, 'tasks/result', { taskId: task.taskId });
    const last = messagesOf(result.text).at(-1)!;
    assert.equal(last.result?.isError, true, result.text);
    const got = await rpc(alice, ALICE, 14, 'tasks/get', { taskId: task.taskId });
    assert.equal(got.message?.result?.status, 'failed', got.text);
  });

  it('tools/call with params.task answers CreateTaskResult at once; tasks/get on the other gateway; tasks/result streams the status and ends with the result and its related-task _meta (LG-10, LG-11, LG-14)', async () => {
    const created = await rpc(alice, ALICE, 1, 'tools/call', {
      name: 'countdown',
      arguments: { seconds: 2 },
      task: { ttl: 60_000 },
    });
    assert.equal(created.status, 200, created.text);
    const task = created.message?.result?.task as Record<string, any>;
    assert.deepEqual(Object.keys(created.message!.result).sort(), ['task'], created.text);
    assert.equal(task.status, 'working');
    assert.match(task.createdAt, ISO);
    assert.match(task.lastUpdatedAt, ISO);
    assert.equal(typeof task.ttl, 'number');
    assert.equal(typeof task.pollInterval, 'number');
    // The same Redis record as every task (mode task, owner alice).
    const [mode, owner] = await c.redis.hmget(`${c.prefix}:{t:${task.taskId}}:task`, 'mode', 'owner');
    assert.equal(mode, 'task');
    assert.equal(owner, 'key:alice');
    const got = await rpc(alice, ALICE, 2, 'tasks/get', { taskId: task.taskId });
    assert.equal(got.message?.result?.taskId, task.taskId, got.text);
    assert.ok(['working', 'completed'].includes(got.message?.result?.status));
    const result = await rpc(alice, ALICE, 3, 'tasks/result', { taskId: task.taskId });
    assert.equal(result.status, 200);
    const msgs = messagesOf(result.text);
    const final = msgs.length ? msgs[msgs.length - 1]! : JSON.parse(result.text);
    assert.equal(final.id, 3, result.text);
    assert.match(final.result.content[0].text, /Countdown from 2 finished/);
    assert.deepEqual(final.result._meta[RELATED], { taskId: task.taskId });
    if (msgs.length > 1) {
      const statuses = msgs.filter((m) => m.method === 'notifications/tasks/status').map((m) => m.params.status);
      assert.equal(statuses[statuses.length - 1], 'completed', result.text);
    }
    // A terminal task's result again: answered at once, the same.
    const again = await rpc(alice, ALICE, 4, 'tasks/result', { taskId: task.taskId });
    assert.deepEqual(again.message?.result, final.result);
  });

  it('tasks/result of a task that asks: elicitation/create on its stream with the related-task _meta, the answer POSTed to the other gateway, then the result (LG-14)', async () => {
    const created = await rpc(alice, ALICE, 10, 'tools/call', {
      name: 'deep_research',
      arguments: { topic: 'raw tasks' },
      task: {},
    });
    const taskId = created.message?.result?.task?.taskId as string;
    assert.ok(taskId, created.text);
    await waitFor(
      async () => (await c.redis.hget(`${c.prefix}:{t:${taskId}}:task`, 'status')) === 'input_required',
      20_000,
      50,
      'deep_research to ask',
    );
    const res = await fetch(next(), {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        authorization: `Bearer ${ALICE}`,
        'mcp-protocol-version': '2025-11-25',
        'mcp-session-id': alice,
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 11, method: 'tasks/result', params: { taskId } }),
    });
    assert.equal(res.headers.get('content-type'), 'text/event-stream');
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    let answered = false;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
      const ask = messagesOf(text).find((m) => m.method === 'elicitation/create');
      if (ask && !answered) {
        answered = true;
        assert.deepEqual(ask.params._meta[RELATED], { taskId });
        const r = await post(
          next(),
          { jsonrpc: '2.0', id: ask.id, result: { action: 'accept', content: { audience: 'team' } } },
          { sid: alice, token: ALICE },
        );
        assert.equal(r.status, 202, r.text);
      }
    }
    assert.ok(answered, text);
    const msgs = messagesOf(text);
    const final = msgs[msgs.length - 1]!;
    assert.equal(final.id, 11);
    assert.equal(final.result.structuredContent.audience, 'team', text);
    assert.deepEqual(final.result._meta[RELATED], { taskId });
    assert.ok(msgs.some((m) => m.method === 'notifications/tasks/status' && m.params.status === 'completed'));
  });

  it("another principal's task is not found: tasks/get, tasks/result, tasks/cancel -32602, tasks/list without it (LG-13, T-44)", async () => {
    const created = await rpc(alice, ALICE, 20, 'tools/call', {
      name: 'countdown',
      arguments: { seconds: 1 },
      task: {},
    });
    const taskId = created.message?.result?.task?.taskId as string;
    assert.ok(taskId, created.text);
    for (const method of ['tasks/get', 'tasks/result', 'tasks/cancel']) {
      const r = await rpc(bob, BOB, 21, method, { taskId });
      assert.equal(r.message?.error?.code, -32602, `${method}: ${r.text}`);
    }
    const list = await rpc(bob, BOB, 22, 'tasks/list', {});
    assert.deepEqual(list.message?.result?.tasks, [], list.text);
  });

  it('tasks/cancel: a working task is cancelled in the answer and in Redis; a terminal one is -32602 (LG-12)', async () => {
    const created = await rpc(alice, ALICE, 30, 'tools/call', {
      name: 'countdown',
      arguments: { seconds: 10 },
      task: {},
    });
    const taskId = created.message?.result?.task?.taskId as string;
    await waitFor(
      async () => (await c.redis.hget(`${c.prefix}:{t:${taskId}}:task`, 'claimedStep')) === '1',
      10_000,
      50,
      'the worker to take the countdown',
    );
    const cancelled = await rpc(alice, ALICE, 31, 'tasks/cancel', { taskId });
    assert.equal(cancelled.message?.result?.status, 'cancelled', cancelled.text);
    assert.equal(await c.redis.hget(`${c.prefix}:{t:${taskId}}:task`, 'status'), 'cancelled');
    const again = await rpc(alice, ALICE, 32, 'tasks/cancel', { taskId });
    assert.equal(again.message?.error?.code, -32602, again.text);
    assert.match(again.message?.error?.message, /terminal/);
  });

  it('tasks/list: every task of the caller, 50 a page, with an opaque cursor; a forged cursor is -32602 (LG-13)', async () => {
    const ids = new Set<string>();
    for (let i = 0; i < 52; i++) {
      const r = await rpc(alice, ALICE, 100 + i, 'tools/call', {
        name: 'countdown',
        arguments: { seconds: 1 },
        task: {},
      });
      assert.ok(r.message?.result?.task?.taskId, r.text);
      ids.add(r.message?.result?.task?.taskId as string);
    }
    const listed: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const r = await rpc(alice, ALICE, 200 + pages, 'tasks/list', cursor ? { cursor } : {});
      const page = r.message?.result as { tasks: { taskId: string }[]; nextCursor?: string };
      assert.ok(page.tasks.length <= 50, r.text.slice(0, 300));
      listed.push(...page.tasks.map((t) => t.taskId));
      cursor = page.nextCursor;
      pages++;
    } while (cursor && pages < 10);
    assert.ok(pages >= 2, `pages: ${pages}, listed ${listed.length}, created ${ids.size}`);
    assert.equal(new Set(listed).size, listed.length, 'no task twice');
    for (const id of ids) assert.ok(listed.includes(id), `${id} not listed`);
    const forged = await rpc(alice, ALICE, 300, 'tasks/list', { cursor: 'not-a-cursor' });
    assert.equal(forged.message?.error?.code, -32602, forged.text);
  });

  it('a session without the tasks capability: params.task is ignored (a plain call), tasks/* -32601 as before (T-07)', async () => {
    const { sid } = await open(ALICE, { elicitation: {} });
    const r = await rpc(sid, ALICE, 40, 'tools/call', { name: 'countdown', arguments: { seconds: 1 }, task: {} });
    assert.equal(r.message?.result?.task, undefined, r.text);
    assert.match(r.message?.result?.content?.[0]?.text, /Countdown from 1 finished/, r.text);
    const list = await rpc(sid, ALICE, 41, 'tasks/list', {});
    assert.equal(list.message?.error?.code, -32601, list.text);
  });
});
