/**
 * The hot path of `tasks/get|update|cancel` (apps/gateway/src/hot-path.ts, D8, D12) answers
 * byte for byte like the SDK path: one corpus of valid and invalid requests is sent to a gateway
 * with HOT_PATH=true and to one with HOT_PATH=false (same Redis, same prefix, same keys), and
 * the status, the content type and the body must be equal. Requests that change a task are sent
 * to two twin tasks, one per path, and compared with the task ids swapped.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { startCluster, type Cluster } from '../support/cluster.js';
import { callTool, pollTask, PROTOCOL_VERSION, TASKS } from '../support/mcp.js';

const ALICE = 'alice-key-0123456789abcdef';
const BOB = 'bob-key-0123456789abcdef00';

interface Raw {
  status: number;
  contentType: string;
  body: string;
}

/** Sends one request with exactly these headers and body. */
async function send(url: string, headers: Record<string, string>, body: string): Promise<Raw> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers }, body });
  return { status: res.status, contentType: res.headers.get('content-type') ?? '', body: await res.text() };
}

const envelope = (caps: Record<string, unknown> = { extensions: { [TASKS]: {} }, elicitation: { form: {} } }) => ({
  'io.modelcontextprotocol/protocolVersion': PROTOCOL_VERSION,
  'io.modelcontextprotocol/clientInfo': { name: 'eq', version: '1' },
  'io.modelcontextprotocol/clientCapabilities': caps,
});

/** One request of the corpus: a name, the method, params, and header overrides. */
interface Case {
  name: string;
  method: string;
  params: Record<string, unknown> | unknown;
  id?: unknown;
  headers?: Record<string, string | null>;
  token?: string;
}

function build(c: Case): { headers: Record<string, string>; body: string } {
  const params = c.params as Record<string, unknown>;
  const headers: Record<string, string> = { 'mcp-protocol-version': PROTOCOL_VERSION, 'mcp-method': c.method, authorization: `Bearer ${c.token ?? ALICE}` };
  if (params && typeof params === 'object' && typeof params.taskId === 'string') headers['mcp-name'] = params.taskId;
  for (const [k, v] of Object.entries(c.headers ?? {})) {
    if (v === null) delete headers[k];
    else headers[k] = v;
  }
  return { headers, body: JSON.stringify({ jsonrpc: '2.0', id: 'id' in c ? c.id : 'eq-1', method: c.method, params: c.params }) };
}

describe('hot path ≡ SDK path for tasks/get, tasks/update, tasks/cancel (D8, D12)', () => {
  let c: Cluster;
  let hot: string;
  let sdk: string;
  const ids: Record<string, string> = {};
  const twins: Record<string, [string, string]> = {};

  before(async () => {
    c = await startCluster({ gateways: 0, workers: 2, env: { AUTH_API_KEYS: `alice:${ALICE},bob:${BOB}` } });
    hot = (await c.addGateway({ HOT_PATH: 'true', LOG_LEVEL: 'debug' })).url!;
    sdk = (await c.addGateway({ HOT_PATH: 'false', LOG_LEVEL: 'debug' })).url!;
    const create = async (tool: string, args: Record<string, unknown>, until: (t: Record<string, any>) => boolean, token = ALICE) => {
      const id = (await callTool(hot, tool, args, { token })).body.result!.taskId as string;
      await pollTask(() => hot, id, until, 20_000, 50, { token });
      return id;
    };
    ids.working = await create('slow_echo', { seconds: 120, quiet: true }, (t) => t.status === 'working');
    ids.parked = await create('ask_confirm', {}, (t) => t.status === 'input_required');
    ids.multi = await create('multi_input', {}, (t) => t.status === 'input_required');
    ids.completed = await create('slow_echo', { seconds: 0 }, (t) => t.status === 'completed');
    ids.failed = await create('protocol_error_job', {}, (t) => t.status === 'failed');
    ids.bobs = await create('slow_echo', { seconds: 120, quiet: true }, (t) => t.status === 'working', BOB);
    for (const name of ['update', 'cancelWorking', 'cancelParked', 'partial', 'wrapper']) {
      const tool = name === 'cancelWorking' ? 'slow_echo' : name === 'partial' ? 'multi_input' : 'ask_confirm';
      const args = tool === 'slow_echo' ? { seconds: 120, quiet: true } : {};
      const want = (t: Record<string, any>) => t.status === (tool === 'slow_echo' ? 'working' : 'input_required');
      twins[name] = [await create(tool, args, want), await create(tool, args, want)];
    }
  });
  after(async () => c?.stop());

  it('the same answers for a corpus of valid and invalid requests', async () => {
    const parkedKey = async (taskId: string) => {
      const r = await send(hot, build({ name: '', method: 'tasks/get', params: { taskId, _meta: envelope() } }).headers, build({ name: '', method: 'tasks/get', params: { taskId, _meta: envelope() } }).body);
      return Object.keys(JSON.parse(r.body).result.inputRequests);
    };
    const [pk] = await parkedKey(ids.parked!);
    const m = (taskId: string, extra: Record<string, unknown> = {}) => ({ taskId, _meta: envelope(), ...extra });
    const corpus: Case[] = [];
    for (const method of ['tasks/get', 'tasks/update', 'tasks/cancel']) {
      const extra = method === 'tasks/update' ? { inputResponses: { nope: { action: 'accept', content: {} } } } : {};
      for (const state of ['working', 'parked', 'completed', 'failed', 'multi']) {
        if (method === 'tasks/cancel' && (state === 'working' || state === 'parked' || state === 'multi')) continue; // state changes: twins below
        corpus.push({ name: `${method} ${state}`, method, params: m(ids[state]!, extra) });
      }
      corpus.push(
        { name: `${method} unknown id`, method, params: m(randomUUID(), extra) },
        { name: `${method} malformed id`, method, params: m('not-a-task', extra) },
        { name: `${method} other principal's task`, method, params: m(ids.bobs!, extra) },
        { name: `${method} numeric JSON-RPC id`, method, params: m(ids.completed!, extra), id: 42 },
        { name: `${method} id "1"`, method, params: m(ids.completed!, extra), id: '1' },
        { name: `${method} without the extension`, method, params: { taskId: ids.completed, _meta: envelope({}), ...extra } },
        { name: `${method} without clientCapabilities`, method, params: { taskId: ids.completed, _meta: { 'io.modelcontextprotocol/protocolVersion': PROTOCOL_VERSION }, ...extra } },
        { name: `${method} bad clientCapabilities`, method, params: { taskId: ids.completed, _meta: envelope({ elicitation: 5, extensions: { [TASKS]: {} } }), ...extra } },
        { name: `${method} bad clientInfo`, method, params: { taskId: ids.completed, _meta: { ...envelope(), 'io.modelcontextprotocol/clientInfo': { name: 3 } }, ...extra } },
        { name: `${method} no _meta`, method, params: { taskId: ids.completed, ...extra } },
        { name: `${method} taskId a number`, method, params: { taskId: 7, _meta: envelope(), ...extra }, headers: { 'mcp-name': '7' } },
        { name: `${method} no taskId`, method, params: { _meta: envelope(), ...extra } },
        { name: `${method} params not an object`, method, params: [1, 2] },
        { name: `${method} extra param`, method, params: m(ids.completed!, { ...extra, other: 1 }) },
        { name: `${method} requestState param`, method, params: m(ids.completed!, { ...extra, requestState: 'x' }) },
        { name: `${method} Mcp-Name missing`, method, params: m(ids.completed!, extra), headers: { 'mcp-name': null } },
        { name: `${method} Mcp-Name other`, method, params: m(ids.completed!, extra), headers: { 'mcp-name': ids.failed! } },
        { name: `${method} Mcp-Name Base64`, method, params: m(ids.completed!, extra), headers: { 'mcp-name': `=?base64?${Buffer.from(ids.completed!).toString('base64')}?=` } },
        { name: `${method} Mcp-Name bad Base64`, method, params: m(ids.completed!, extra), headers: { 'mcp-name': '=?base64?%%%?=' } },
        { name: `${method} Mcp-Method missing`, method, params: m(ids.completed!, extra), headers: { 'mcp-method': null } },
        { name: `${method} Mcp-Method other`, method, params: m(ids.completed!, extra), headers: { 'mcp-method': 'tasks/get2' } },
        { name: `${method} version header missing`, method, params: m(ids.completed!, extra), headers: { 'mcp-protocol-version': null } },
        { name: `${method} version header other`, method, params: m(ids.completed!, extra), headers: { 'mcp-protocol-version': '2025-11-25' } },
        { name: `${method} unsupported version`, method, params: { taskId: ids.completed, _meta: { ...envelope(), 'io.modelcontextprotocol/protocolVersion': '2099-01-01' }, ...extra }, headers: { 'mcp-protocol-version': '2099-01-01' } },
        { name: `${method} no credentials`, method, params: m(ids.completed!, extra), headers: { authorization: null } },
        { name: `${method} wrong token`, method, params: m(ids.completed!, extra), token: 'wrong-0123456789abcdef' },
      );
    }
    corpus.push(
      { name: 'tasks/update inputResponses missing', method: 'tasks/update', params: m(ids.parked!) },
      { name: 'tasks/update inputResponses null', method: 'tasks/update', params: m(ids.parked!, { inputResponses: null }) },
      { name: 'tasks/update inputResponses an array', method: 'tasks/update', params: m(ids.parked!, { inputResponses: [1] }) },
      { name: 'tasks/update a bare string answer', method: 'tasks/update', params: m(ids.parked!, { inputResponses: { [pk!]: 'yes' } }) },
      { name: 'tasks/update answer not matching the form', method: 'tasks/update', params: m(ids.parked!, { inputResponses: { [pk!]: { action: 'accept', content: { confirm: 'no' } } } }) },
      { name: 'tasks/update bad action', method: 'tasks/update', params: m(ids.parked!, { inputResponses: { [pk!]: { action: 'maybe' } } }) },
      { name: 'tasks/update terminal task', method: 'tasks/update', params: m(ids.completed!, { inputResponses: {} }) },
    );

    const diffs: string[] = [];
    for (const k of corpus) {
      const { headers, body } = build(k);
      const a = await send(hot, headers, body);
      const b = await send(sdk, headers, body);
      if (a.status !== b.status || a.contentType !== b.contentType || a.body !== b.body) {
        diffs.push(`${k.name}:\n  hot ${a.status} ${a.contentType} ${a.body}\n  sdk ${b.status} ${b.contentType} ${b.body}`);
      }
    }
    assert.deepEqual(diffs, [], `${diffs.length} of ${corpus.length} requests answered differently`);
    // The comparison is meaningful: the hot gateway served the usual shapes itself, the other none.
    const served = (i: number) => c.gateways[i]!.logs.filter((l) => l.msg === 'hot_path.served').length;
    assert.ok(served(0) >= 40, `the hot path served ${served(0)} requests`);
    assert.equal(served(1), 0);
  });

  it('the same answers for requests that change a task (twin tasks, one per path)', async () => {
    const getKeys = async (taskId: string) => {
      const r = build({ name: '', method: 'tasks/get', params: { taskId, _meta: envelope() } });
      return Object.keys(JSON.parse((await send(hot, r.headers, r.body)).body).result.inputRequests).sort();
    };
    const pairs: [string, (taskId: string, keys: string[]) => Case][] = [
      ['update', (taskId, keys) => ({ name: 'tasks/update the answer', method: 'tasks/update', params: { taskId, _meta: envelope(), inputResponses: { [keys[0]!]: { action: 'accept', content: { confirm: true, extra: 1 } } } } })],
      ['partial', (taskId, keys) => ({ name: 'tasks/update one of two', method: 'tasks/update', params: { taskId, _meta: envelope(), inputResponses: { [keys.find((x) => x.startsWith('name'))!]: { action: 'accept', content: { name: 'Ada' } } } } })],
      ['wrapper', (taskId, keys) => ({ name: 'tasks/update a wrapped answer', method: 'tasks/update', params: { taskId, _meta: envelope(), inputResponses: { [keys[0]!]: { method: 'elicitation/create', result: { action: 'accept' } } } } })],
      ['cancelWorking', (taskId) => ({ name: 'tasks/cancel working', method: 'tasks/cancel', params: { taskId, _meta: envelope() } })],
      ['cancelParked', (taskId) => ({ name: 'tasks/cancel parked', method: 'tasks/cancel', params: { taskId, _meta: envelope() } })],
    ];
    const diffs: string[] = [];
    for (const [name, make] of pairs) {
      const [t1, t2] = twins[name]!;
      const k1 = name.startsWith('cancel') ? [] : await getKeys(t1);
      const k2 = name.startsWith('cancel') ? [] : await getKeys(t2);
      // Input keys carry the step only (logical key + step): the twins' keys are equal.
      assert.deepEqual(k1, k2);
      const r1 = build(make(t1, k1));
      const r2 = build(make(t2, k2));
      const a = await send(hot, r1.headers, r1.body);
      const b = await send(sdk, r2.headers, r2.body);
      const same = (x: Raw, id: string) => ({ ...x, body: x.body.split(id).join('<task>') });
      const [sa, sb] = [same(a, t1), same(b, t2)];
      if (sa.status !== sb.status || sa.contentType !== sb.contentType || sa.body !== sb.body) diffs.push(`${name}:\n  hot ${a.status} ${a.body}\n  sdk ${b.status} ${b.body}`);
      // And the two tasks end in the same state (once the workers are done with them).
      const settled = (t: Record<string, any>) => t.status !== 'working';
      const s1 = await pollTask(() => hot, t1, settled, 20_000, 50, { token: ALICE });
      const s2 = await pollTask(() => sdk, t2, settled, 20_000, 50, { token: ALICE });
      assert.equal(s1.status, s2.status, `${name}: ${s1.status} vs ${s2.status}`);
      assert.deepEqual(Object.keys(s1.inputRequests ?? {}).sort(), Object.keys(s2.inputRequests ?? {}).sort());
    }
    assert.deepEqual(diffs, []);
  });
});
