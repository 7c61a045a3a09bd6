/**
 * The memo of validation verdicts (apps/gateway/src/verdicts.ts, issue 8 §2): two requests get
 * the same shape key only when the ladder cannot tell them apart (ids of one type, a task id
 * equal to its Mcp-Name header, any object of arguments), and the memo never stands in for a
 * refusal: classify() answers a mismatching header the same after the shape was accepted.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { classify } from '../../apps/gateway/src/classify.js';
import { ladderShapeKey } from '../../apps/gateway/src/verdicts.js';
import { ToolRegistry } from '../../packages/tools/src/internal.js';

const META = {
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientCapabilities': { extensions: { 'io.modelcontextprotocol/tasks': {} } },
};
const get = (id: unknown, taskId: unknown, meta: Record<string, unknown> = META) => ({
  jsonrpc: '2.0',
  id,
  method: 'tasks/get',
  params: { taskId, _meta: meta },
});
const headers = (name: string | undefined, version = '2026-07-28') => ({
  httpMethod: 'POST',
  protocolVersion: version,
  method: 'tasks/get',
  name,
});

describe('verdicts: shape keys', () => {
  it('tasks/get: one key for any id of a type and any plain task id that equals Mcp-Name', () => {
    const a = randomUUID();
    const b = randomUUID();
    const k = ladderShapeKey(headers(a), get(1, a));
    assert.ok(k);
    assert.equal(ladderShapeKey(headers(b), get(7, b)), k);
    assert.notEqual(ladderShapeKey(headers(b), get('7', b)), k, 'a string id is another shape');
  });

  it('no key when the header check depends on the value: Mcp-Name differs or is absent, a Base64 sentinel, an odd id', () => {
    const a = randomUUID();
    assert.equal(ladderShapeKey(headers(randomUUID()), get(1, a)), undefined);
    assert.equal(ladderShapeKey(headers(undefined), get(1, a)), undefined);
    const sentinel = `=?base64?${Buffer.from(a).toString('base64')}?=`;
    assert.equal(ladderShapeKey(headers(sentinel), get(1, sentinel)), undefined);
    assert.equal(ladderShapeKey(headers(a), get(1.5, a)), undefined);
    assert.equal(ladderShapeKey(headers(a), get(null, a)), undefined);
    assert.equal(ladderShapeKey(headers(a), get(1, 'x'.repeat(300))), undefined, 'a long id is validated in full');
  });

  it('other headers or another _meta are another shape; tools/call keys ignore the argument values only', () => {
    const a = randomUUID();
    const k = ladderShapeKey(headers(a), get(1, a));
    assert.notEqual(ladderShapeKey(headers(a, '2025-11-25'), get(1, a)), k);
    assert.notEqual(
      ladderShapeKey(
        headers(a),
        get(1, a, { ...META, 'io.modelcontextprotocol/clientInfo': { name: 'x', version: '1' } }),
      ),
      k,
    );
    const call = (args: unknown) => ({
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name: 'add', arguments: args, _meta: META },
    });
    const h = { httpMethod: 'POST', protocolVersion: '2026-07-28', method: 'tools/call', name: 'add' };
    assert.equal(ladderShapeKey(h, call({ a: 1, b: 2 })), ladderShapeKey(h, call({ a: 5 })));
    assert.equal(ladderShapeKey(h, call([1, 2])), undefined, 'arguments that are not an object are validated in full');
    assert.equal(ladderShapeKey({ ...h, name: 'other' }, call({ a: 1 })), undefined);
  });
});

describe('verdicts: shape keys read off the raw text of a poll', () => {
  const text = (b: unknown) => JSON.stringify(b);
  const structural = (name: string, b: Record<string, unknown>) => ladderShapeKey(headers(name), structuredClone(b));

  it('one key for any id of a type and any task id, another for another id type', () => {
    const a = randomUUID();
    const b = randomUUID();
    const k = ladderShapeKey(headers(a), get(1, a), text(get(1, a)));
    assert.ok(k);
    assert.notEqual(k, structural(a, get(1, a)), 'read off the text');
    assert.equal(ladderShapeKey(headers(b), get(123456, b), text(get(123456, b))), k);
    const s = ladderShapeKey(headers(b), get('x-1', b), text(get('x-1', b)));
    assert.ok(s);
    assert.notEqual(s, k, 'a string id is another shape');
    assert.equal(ladderShapeKey(headers(a), get('y', a), text(get('y', a))), s);
  });

  it('the JSON key when the text does not pin the values down', () => {
    const a = randomUUID();
    const cases: [string, Record<string, unknown>, string][] = [
      ['an escape sequence', get(1, a), text(get(1, a)).replace('tasks/get', 'tasks\\/get')],
      ['"id": twice', get(1, a, { ...META, id: 1 }), text(get(1, a, { ...META, id: 1 }))],
      ['the task id twice', get(1, a, { ...META, x: a }), text(get(1, a, { ...META, x: a }))],
      ['an id written otherwise', get(1, a), text(get(1, a)).replace('"id":1', '"id":1.0')],
    ];
    for (const [what, body, raw] of cases) {
      assert.deepEqual(JSON.parse(raw), body, what);
      assert.equal(ladderShapeKey(headers(a), structuredClone(body), raw), structural(a, body), what);
    }
    const notMinted = 'plain-token';
    assert.equal(
      ladderShapeKey(headers(notMinted), get(1, notMinted), text(get(1, notMinted))),
      structural(notMinted, get(1, notMinted)),
      'a task id this service does not mint',
    );
  });

  it('texts written differently are different shapes, never confused', () => {
    const a = randomUUID();
    const b = randomUUID();
    const k = ladderShapeKey(headers(a), get(1, a), text(get(1, a)));
    const pretty = ladderShapeKey(headers(a), get(1, a), JSON.stringify(get(1, a), null, 1));
    assert.ok(pretty);
    assert.notEqual(pretty, k);
    assert.notEqual(pretty, structural(a, get(1, a)), 'spacing around the colons is read off the text too');
    assert.equal(ladderShapeKey(headers(b), get(2, b), JSON.stringify(get(2, b), null, 1)), pretty);
    // The top-level id written with spacing, the same value under "id": in _meta: that one is
    // masked, the top-level id stays in the key, so another top-level id is another key.
    const nested = (id: number, t: string) => {
      const body = get(id, t, { ...META, id });
      return [body, text(body).replace(`"id":${id},"method"`, `"id" :${id},"method"`)] as const;
    };
    const [b1, t1] = nested(1, a);
    const [b2, t2] = nested(2, b);
    assert.deepEqual(JSON.parse(t1), b1);
    assert.notEqual(ladderShapeKey(headers(a), b1, t1), ladderShapeKey(headers(b), b2, t2));
  });

  it('the JSON key leaves the body as it was', () => {
    const a = randomUUID();
    const body = get(7, a);
    ladderShapeKey(headers(a), body);
    assert.deepEqual(body, get(7, a));
    const call = {
      jsonrpc: '2.0',
      id: 'c',
      method: 'tools/call',
      params: { name: 'add', arguments: { a: 1 }, _meta: META },
    };
    const h = { httpMethod: 'POST', protocolVersion: '2026-07-28', method: 'tools/call', name: 'add' };
    assert.ok(ladderShapeKey(h, call));
    assert.deepEqual(call.params.arguments, { a: 1 });
    assert.equal(call.id, 'c');
  });
});

describe('verdicts: shape keys read off the raw text of a call', () => {
  const h = { httpMethod: 'POST', protocolVersion: '2026-07-28', method: 'tools/call', name: 'add' };
  const call = (id: unknown, args?: unknown, meta: Record<string, unknown> = META, name = 'add') => ({
    jsonrpc: '2.0',
    id,
    method: 'tools/call',
    params: { name, ...(args === undefined ? {} : { arguments: args }), _meta: meta },
  });
  const text = (b: unknown) => JSON.stringify(b);
  const structural = (b: Record<string, unknown>) => ladderShapeKey(h, structuredClone(b));
  const raw = (b: Record<string, unknown>, t = text(b)) => ladderShapeKey(h, structuredClone(b), t);

  it('one key for any id of a type and any object of arguments, read off the text', () => {
    const k = raw(call(1, { a: 1, b: 2 }));
    assert.ok(k);
    assert.notEqual(k, structural(call(1, { a: 1, b: 2 })), 'read off the text');
    const others = [
      {},
      { a: 5 },
      { id: 3, nested: { id: 4, list: [1, [2, { x: '}' }]], s: 'a]}{[' } },
      { s: 'arguments', t: 'id', u: ':{,' },
      { deep: { deeper: { deepest: [[[{}]]] } } },
    ];
    for (const args of others) {
      assert.equal(raw(call(987654, args)), k, JSON.stringify(args));
      assert.equal(structural(call(987654, args)), structural(call(1, { a: 1, b: 2 })), 'the JSON key agrees');
    }
    const s = raw(call('x-1', { a: 1 }));
    assert.ok(s);
    assert.notEqual(s, k, 'a string id is another shape');
    assert.equal(raw(call('other', { z: [] })), s);
    const none = raw(call(1));
    assert.ok(none);
    assert.notEqual(none, k, 'a call without arguments is another shape');
    assert.equal(raw(call(2)), none);
  });

  it('the JSON key when the text does not pin the values down; no key when the JSON key has none', () => {
    const cases: [string, Record<string, unknown>, string][] = [
      ['an escape sequence', call(1, { a: 'x"y' }), text(call(1, { a: 'x"y' }))],
      [
        'the key "arguments" twice',
        call(1, { a: 1 }, { ...META, arguments: {} }),
        text(call(1, { a: 1 }, { ...META, arguments: {} })),
      ],
      [
        'the key "id" twice outside the arguments',
        call(1, { a: 1 }, { ...META, id: 1 }),
        text(call(1, { a: 1 }, { ...META, id: 1 })),
      ],
      [
        'the id key inside _meta too',
        call(1, { a: 1 }, { ...META, id: 2 }),
        text(call(1, { a: 1 }, { ...META, id: 2 })),
      ],
    ];
    for (const [what, body, t] of cases) {
      assert.deepEqual(JSON.parse(t), body, what);
      assert.ok(structural(body), what);
      assert.equal(raw(body, t), structural(body), what);
    }
    // "arguments" or "id" as a string value is not a key: read off the text.
    const valued = call(1, { a: 1 }, { ...META, x: 'arguments', y: 'id' });
    assert.notEqual(raw(valued), structural(valued));
    assert.equal(raw(call(5, { b: 2 }, { ...META, x: 'arguments', y: 'id' })), raw(valued));
    // Spacing around the colons is read (Python's json.dumps writes `"id": 1`).
    const spaced = JSON.stringify(call(1, { a: 1 }), null, 1);
    assert.notEqual(raw(call(1, { a: 1 }), spaced), structural(call(1, { a: 1 })));
    assert.equal(
      raw(call(2, { b: [1] }), JSON.stringify(call(2, { b: [1] }), null, 1)),
      raw(call(1, { a: 1 }), spaced),
    );
    for (const [what, body] of [
      ['arguments that are not an object', call(1, [1, 2])],
      ['arguments that are a string', call(1, 'x')],
      ['a tool name that is not a plain token', call(1, { a: 1 }, META, 'a b')],
      ['an odd id', call(1.5, { a: 1 })],
    ] as const) {
      assert.equal(raw(body), undefined, what);
      assert.equal(structural(body), undefined, what);
    }
    assert.equal(ladderShapeKey({ ...h, name: 'other' }, call(1, { a: 1 }), text(call(1, { a: 1 }))), undefined);
  });

  it('two texts with one raw key have one JSON key (random calls)', () => {
    // A small space of calls, so that many share a key: ids of both types, arguments of random
    // depth whose strings hold the characters the scan reads, three _meta, two tool names.
    let seed = 42;
    const rnd = (n: number) => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed % n;
    };
    const atoms = ['{', '}', '[', ']', ':', ',', 'id', 'arguments', '"id":'.replace(/"/g, ''), ' '];
    const value = (depth: number): unknown => {
      const k = rnd(depth > 2 ? 3 : 6);
      if (k === 0) return rnd(100);
      if (k === 1) return atoms[rnd(atoms.length)]! + atoms[rnd(atoms.length)]!;
      if (k === 2) return [true, null, false][rnd(3)];
      if (k === 3) return Array.from({ length: rnd(3) }, () => value(depth + 1));
      const o: Record<string, unknown> = {};
      for (let i = rnd(3); i > 0; i--) o[['id', 'a', 'arguments', 'x'][rnd(4)]!] = value(depth + 1);
      return o;
    };
    const metas = [
      META,
      { ...META, 'io.modelcontextprotocol/clientInfo': { name: 'x', version: '1' } },
      { ...META, y: 'z' },
    ];
    const byRaw = new Map<string, string | undefined>();
    let rawKeys = 0;
    for (let i = 0; i < 5000; i++) {
      const args = rnd(8) === 0 ? undefined : (value(1) as unknown);
      const id = rnd(2) ? rnd(1000) : `r${rnd(1000)}`;
      const name = rnd(2) ? 'add' : 'sub';
      const body = call(id, isObjectish(args) ? args : undefined, metas[rnd(metas.length)]!, name);
      const hh = { ...h, name };
      const t = text(body);
      const r = ladderShapeKey(hh, structuredClone(body), t);
      const j = ladderShapeKey(hh, structuredClone(body));
      if (r === undefined || r === j) continue;
      rawKeys++;
      if (byRaw.has(r)) assert.equal(byRaw.get(r), j, `raw key ${JSON.stringify(r)} stood for two JSON keys`);
      else byRaw.set(r, j);
    }
    assert.ok(rawKeys > 4000, `most calls get a raw key (${rawKeys})`);
    assert.ok(byRaw.size < rawKeys / 10, `calls share raw keys (${byRaw.size} keys)`);
  });
});

const isObjectish = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

describe('verdicts: classify with the memo', () => {
  it('an accepted shape does not make a mismatching or missing header pass afterwards', () => {
    const registry = new ToolRegistry([]);
    const a = randomUUID();
    const http = (name: string | undefined) => ({
      method: 'POST',
      headers: {
        'mcp-protocol-version': '2026-07-28',
        'mcp-method': 'tasks/get',
        ...(name === undefined ? {} : { 'mcp-name': name }),
      },
    });
    for (let i = 0; i < 3; i++) assert.equal(classify(get(i, a), registry, { http: http(a) }).rejected, undefined);
    const other = randomUUID();
    assert.equal(classify(get(9, a), registry, { http: http(other) }).rejected?.cell, 'name-header-mismatch');
    assert.equal(classify(get(9, a), registry, { http: http(undefined) }).rejected?.cell, 'name-header-missing');
    // The same with the raw text (the key a poll usually gets).
    const withText = (name: string | undefined, id: number) => ({
      http: { ...http(name), bodyText: JSON.stringify(get(id, a)) },
    });
    for (let i = 0; i < 3; i++) assert.equal(classify(get(i, a), registry, withText(a, i)).rejected, undefined);
    assert.ok(classify(get(1, a), registry, withText(a, 1)).shape, 'remembered');
    assert.equal(classify(get(9, a), registry, withText(other, 9)).rejected?.cell, 'name-header-mismatch');
    assert.equal(classify(get(9, a), registry, withText(undefined, 9)).rejected?.cell, 'name-header-missing');
    // And a shape refused once is refused again (refusals are not remembered, but not lost either).
    const noVersion = { method: 'POST', headers: { 'mcp-method': 'tasks/get', 'mcp-name': a } };
    assert.ok(classify(get(1, a), registry, { http: noVersion }).rejected);
    assert.ok(classify(get(2, a), registry, { http: noVersion }).rejected);
  });
});
