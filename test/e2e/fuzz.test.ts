// @needs redis redis-server
/**
 * Property-based fuzzing of `POST /mcp` (issue "Safe to expose", Tests): random and mutated
 * bodies, headers and tokens against a running gateway (real process, its own throwaway Redis).
 * For every request:
 *  - the answer is a well-formed JSON-RPC response (a result or an error with an integer code),
 *    an SSE stream ending with one, or a bare status the error table allows (202 for an accepted
 *    notification, 401/403 with a challenge);
 *  - the HTTP status is the one the error table (docs/errors.md) gives its code;
 *  - no response carries a stack, a file path or a Redis key name;
 *  - a refused request (an error answer) leaves no key in Redis that was not there before
 *    (rate-limit counters excepted: every authenticated request counts, by design);
 * and the gateway never crashes. No worker runs, so nothing but requests writes to this Redis.
 *
 * Then bodies shaped near the request limits (MAX_BODY_BYTES, MAX_UNAUTHENTICATED_BODY_BYTES,
 * MAX_JSON_KEYS, nesting depth 64, prototype keys), with, without and with a wrong credential,
 * sized around each threshold and around the parser's 4 KiB switch, sent in random pieces that
 * may split a multi-byte character: each gets exactly the answer its shape calls for (an oracle
 * computes it from the body: 401, 413, 400 with -32600 or -32700, or served), never a 5xx; a
 * refusal writes nothing; `/healthz` answers at once after each; the gateway never exits.
 *
 * Then the worker-side limits (design D9, cases N-08, N-09): random mixes of steps that sleep,
 * overrun their time limit, return results of random sizes or are cancelled at random moments,
 * each run by a principal of its own, on one gateway and two workers. For every mix:
 *  - no more of the principal's steps run at once than MAX_RUNNING_STEPS_PER_PRINCIPAL (from the
 *    start and end times the `side_effect` tool writes, not from the service's own count);
 *  - every task ends, and ends as its limits say: completed, cancelled, or failed with the
 *    reason of a limit it met (time, result size, stored result bytes), nothing else;
 *  - the principal's stored results never exceed MAX_RESULT_BYTES_PER_PRINCIPAL, and the count
 *    equals the bytes really stored; once all ended, no share is held or waiting, and every key
 *    of the principal expires.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { PrincipalShares, principalTag, ResultBudget, TaskStore } from '@mcp-tasks/task-store';
import { sleep, startCluster, startRedis, waitFor, type Cluster, type ThrowawayRedis } from '../support/cluster.js';
import { callTool, cancelTask, getTask, isTerminal } from '../support/mcp.js';
import { mcpHeaders, send, sendInPieces } from '../support/raw-http.js';
import {
  arr,
  chain,
  depthOf,
  envelope,
  keysOf,
  manyKeys,
  obj,
  poisoned,
  serialise,
  str,
  type Shape,
} from '../support/json-shapes.js';

const VERSION = '2026-07-28';
/** The one principal's API key (the fuzz also sends none, malformed and unknown ones). */
const KEY = 'fuzz-key-0123456789abcdef';
const TASKS = 'io.modelcontextprotocol/tasks';
const METHODS = [
  'server/discover',
  'tools/list',
  'tools/call',
  'tasks/get',
  'tasks/update',
  'tasks/cancel',
  'tasks/list',
  'tasks/result',
  'subscriptions/listen',
  'initialize',
  'ping',
  'resources/list',
  'nope/x',
];
const TOOLS = [
  'countdown',
  'deep_research',
  'share_report',
  'add',
  'task_status',
  'slow_echo',
  'ask_confirm',
  'greet',
  'missing_tool',
];

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
  if (method === 'tools/call')
    Object.assign(params, {
      name: tool,
      arguments: tool === 'add' ? { a: 1, b: 2 } : { seconds: 1, topic: 't', channel: '#c', taskId },
    });
  if (method.startsWith('tasks/'))
    Object.assign(params, { taskId, inputResponses: { k: { action: 'accept', content: {} } } });
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
  ['id'],
  ['jsonrpc'],
  ['method'],
  ['params'],
  ['params', 'name'],
  ['params', 'arguments'],
  ['params', 'arguments', 'seconds'],
  ['params', 'taskId'],
  ['params', 'inputResponses'],
  ['params', 'requestState'],
  ['params', '_meta'],
  ['params', '_meta', 'io.modelcontextprotocol/protocolVersion'],
  ['params', '_meta', 'io.modelcontextprotocol/clientCapabilities'],
  ['params', '_meta', 'io.modelcontextprotocol/clientCapabilities', 'extensions'],
  ['params', '_meta', 'progressToken'],
  ['params', 'notifications', 'taskIds'],
  ['params', 'task'],
);

const requestArb = fc.record({
  kind: fc.constantFrom('mutated', 'mutated', 'mutated', 'json', 'text'),
  method: fc.constantFrom(...METHODS),
  tool: fc.constantFrom(...TOOLS),
  id: fc.oneof(fc.integer({ min: 0, max: 1e6 }), fc.string({ maxLength: 12 })),
  taskId: fc.oneof(fc.uuid(), fc.constant('not-a-task'), fc.string({ maxLength: 40 })),
  mutations: fc.array(fc.record({ path: pathArb, value: fc.jsonValue({ maxDepth: 3 }), del: fc.boolean() }), {
    maxLength: 3,
  }),
  json: fc.jsonValue({ maxDepth: 4 }),
  text: fc.string({ maxLength: 200 }),
  headers: fc.record(
    {
      version: fc.constantFrom(VERSION, '2025-11-25', '2099-01-01', '', 'x'),
      method: fc.oneof(fc.constant('=same='), fc.constantFrom(...METHODS), fc.string({ maxLength: 20 })),
      name: fc.oneof(fc.constant('=same='), fc.string({ maxLength: 30 }), fc.constant('=?base64?aGVsbG8=?=')),
      contentType: fc.constantFrom('application/json', 'application/json; charset=utf-8', 'text/plain'),
      authorization: fc.constantFrom(
        `Bearer ${KEY}`,
        `Bearer ${KEY}`,
        `Bearer ${KEY}`,
        `bearer ${KEY}`,
        'Bearer nope',
        'Basic abc',
        'Bearer',
        `Bearer  ${KEY}`,
      ),
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
    c = await startCluster({
      gateways: 1,
      workers: 0,
      redisUrl: redis.url,
      env: {
        AUTH_API_KEYS: `fuzz:${KEY}`,
        RATE_LIMIT_REQUESTS_PER_MIN: '100000',
        RATE_LIMIT_TASK_CREATIONS_PER_MIN: '100000',
      },
    });
    client = new Redis(redis.url);
    // The gateway's BullMQ queues write their `meta` keys once, shortly after start: wait for
    // them, so the key set only changes through requests from here on.
    await waitFor(async () => (await client.keys('*:meta')).length >= 2, 10_000, 50, "the queues' meta keys");
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
        const headers: Record<string, string> = {
          accept: 'application/json, text/event-stream',
          'content-type': r.headers.contentType,
        };
        if (r.headers.version !== undefined && r.headers.version !== '')
          headers['mcp-protocol-version'] = r.headers.version;
        if (r.headers.method !== undefined)
          headers['mcp-method'] = r.headers.method === '=same=' ? String(parsedMethod ?? '') : r.headers.method;
        if (r.headers.name !== undefined)
          headers['mcp-name'] = r.headers.name === '=same=' ? String(parsedName ?? '') : r.headers.name;
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
          assert.ok(
            status === 0 || (status === 200 && contentType.includes('text/event-stream')),
            `held: status ${status} ${contentType}`,
          );
          return true;
        }
        assert.doesNotMatch(text, LEAK, `a response leaks internals: ${text.slice(0, 300)}`);
        if (status === 202) {
          assert.equal(text, '');
          return true;
        }
        let msg: any;
        if (contentType.includes('text/event-stream')) {
          const frames = text
            .split(/\n\n/)
            .map((f) =>
              f
                .split('\n')
                .filter((l) => l.startsWith('data:'))
                .map((l) => l.slice(5).trim())
                .join('\n'),
            )
            .filter(Boolean);
          assert.ok(frames.length > 0, `an SSE response without a message: ${text.slice(0, 200)}`);
          msg = JSON.parse(frames[frames.length - 1]!);
        } else {
          assert.match(
            contentType,
            /application\/json/,
            `status ${status} with content-type ${contentType}: ${text.slice(0, 200)}`,
          );
          msg = JSON.parse(text);
        }
        if (status === 401 || (status === 403 && msg.error?.data?.error === 'insufficient_scope')) {
          assert.match(challenge, /^Bearer/, 'a 401 carries a WWW-Authenticate challenge');
        }
        assert.equal(msg.jsonrpc, '2.0', text.slice(0, 200));
        assert.ok('result' in msg !== 'error' in msg, `exactly one of result / error: ${text.slice(0, 200)}`);
        if ('error' in msg) {
          assert.ok(Number.isInteger(msg.error.code) && typeof msg.error.message === 'string', text.slice(0, 200));
          const allowed = STATUS_FOR_CODE[msg.error.code];
          assert.ok(allowed, `a code outside the error table: ${msg.error.code} (${text.slice(0, 200)})`);
          assert.ok(
            allowed.includes(status),
            `code ${msg.error.code} answered with HTTP ${status}: ${text.slice(0, 200)}`,
          );
          const after = await keysNow();
          const added = [...after].filter((k) => !before.has(k));
          assert.deepEqual(
            added,
            [],
            `a refused request wrote keys: ${added.join(', ')} (${body.slice(0, 200)} → ${text.slice(0, 200)})`,
          );
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

describe('fuzz: bodies near the request limits (size, depth, keys, prototype keys) get the answer their shape calls for, never a 5xx; the gateway stays healthy', () => {
  const MAX_BODY = 65_536;
  const MAX_UNAUTHENTICATED = 16_384;
  const MAX_KEYS = 100;
  const MAX_DEPTH = 64;
  const LIMIT_KEY = 'fuzz-limits-key-0123456789abcdef';
  /** The failed-authentication counter of a client address (apps/gateway/src/limits.ts). */
  const AUTH_COUNTER = /:rl:auth:[0-9a-f]{64}$/;
  let redis: ThrowawayRedis;
  let c: Cluster;
  let client: Redis;
  before(async () => {
    redis = await startRedis();
    c = await startCluster({
      gateways: 1,
      workers: 0,
      redisUrl: redis.url,
      env: { AUTH_API_KEYS: `fuzz:${LIMIT_KEY}`, MAX_BODY_BYTES: String(MAX_BODY), MAX_JSON_KEYS: String(MAX_KEYS) },
    });
    client = new Redis(redis.url);
    await waitFor(async () => (await client.keys('*:meta')).length >= 2, 10_000, 50, "the queues' meta keys");
  });
  after(async () => {
    client?.disconnect();
    await c?.stop();
    await redis?.stop();
  });

  const poisonArb = fc.constantFrom(
    null,
    null,
    null,
    'proto',
    'constructor',
    'proto-escaped',
    'constructor-escaped',
    'lookalike',
  );
  const shapeArb = fc.record({
    credentials: fc.constantFrom('key', 'key', 'none', 'wrong'),
    depth: fc.oneof(fc.constantFrom(MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1), fc.integer({ min: 0, max: 70 })),
    objectAt: fc.array(fc.boolean(), { minLength: 80, maxLength: 80 }),
    keys: fc.oneof(fc.constantFrom(MAX_KEYS - 1, MAX_KEYS, MAX_KEYS + 1), fc.integer({ min: 0, max: 130 })),
    poison: poisonArb,
    poisonDeep: fc.boolean(),
    unicode: fc.boolean(),
    bytes: fc.oneof(
      fc.constantFrom(
        4095,
        4096,
        4097,
        MAX_UNAUTHENTICATED - 1,
        MAX_UNAUTHENTICATED,
        MAX_UNAUTHENTICATED + 1,
        MAX_BODY - 1,
        MAX_BODY,
        MAX_BODY + 1,
      ),
      fc.integer({ min: 0, max: MAX_BODY + 4096 }),
      fc.constant(undefined),
    ),
    pieces: fc.array(fc.integer({ min: 1, max: 6000 }), { maxLength: 5 }),
    delayMs: fc.integer({ min: 0, max: 5 }),
    // No Content-Length: the size is only known as the body arrives.
    chunked: fc.boolean(),
  });

  /** The body of `r`: a discover whose params hold a chain nested to about `depth`, `keys` keys in all, a poison, padding. */
  function bodyOf(r: typeof shapeArb extends fc.Arbitrary<infer T> ? T : never): Shape {
    const poisonEntry = (): [string, Shape] | undefined => {
      const escape = r.poison?.endsWith('-escaped') ?? false;
      if (r.poison?.startsWith('proto')) return ['p', obj([['__proto__', obj([['admin', str('yes')]])]], escape)];
      if (r.poison?.startsWith('constructor'))
        return ['p', obj([['constructor', obj([['prototype', obj([['admin', str('yes')]])]], escape)]], escape)];
      if (r.poison === 'lookalike')
        return [
          'p',
          obj([
            ['constructor', arr([obj([['prototype', str('x')]])])],
            ['prototype', str('__proto__')],
          ]),
        ];
      return undefined;
    };
    const build = (levels: number, fill: number): Shape => {
      const p = poisonEntry();
      const leaf = p && r.poisonDeep ? obj([p]) : str('leaf');
      const extra: [string, Shape][] = [['x', chain(Math.max(0, levels), (i) => r.objectAt[i] ?? false, leaf)]];
      if (p && !r.poisonDeep) extra.push(p);
      if (r.unicode) extra.push(['u', str('é€𝄞'.repeat(50))]);
      if (fill > 0) extra.push(['fill', manyKeys(fill - 1)]);
      return envelope('server/discover', extra, r.bytes);
    };
    // Nesting first (params is depth 2, so `x` adds depth - 2), then keys up to the target.
    let levels = r.depth - 2;
    for (let i = 0; i < 3 && depthOf(build(levels, 0)) !== r.depth && r.depth > 6; i++)
      levels += r.depth - depthOf(build(levels, 0));
    const fill = r.keys - keysOf(build(levels, 0));
    return build(levels, fill);
  }

  it('500 bodies', { timeout: 600_000 }, async (t) => {
    const port = c.gateways[0]!.port!;
    const seen: Record<string, number> = {};
    let slowestHealthMs = 0;
    await fc.assert(
      fc.asyncProperty(shapeArb, async (r) => {
        const shape = bodyOf(r);
        const body = serialise(shape);
        const bytes = Buffer.byteLength(body);
        const depth = depthOf(shape);
        const keys = keysOf(shape);
        // The oracle: credentials are checked first, then the size, then the shape.
        let expected: { status: number; codes: number[]; why: string };
        const limit = r.credentials === 'key' ? MAX_BODY : MAX_UNAUTHENTICATED;
        const violations: [number, string][] = [];
        if (depth > MAX_DEPTH) violations.push([-32600, 'depth']);
        if (keys > MAX_KEYS) violations.push([-32600, 'keys']);
        if (poisoned(shape)) violations.push([-32700, 'prototype']);
        if (r.credentials === 'wrong') expected = { status: 401, codes: [-32600], why: 'wrong key' };
        else if (bytes > limit && !r.chunked)
          expected = { status: 413, codes: [-32600], why: `size (${r.credentials})` };
        // Chunked, the parse runs while the body arrives: a shape limit met before the size one wins.
        else if (bytes > limit && violations.length)
          expected = {
            status: -1,
            codes: [-32600, ...violations.map((v) => v[0])],
            why: `size or shape (${r.credentials})`,
          };
        else if (bytes > limit) expected = { status: 413, codes: [-32600], why: `size (${r.credentials}, chunked)` };
        else if (violations.length)
          expected = { status: 400, codes: violations.map((v) => v[0]), why: violations.map((v) => v[1]).join('+') };
        else expected = { status: 200, codes: [], why: `served (${r.credentials})` };
        const label = `${expected.why}, ${bytes <= 4096 ? 'small' : 'streamed'}`;
        seen[label] = (seen[label] ?? 0) + 1;

        const token = r.credentials === 'key' ? LIMIT_KEY : r.credentials === 'wrong' ? 'w'.repeat(40) : undefined;
        const keysBefore = (await client.keys('*')).sort();
        const res = await sendInPieces({
          port,
          // A wrong key is sent as a tools/list: on the discover probe it would count as no key
          // (auth/hooks.ts), and the refusal before the body is what this credential is about.
          headers: mcpHeaders(r.credentials === 'wrong' ? 'tools/list' : 'server/discover', token),
          body,
          pieces: r.pieces,
          delayMs: r.delayMs,
          chunked: r.chunked,
        });
        const what = `${label}: ${bytes} bytes${r.chunked ? ' chunked' : ''}, depth ${depth}, ${keys} keys, poison ${r.poison}${r.poisonDeep ? ' (deep)' : ''}, pieces ${JSON.stringify(r.pieces)} → ${res.status} ${res.error ?? ''} ${res.text.slice(0, 200)}`;
        assert.ok(res.status > 0 && res.status < 500, what);
        if (expected.status === -1) assert.ok(res.status === 413 || res.status === 400, what);
        else assert.equal(res.status, expected.status, what);
        assert.match(res.type, /^application\/json/, what);
        const msg = JSON.parse(res.text);
        assert.equal(msg.jsonrpc, '2.0', what);
        if (expected.status === 200) assert.ok(msg.result?.supportedVersions, what);
        else {
          assert.ok(expected.codes.includes(msg.error?.code), what);
          // A refusal writes nothing (a wrong key counts against its client address, by design).
          const added = (await client.keys('*'))
            .sort()
            .filter((k) => !keysBefore.includes(k) && !(r.credentials === 'wrong' && AUTH_COUNTER.test(k)));
          assert.deepEqual(added, [], `${what}; keys written: ${added.join(', ')}`);
        }
        // The gateway stays responsive: /healthz answers at once.
        const t0 = performance.now();
        const health = await send({ port, path: '/healthz', method: 'GET', timeoutMs: 5000 });
        const healthMs = performance.now() - t0;
        slowestHealthMs = Math.max(slowestHealthMs, healthMs);
        assert.equal(health.status, 200, `/healthz after ${what}`);
        assert.ok(healthMs < 1000, `/healthz took ${healthMs.toFixed(0)} ms after ${what}`);
        return true;
      }),
      { numRuns: 500, seed: Number(process.env.FUZZ_SEED ?? Date.now() % 2 ** 31), endOnFailure: true },
    );
    t.diagnostic(`outcomes: ${JSON.stringify(seen)}; slowest /healthz ${slowestHealthMs.toFixed(0)} ms`);
    assert.equal(c.gateways[0]!.proc.exitCode, null, 'the gateway is still running');
    // Every kind of answer was met, on both parser paths where it can be (else the generator broke).
    // (A chunked body over its size limit with no shape fault is rarer; limits.test.ts has it.)
    const kinds = Object.keys(seen).join(' ');
    for (const k of [
      'wrong key',
      'size (key)',
      'size (none)',
      'depth',
      'keys',
      'prototype',
      'served (key)',
      'served (none)',
    ])
      assert.ok(kinds.includes(k), `no body got "${k}" (${kinds})`);
    for (const k of ['depth', 'keys', 'prototype', 'served'])
      for (const path of ['small', 'streamed'])
        assert.ok(
          Object.keys(seen).some((s) => s.includes(k) && s.endsWith(path)),
          `no "${k}" body on the ${path} path (${kinds})`,
        );
  });
});

describe('fuzz: the worker-side limits hold for random mixes of steps (share, time limit, stored result bytes)', () => {
  const RUNS = 6;
  const SHARE = 2;
  const BUDGET = 8_000;
  const keys = Array.from({ length: RUNS }, (_, i) => `fuzz-limits-${i}-0123456789abcdef`);
  let redis: ThrowawayRedis;
  let c: Cluster;
  let dir: string;
  before(async () => {
    redis = await startRedis();
    dir = mkdtempSync(join(tmpdir(), 'mcp-fuzz-limits-'));
    c = await startCluster({
      gateways: 1,
      workers: 2,
      redisUrl: redis.url,
      env: {
        AUTH_API_KEYS: keys.map((k, i) => `p${i}:${k}`).join(','),
        MAX_RUNNING_STEPS_PER_PRINCIPAL: String(SHARE),
        TOOL_TIMEOUT_MS: '1000',
        MAX_RESULT_BYTES: '4096',
        MAX_RESULT_BYTES_PER_PRINCIPAL: String(BUDGET),
        TESTING_SIDE_EFFECT_DIR: dir,
      },
    });
  });
  after(async () => {
    await c?.stop();
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const stepArb = fc.oneof(
    fc.record({ kind: fc.constant('effect' as const), delayMs: fc.integer({ min: 0, max: 1600 }) }),
    fc.record({ kind: fc.constant('result' as const), bytes: fc.integer({ min: 0, max: 5000 }) }),
    fc.record({
      kind: fc.constant('limited' as const),
      seconds: fc.constantFrom(0, 0.5, 1.5, 3),
      ignoreSignal: fc.boolean(),
    }),
  );
  // About one step in four is cancelled, at a random moment (queued, waiting, running or ended).
  const cancelArb = fc.oneof(
    { arbitrary: fc.constant(null), weight: 3 },
    { arbitrary: fc.integer({ min: 0, max: 1500 }), weight: 1 },
  );
  const mixArb = fc.array(fc.record({ step: stepArb, cancelAfterMs: cancelArb }), { minLength: 1, maxLength: 7 });

  it(`${RUNS} random mixes`, async (t) => {
    let run = 0;
    const seen: Record<string, number> = {};
    await fc.assert(
      fc.asyncProperty(mixArb, async (mix) => {
        const i = run++;
        const token = keys[i]!;
        const principal = `key:p${i}`;
        const url = c.urls[0]!;
        const tasks = await Promise.all(
          mix.map(async ({ step, cancelAfterMs }, j) => {
            const marker = `r${i}-${j}`;
            const [tool, args] =
              step.kind === 'effect'
                ? ['side_effect', { marker, delaySeconds: step.delayMs / 1000 }]
                : step.kind === 'result'
                  ? ['big_result', { bytes: step.bytes }]
                  : ['time_limited', { seconds: step.seconds, ignoreSignal: step.ignoreSignal }];
            const r = await callTool(url, tool, args, { token });
            assert.equal(r.body.result?.resultType, 'task', JSON.stringify(r.body));
            const taskId = r.body.result!.taskId as string;
            if (cancelAfterMs !== null)
              void sleep(cancelAfterMs)
                .then(() => cancelTask(url, taskId, { token }))
                .catch(() => undefined);
            return { taskId, step, marker };
          }),
        );
        // Every task ends, as its limits say.
        const finals = await Promise.all(
          tasks.map(async (t) => {
            const final = await waitFor(
              async () => {
                const r = (await getTask(url, t.taskId, { token })).body.result;
                return r && isTerminal(r.status) ? r : undefined;
              },
              60_000,
              100,
              `task ${t.taskId} (${JSON.stringify(t.step)}) ended`,
            );
            return { ...t, final };
          }),
        );
        for (const { step, final } of finals) {
          const outcome = `${step.kind}:${final.status}${final.error?.data?.reason ? `:${final.error.data.reason}` : ''}`;
          seen[outcome] = (seen[outcome] ?? 0) + 1;
          const why = `${JSON.stringify(step)} → ${JSON.stringify({ status: final.status, error: final.error })}`;
          if (final.status === 'failed') {
            const reason = final.error?.data?.reason;
            const allowed =
              step.kind === 'result'
                ? ['result_too_large', 'result_budget_exceeded']
                : ['tool_timeout', 'result_budget_exceeded'];
            assert.ok(allowed.includes(reason), why);
            if (reason === 'tool_timeout')
              assert.ok(step.kind === 'effect' ? step.delayMs > 900 : step.kind === 'limited' && step.seconds > 1, why);
          } else if (final.status === 'completed') {
            if (step.kind === 'effect') assert.ok(step.delayMs < 1100, why);
            if (step.kind === 'limited') assert.ok(step.seconds < 2, why);
            if (step.kind === 'result') assert.ok(step.bytes < 4096, why);
          }
        }
        // Never more than SHARE of the principal's steps at once, from the tool's own timestamps.
        const spans: [number, number][] = [];
        for (const t of finals.filter((x) => x.step.kind === 'effect')) {
          const at = (suffix: string) => {
            const f = join(dir, `${t.marker}${suffix}`);
            return existsSync(f) ? Number(readFileSync(f, 'utf8')) : undefined;
          };
          const start = at('.started');
          const end = at('') ?? at('.aborted');
          if (start !== undefined && end !== undefined) spans.push([start, end]);
        }
        const events = spans.flatMap(([a, b]) => [
          [a, 1],
          [b, -1],
        ]) as [number, number][];
        events.sort((x, y) => x[0] - y[0] || x[1] - y[1]);
        let now = 0;
        let peak = 0;
        for (const [, d] of events) peak = Math.max(peak, (now += d));
        assert.ok(peak <= SHARE, `${peak} steps of one principal ran at once`);
        // Stored results: within the budget, and counted exactly.
        const client = c.redis;
        const store = new TaskStore(client, c.prefix);
        const stored = await Promise.all(
          finals
            .filter((t) => t.final.status === 'completed')
            .map(async (t) => Number(await client.strlen(store.resultKey(t.taskId)))),
        );
        const total = stored.reduce((a, b) => a + b, 0);
        assert.ok(total <= BUDGET, `${total} bytes stored`);
        assert.equal(await new ResultBudget(store, BUDGET).stored(principal), total);
        // Nothing held once all ended; every key of the principal expires.
        const shares = new PrincipalShares(store, SHARE, 4000);
        await waitFor(async () => (await shares.running(principal)) === 0, 10_000, 50, 'no share held');
        const mine = (await c.keys()).filter((k) => k.includes(`{p:${principalTag(principal)}}`));
        for (const k of mine) assert.ok((await client.pttl(k)) > 0, `${k} expires`);
        return true;
      }),
      { numRuns: RUNS, seed: Number(process.env.FUZZ_SEED ?? Date.now() % 2 ** 31), endOnFailure: true },
    );
    assert.equal(run, RUNS);
    t.diagnostic(`outcomes: ${JSON.stringify(seen)}`);
    // A step cancelled while it waited for the share leaves the line when its job comes due again
    // (at most 30 s later) or is woken: no line keeps an entry for good.
    const shares = new PrincipalShares(new TaskStore(c.redis, c.prefix), SHARE, 4000);
    await waitFor(
      async () => (await Promise.all(keys.map((_, i) => shares.waiting(`key:p${i}`)))).every((w) => w.length === 0),
      40_000,
      250,
      'every waiting line empty',
    );
  });
});
