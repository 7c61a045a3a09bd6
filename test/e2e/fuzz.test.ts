/**
 * Property-based fuzzing of `POST /mcp` (issue "Safe to expose", Tests): random and mutated
 * bodies, headers and tokens against a running gateway (real process, its own throwaway Redis).
 * For every request:
 *  - the answer is a well-formed JSON-RPC response (a result or an error with an integer code),
 *    an SSE stream ending with one, or a bare status the error table allows (202 for an accepted
 *    notification, 401/403 with a challenge);
 *  - the HTTP status is the one the error table (apps/gateway/src/errors.ts) gives its code;
 *  - no response carries a stack, a file path or a Redis key name;
 *  - a refused request (an error answer) leaves no key in Redis that was not there before
 *    (rate-limit counters excepted: every authenticated request counts, by design);
 * and the gateway never crashes. No worker runs, so nothing but requests writes to this Redis.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { Redis } from 'ioredis';
import { startCluster, startRedis, waitFor, type Cluster, type ThrowawayRedis } from '../support/cluster.js';

const VERSION = '2026-07-28';
/** The one principal's API key (the fuzz also sends none, malformed and unknown ones). */
const KEY = 'fuzz-key-0123456789abcdef';
const TASKS = 'io.modelcontextprotocol/tasks';
const METHODS = ['server/discover', 'tools/list', 'tools/call', 'tasks/get', 'tasks/update', 'tasks/cancel', 'tasks/list', 'tasks/result', 'subscriptions/listen', 'initialize', 'ping', 'resources/list', 'nope/x'];
const TOOLS = ['countdown', 'deep_research', 'share_report', 'add', 'task_status', 'slow_echo', 'ask_confirm', 'greet', 'missing_tool'];

/** HTTP statuses the error table allows for each JSON-RPC code. */
const STATUS_FOR_CODE: Record<number, number[]> = {
  [-32700]: [400],
  [-32600]: [400, 401, 403, 413, 415],
  [-32601]: [404, 200],
  [-32602]: [400, 200],
  [-32603]: [200, 500, 503],
  [-32020]: [400],
  [-32021]: [400],
  [-32022]: [400],
  [-31429]: [429],
  [-32000]: [405, 400],
};

const meta = (caps: Record<string, unknown>) => ({
  'io.modelcontextprotocol/protocolVersion': VERSION,
  'io.modelcontextprotocol/clientInfo': { name: 'fuzz', version: '0' },
  'io.modelcontextprotocol/clientCapabilities': caps,
});

/** A valid request for `method`, the seed that mutations start from. */
function validBody(method: string, tool: string, id: number | string, taskId: string) {
  const caps = { elicitation: { form: {} }, extensions: { [TASKS]: {} } };
  const params: Record<string, unknown> = { _meta: meta(caps) };
  if (method === 'tools/call') Object.assign(params, { name: tool, arguments: tool === 'add' ? { a: 1, b: 2 } : { seconds: 1, topic: 't', channel: '#c', taskId } });
  if (method.startsWith('tasks/')) Object.assign(params, { taskId, inputResponses: { k: { action: 'accept', content: {} } } });
  if (method === 'subscriptions/listen') Object.assign(params, { notifications: { taskIds: [taskId] } });
  return { jsonrpc: '2.0', id, method, params };
}

/** Sets `value` at a random path of `obj` (or deletes it). */
function mutate(obj: any, path: readonly string[], value: unknown, del: boolean) {
  let cur = obj;
  for (const k of path.slice(0, -1)) {
    if (cur === null || typeof cur !== 'object') return obj;
    if (!(k in cur) || typeof cur[k] !== 'object' || cur[k] === null) cur[k] = {};
    cur = cur[k];
  }
  const last = path[path.length - 1]!;
  if (del) delete cur[last];
  else cur[last] = value;
  return obj;
}

const pathArb = fc.constantFrom(
  ['id'], ['jsonrpc'], ['method'], ['params'], ['params', 'name'], ['params', 'arguments'], ['params', 'arguments', 'seconds'],
  ['params', 'taskId'], ['params', 'inputResponses'], ['params', 'requestState'], ['params', '_meta'],
  ['params', '_meta', 'io.modelcontextprotocol/protocolVersion'], ['params', '_meta', 'io.modelcontextprotocol/clientCapabilities'],
  ['params', '_meta', 'io.modelcontextprotocol/clientCapabilities', 'extensions'], ['params', '_meta', 'progressToken'],
  ['params', 'notifications', 'taskIds'], ['params', 'task'],
);

const requestArb = fc.record({
  kind: fc.constantFrom('mutated', 'mutated', 'mutated', 'json', 'text'),
  method: fc.constantFrom(...METHODS),
  tool: fc.constantFrom(...TOOLS),
  id: fc.oneof(fc.integer({ min: 0, max: 1e6 }), fc.string({ maxLength: 12 })),
  taskId: fc.oneof(fc.uuid(), fc.constant('not-a-task'), fc.string({ maxLength: 40 })),
  mutations: fc.array(fc.record({ path: pathArb, value: fc.jsonValue({ maxDepth: 3 }), del: fc.boolean() }), { maxLength: 3 }),
  json: fc.jsonValue({ maxDepth: 4 }),
  text: fc.string({ maxLength: 200 }),
  headers: fc.record(
    {
      version: fc.constantFrom(VERSION, '2025-11-25', '2099-01-01', '', 'x'),
      method: fc.oneof(fc.constant('=same='), fc.constantFrom(...METHODS), fc.string({ maxLength: 20 })),
      name: fc.oneof(fc.constant('=same='), fc.string({ maxLength: 30 }), fc.constant('=?base64?aGVsbG8=?=')),
      contentType: fc.constantFrom('application/json', 'application/json; charset=utf-8', 'text/plain'),
      authorization: fc.constantFrom(`Bearer ${KEY}`, `Bearer ${KEY}`, `Bearer ${KEY}`, `bearer ${KEY}`, 'Bearer nope', 'Basic abc', 'Bearer', `Bearer  ${KEY}`),
    },
    { requiredKeys: ['contentType'] },
  ),
});

const LEAK = /\bat [\w.<>]+ \(|node_modules|\/src\/|\.ts:\d|\{t:[0-9a-f-]{36}\}|:\{jobs\}:|ERR |ioredis/;

describe('fuzz: POST /mcp never crashes, answers per the error table, and a refused request writes nothing', () => {
  let redis: ThrowawayRedis;
  let c: Cluster;
  let client: Redis;
  before(async () => {
    redis = await startRedis();
    c = await startCluster({ gateways: 1, workers: 0, redisUrl: redis.url, env: { AUTH_API_KEYS: `fuzz:${KEY}`, RATE_LIMIT_REQUESTS_PER_MIN: '100000', RATE_LIMIT_TASK_CREATIONS_PER_MIN: '100000' } });
    client = new Redis(redis.url);
    // The gateway's BullMQ queues write their `meta` keys once, shortly after start: wait for
    // them, so the key set only changes through requests from here on.
    await waitFor(async () => (await client.keys('*:meta')).length >= 2, 10_000, 50, 'the queues\' meta keys');
  });
  after(async () => {
    client?.disconnect();
    await c?.stop();
    await redis?.stop();
  });

  it('300 random requests', async () => {
    const url = c.urls[0]!;
    const keysNow = async () => new Set((await client.keys('*')).filter((k) => !k.includes(':rl:')));
    let requests = 0;
    await fc.assert(
      fc.asyncProperty(requestArb, async (r) => {
        requests++;
        let body: string;
        if (r.kind === 'text') body = r.text;
        else if (r.kind === 'json') body = JSON.stringify(r.json);
        else {
          const b = validBody(r.method, r.tool, r.id, r.taskId);
          for (const m of r.mutations) mutate(b, m.path, m.value, m.del);
          body = JSON.stringify(b);
        }
        let parsedMethod: unknown;
        let parsedName: unknown;
        try {
          const p = JSON.parse(body);
          parsedMethod = p?.method;
          parsedName = p?.params?.name ?? p?.params?.taskId;
        } catch {
          /* not JSON */
        }
        const headers: Record<string, string> = { accept: 'application/json, text/event-stream', 'content-type': r.headers.contentType };
        if (r.headers.version !== undefined && r.headers.version !== '') headers['mcp-protocol-version'] = r.headers.version;
        if (r.headers.method !== undefined) headers['mcp-method'] = r.headers.method === '=same=' ? String(parsedMethod ?? '') : r.headers.method;
        if (r.headers.name !== undefined) headers['mcp-name'] = r.headers.name === '=same=' ? String(parsedName ?? '') : r.headers.name;
        if (r.headers.authorization !== undefined) headers.authorization = r.headers.authorization;
        for (const [k, v] of Object.entries(headers)) if (!/^[\t\x20-\x7e]*$/.test(v)) delete headers[k];

        const before = await keysNow();
        const ac = new AbortController();
        const timer = setTimeout(() => ac.abort(), 3000); // a valid synchronous call would run on; we only look at its start
        let status = 0;
        let text = '';
        let contentType = '';
        let held = false;
        let challenge = '';
        try {
          const res = await fetch(url, { method: 'POST', headers, body, signal: ac.signal });
          status = res.status;
          contentType = res.headers.get('content-type') ?? '';
          challenge = res.headers.get('www-authenticate') ?? '';
          text = await res.text();
        } catch (e) {
          if ((e as Error).name !== 'AbortError') throw e;
          held = true;
        } finally {
          clearTimeout(timer);
        }
        // A stream still open after 3 s (a valid synchronous call or listen stream): its start was
        // 200 text/event-stream; closing it cancels the call.
        if (held) {
          assert.ok(status === 0 || (status === 200 && contentType.includes('text/event-stream')), `held: status ${status} ${contentType}`);
          return true;
        }
        assert.doesNotMatch(text, LEAK, `a response leaks internals: ${text.slice(0, 300)}`);
        if (status === 202) {
          assert.equal(text, '');
          return true;
        }
        let msg: any;
        if (contentType.includes('text/event-stream')) {
          const frames = text.split(/\n\n/).map((f) => f.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim()).join('\n')).filter(Boolean);
          assert.ok(frames.length > 0, `an SSE response without a message: ${text.slice(0, 200)}`);
          msg = JSON.parse(frames[frames.length - 1]!);
        } else {
          assert.match(contentType, /application\/json/, `status ${status} with content-type ${contentType}: ${text.slice(0, 200)}`);
          msg = JSON.parse(text);
        }
        if (status === 401 || (status === 403 && msg.error?.data?.error === 'insufficient_scope')) {
          assert.match(challenge, /^Bearer/, 'a 401 carries a WWW-Authenticate challenge');
        }
        assert.equal(msg.jsonrpc, '2.0', text.slice(0, 200));
        assert.ok(('result' in msg) !== ('error' in msg), `exactly one of result / error: ${text.slice(0, 200)}`);
        if ('error' in msg) {
          assert.ok(Number.isInteger(msg.error.code) && typeof msg.error.message === 'string', text.slice(0, 200));
          const allowed = STATUS_FOR_CODE[msg.error.code];
          assert.ok(allowed, `a code outside the error table: ${msg.error.code} (${text.slice(0, 200)})`);
          assert.ok(allowed.includes(status), `code ${msg.error.code} answered with HTTP ${status}: ${text.slice(0, 200)}`);
          const after = await keysNow();
          const added = [...after].filter((k) => !before.has(k));
          assert.deepEqual(added, [], `a refused request wrote keys: ${added.join(', ')} (${body.slice(0, 200)} → ${text.slice(0, 200)})`);
        } else {
          assert.equal(status, 200);
        }
        return true;
      }),
      { numRuns: 300, seed: Number(process.env.FUZZ_SEED ?? Date.now() % 2 ** 31), endOnFailure: true },
    );
    assert.equal(requests, 300);
    assert.equal(c.gateways[0]!.proc.exitCode, null, 'the gateway is still running');
    const health = await fetch(url.replace(/\/mcp$/, '/healthz'));
    assert.equal(health.status, 200);
  });
});
