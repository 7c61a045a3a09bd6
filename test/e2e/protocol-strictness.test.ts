// @needs redis
/**
 * Protocol strictness where the spec is clear (issue 7, item 2), on two gateways and a worker:
 *  - B-05: a request whose `MCP-Protocol-Version` names 2026-07-28 but whose body lacks the
 *    `_meta` envelope (or its protocol version) is malformed: `-32602`, HTTP 400, never served
 *    on the 2025 lane;
 *  - K-01: `tools/list` (and the prompt and resource lists) are the same on every call and on
 *    every replica;
 *  - SEP-2243 (H-15, H-17): `Mcp-Param-*` headers checked against `x-mcp-header` arguments on
 *    every lane (inline, synchronous, task): absent, different, bad Base64 → `-32020`, HTTP 400,
 *    nothing created; numeric comparison for integers;
 *  - SEP-1303: arguments a tool's schema refuses are a tool execution error (`isError`), on
 *    every lane, and create nothing;
 *  - prompts, resources, completions and logging are advertised only when the enabled tool sets
 *    have them, and behave (MRTR on prompts across gateways, single use; SEP-2164; L-01).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startCluster, type Cluster, type Proc } from '../support/cluster.js';
import { callTool, PROTOCOL_VERSION, rpc, TASKS } from '../support/mcp.js';

const b64 = (s: string) => `=?base64?${Buffer.from(s, 'utf8').toString('base64')}?=`;

describe('protocol strictness (B-05, K-01, SEP-2243, SEP-1303) and the prompt/resource surface', () => {
  let c: Cluster;
  let demoOnly: Proc;
  let g1: string;
  let g2: string;

  before(async () => {
    c = await startCluster({ gateways: 2, workers: 1 });
    demoOnly = await c.addGateway({ MCP_TOOLSETS: 'demo' });
    g1 = c.urls[0]!;
    g2 = c.urls[1]!;
  });
  after(async () => {
    await c?.stop();
  });

  const taskKeys = async () => (await c.keys()).filter((k) => k.endsWith(':task')).length;

  describe('B-05: a 2026-07-28 header on a body without the _meta envelope', () => {
    for (const [what, params] of [
      ['no params', undefined],
      ['params without _meta', {}],
      ['_meta without the protocol version', { _meta: { 'io.modelcontextprotocol/clientCapabilities': {} } }],
    ] as const) {
      for (const method of ['server/discover', 'tools/list']) {
        it(`${method}, ${what}: -32602, HTTP 400, the id echoed`, async () => {
          const r = await rpc(
            g1,
            method,
            {},
            { id: 101, rawBody: JSON.stringify({ jsonrpc: '2.0', id: 101, method, ...(params ? { params } : {}) }) },
          );
          assert.equal(r.status, 400, JSON.stringify(r.body));
          assert.equal(r.body.error?.code, -32602);
          assert.match(
            r.body.error!.message,
            /MCP-Protocol-Version header names protocol revision 2026-07-28.*missing the required per-request envelope key/,
          );
          assert.equal(r.body.id, 101);
        });
      }
    }

    it('a tools/call of a worker tool without the envelope creates nothing', async () => {
      const before = await taskKeys();
      const r = await rpc(
        g1,
        'tools/call',
        { name: 'slow_echo' },
        {
          rawBody: JSON.stringify({
            jsonrpc: '2.0',
            id: 5,
            method: 'tools/call',
            params: { name: 'slow_echo', arguments: { seconds: 0 } },
          }),
        },
      );
      assert.equal(r.status, 400);
      assert.equal(r.body.error?.code, -32602);
      assert.equal(await taskKeys(), before);
    });

    it('the same body with a 2025 header (or none) is still served on the 2025 lane', async () => {
      for (const header of ['2025-11-25', null]) {
        const r = await rpc(
          g1,
          'tools/list',
          {},
          {
            headers: { 'mcp-protocol-version': header, 'mcp-method': null },
            rawBody: JSON.stringify({ jsonrpc: '2.0', id: 6, method: 'tools/list', params: {} }),
          },
        );
        assert.equal(r.status, 200, `${header}: ${JSON.stringify(r.body).slice(0, 300)}`);
        assert.ok(Array.isArray(r.body.result?.tools), `${header}: tools listed`);
      }
    });
  });

  describe('methods /mcp does not serve (RFC 9110 405; H-02 is for GET/DELETE, which serve 2025 sessions here)', () => {
    it('PUT and PATCH → 405 with Allow and a JSON-RPC error body, with or without a body', async () => {
      // (fetch refuses to send TRACE; the route refuses it the same way)
      for (const method of ['PUT', 'PATCH']) {
        for (const body of [undefined, '{"jsonrpc":"2.0","id":1,"method":"tools/list"}']) {
          const r = await fetch(c.urls[0]!, {
            method,
            ...(body ? { body, headers: { 'content-type': 'application/json' } } : {}),
          });
          assert.equal(r.status, 405, `${method} with${body ? '' : 'out'} a body`);
          assert.equal(r.headers.get('allow'), 'POST, GET, DELETE');
          const json = (await r.json()) as { jsonrpc: string; id: unknown; error: { code: number; message: string } };
          assert.equal(json.jsonrpc, '2.0');
          assert.equal(json.id, null);
          assert.equal(json.error.code, -32600);
          assert.match(json.error.message, new RegExp(`^Method Not Allowed: ${method} /mcp`));
        }
      }
    });
  });

  describe('K-01: lists are deterministic across calls and replicas', () => {
    it('tools/list, prompts/list, resources/list and resources/templates/list are identical on both gateways, call after call', async () => {
      for (const [method, key] of [
        ['tools/list', 'tools'],
        ['prompts/list', 'prompts'],
        ['resources/list', 'resources'],
        ['resources/templates/list', 'resourceTemplates'],
      ] as const) {
        const seen: string[] = [];
        for (let i = 0; i < 3; i++) {
          for (const url of [g1, g2]) {
            const r = await rpc(url, method, {}, { capabilities: {} });
            assert.equal(r.status, 200, JSON.stringify(r.body).slice(0, 300));
            const list = r.body.result?.[key] as unknown[];
            assert.ok(Array.isArray(list) && list.length > 0, `${method} lists something`);
            seen.push(JSON.stringify(list));
          }
        }
        assert.equal(new Set(seen).size, 1, `${method}: every answer is the same list in the same order`);
      }
      const tools = (await rpc(g2, 'tools/list', {}, { capabilities: {} })).body.result!.tools as {
        name: string;
        inputSchema: { properties: Record<string, Record<string, unknown>> };
      }[];
      assert.equal(tools[0]!.name, 'task_status', 'the built-in first, then the tool sets in MCP_TOOLSETS order');
      const header = tools.find((t) => t.name === 'header_echo')!;
      assert.equal(header.inputSchema.properties.region!['x-mcp-header'], 'Region');
      assert.equal(header.inputSchema.properties.count!['x-mcp-header'], 'Count');
    });
  });

  describe('SEP-2243: Mcp-Param-* headers on every lane', () => {
    const lanes = [
      { lane: 'inline', tool: 'test_x_mcp_header', args: { region: 'eu-west' }, o: {} },
      { lane: 'sync', tool: 'header_echo', args: { region: 'eu-west' }, o: { tasks: false } },
      { lane: 'task', tool: 'header_echo', args: { region: 'eu-west' }, o: { tasks: true } },
    ] as const;

    for (const { lane, tool, args, o } of lanes) {
      it(`${lane} (${tool}): the matching header is served; absent, different or bad Base64 → -32020 / 400, nothing created`, async () => {
        const ok = await callTool(g1, tool, args, { ...o, headers: { 'Mcp-Param-Region': 'eu-west' } });
        assert.equal(ok.status, 200, JSON.stringify(ok.body).slice(0, 300));
        assert.equal(ok.body.error, undefined, JSON.stringify(ok.body.error));
        if (lane === 'task') assert.equal(ok.body.result?.resultType, 'task');
        else assert.match(JSON.stringify(ok.body.result?.content), /region=eu-west/);

        const before = await taskKeys();
        for (const [what, headers, message] of [
          ['absent', {}, /the body carries region="eu-west" but the Mcp-Param-Region header is absent/],
          [
            'different',
            { 'Mcp-Param-Region': 'us-east' },
            /the Mcp-Param-Region header decodes to "us-east" but the body carries region="eu-west"/,
          ],
          ['other case', { 'Mcp-Param-Region': 'EU-WEST' }, /decodes to "EU-WEST"/],
          ['bad Base64 padding', { 'Mcp-Param-Region': '=?base64?ZXUtd2VzdA?=' }, /invalid Base64 sentinel value/],
        ] as const) {
          const r = await callTool(g2, tool, args, { ...o, headers });
          assert.equal(r.status, 400, `${what}: ${JSON.stringify(r.body).slice(0, 300)}`);
          assert.equal(r.body.error?.code, -32020, what);
          assert.match(r.body.error!.message, message, what);
          assert.deepEqual(r.body.error!.data?.mismatch?.header, 'Mcp-Param-Region', what);
        }
        assert.equal(await taskKeys(), before, 'no task for a refused call');
      });
    }

    it('Base64 sentinels decode (non-ASCII), integers compare numerically (42.0 = 42), booleans by their text', async () => {
      const ok = await callTool(
        g1,
        'header_echo',
        { region: 'Zürich', count: 42, dry: true },
        {
          tasks: false,
          headers: { 'Mcp-Param-Region': b64('Zürich'), 'Mcp-Param-Count': '42.0', 'Mcp-Param-Dry-Run': 'true' },
        },
      );
      assert.equal(ok.status, 200, JSON.stringify(ok.body).slice(0, 300));
      assert.deepEqual(ok.body.result?.structuredContent, {
        summary: 'region=Zürich count=42 dry=true',
        region: 'Zürich',
        count: 42,
        dry: true,
      });
      for (const [headers, cell] of [
        [
          { 'Mcp-Param-Region': b64('Zürich'), 'Mcp-Param-Count': '43', 'Mcp-Param-Dry-Run': 'true' },
          'Mcp-Param-Count',
        ],
        [
          { 'Mcp-Param-Region': b64('Zürich'), 'Mcp-Param-Count': '42', 'Mcp-Param-Dry-Run': 'True' },
          'Mcp-Param-Dry-Run',
        ],
        [
          { 'Mcp-Param-Region': b64('Zurich'), 'Mcp-Param-Count': '42', 'Mcp-Param-Dry-Run': 'true' },
          'Mcp-Param-Region',
        ],
      ] as const) {
        const r = await callTool(
          g2,
          'header_echo',
          { region: 'Zürich', count: 42, dry: true },
          { tasks: false, headers },
        );
        assert.equal(r.status, 400, JSON.stringify(r.body).slice(0, 300));
        assert.equal(r.body.error?.code, -32020);
        assert.equal(r.body.error!.data?.mismatch?.header, cell);
      }
    });

    it('a null or absent argument needs no header; a header for it is ignored', async () => {
      const r = await callTool(
        g1,
        'header_echo',
        { region: 'x', count: null as unknown as number },
        { tasks: false, headers: { 'Mcp-Param-Region': 'x', 'Mcp-Param-Dry-Run': 'anything' } },
      );
      // `count: null` is then refused by the tool's schema: a tool execution error, not -32020.
      assert.equal(r.status, 200, JSON.stringify(r.body).slice(0, 300));
      assert.equal(r.body.result?.isError, true);
      const s = await callTool(
        g1,
        'header_echo',
        { region: 'x' },
        { tasks: false, headers: { 'Mcp-Param-Region': 'x', 'Mcp-Param-Count': '7' } },
      );
      assert.equal(s.status, 200);
      assert.deepEqual(s.body.result?.structuredContent, {
        summary: 'region=x count=- dry=-',
        region: 'x',
        count: null,
        dry: null,
      });
    });
  });

  describe('SEP-1303: input validation errors are tool execution errors', () => {
    for (const { lane, tool, args, o } of [
      { lane: 'inline', tool: 'add', args: { a: 'one', b: 2 }, o: {} },
      { lane: 'sync', tool: 'countdown', args: { seconds: 99 }, o: { tasks: false } },
      { lane: 'task', tool: 'countdown', args: { seconds: 99 }, o: { tasks: true } },
      {
        lane: 'task (JSON Schema 2020-12)',
        tool: 'json_schema_2020_12_tool',
        args: { contactMethod: 'phone', email: 'a@b.c' },
        o: { tasks: true },
      },
    ] as const) {
      it(`${lane}: ${tool} with bad arguments → HTTP 200, isError naming the argument, no task`, async () => {
        const before = await taskKeys();
        const r = await callTool(g1, tool, args, o);
        assert.equal(r.status, 200, JSON.stringify(r.body).slice(0, 300));
        assert.equal(r.body.error, undefined);
        assert.equal(r.body.result?.resultType, 'complete');
        assert.equal(r.body.result?.isError, true);
        assert.match(r.body.result?.content?.[0]?.text, new RegExp(`^Invalid arguments for tool ${tool}: `));
        assert.equal(await taskKeys(), before);
      });
    }

    it('json_schema_2020_12_tool accepts what its JSON Schema accepts', async () => {
      const r = await callTool(
        g1,
        'json_schema_2020_12_tool',
        { name: 'n', contactMethod: 'phone', phone: '1', address: { city: 'Bern' } },
        {},
      );
      assert.equal(r.body.result?.isError, undefined, JSON.stringify(r.body));
      assert.match(r.body.result?.content?.[0]?.text, /"city":"Bern"/);
    });

    it('an unknown tool is still -32602', async () => {
      const r = await callTool(g1, 'no_such_tool', {}, {});
      assert.equal(r.body.error?.code, -32602);
    });
  });

  describe('capabilities follow the enabled tool sets', () => {
    it('with the conformance set: prompts, resources, completions, logging; with demo only: none of prompts, resources, completions, and their methods are -32601 / 404', async () => {
      const full = await rpc(g1, 'server/discover', {}, { capabilities: {} });
      const caps = full.body.result?.capabilities as Record<string, unknown>;
      for (const k of ['tools', 'prompts', 'resources', 'completions', 'logging'])
        assert.ok(caps[k], `${k} advertised`);
      assert.ok((caps.extensions as Record<string, unknown>)[TASKS]);

      const demo = await rpc(demoOnly.url!, 'server/discover', {}, { capabilities: {} });
      const dcaps = demo.body.result?.capabilities as Record<string, unknown>;
      for (const k of ['prompts', 'resources', 'completions']) assert.equal(dcaps[k], undefined, `${k} not advertised`);
      for (const method of ['prompts/list', 'resources/list', 'resources/templates/list']) {
        const r = await rpc(demoOnly.url!, method, {}, { capabilities: {} });
        assert.equal(r.status, 404, method);
        assert.equal(r.body.error?.code, -32601, method);
      }
      const r = await rpc(
        demoOnly.url!,
        'completion/complete',
        { ref: { type: 'ref/prompt', name: 'x' }, argument: { name: 'a', value: '' } },
        { capabilities: {} },
      );
      assert.equal(r.body.error?.code, -32601);
    });
  });

  describe('prompts, resources, completions, logging', () => {
    it('prompts/get: a required argument missing → -32602; an MRTR round answered on the other gateway completes; its requestState is single use', async () => {
      const missing = await rpc(
        g1,
        'prompts/get',
        { name: 'test_prompt_with_arguments', arguments: { arg1: 'x' } },
        {},
      );
      assert.equal(missing.body.error?.code, -32602);
      assert.match(missing.body.error!.message, /arg2/);

      const ask = await rpc(g1, 'prompts/get', { name: 'test_input_required_result_prompt' }, {});
      assert.equal(ask.body.result?.resultType, 'input_required', JSON.stringify(ask.body));
      const state = ask.body.result!.requestState as string;
      assert.equal(typeof state, 'string');
      const answer = {
        inputResponses: { user_context: { action: 'accept', content: { context: 'on G2' } } },
        requestState: state,
      };
      const done = await rpc(g2, 'prompts/get', { name: 'test_input_required_result_prompt', ...answer }, {});
      assert.equal(done.body.result?.resultType, 'complete', JSON.stringify(done.body));
      assert.match(JSON.stringify(done.body.result?.messages), /Use the following context: on G2/);
      const replay = await rpc(g1, 'prompts/get', { name: 'test_input_required_result_prompt', ...answer }, {});
      assert.equal(replay.body.error?.code, -32602, 'a used requestState is refused (M-07)');
      const other = await rpc(g1, 'prompts/get', { name: 'test_simple_prompt', requestState: state }, {});
      assert.equal(other.body.error?.code, -32602, 'a state belongs to its prompt');
    });

    it('resources/read: a fixed URI, a template URI, an unknown URI (-32602 with data.uri, SEP-2164)', async () => {
      const text = await rpc(g1, 'resources/read', { uri: 'test://static-text' }, {});
      assert.equal(text.body.result?.contents?.[0]?.text, 'This is the content of the static text resource.');
      assert.equal(typeof text.body.result?.ttlMs, 'number');
      const tpl = await rpc(g2, 'resources/read', { uri: 'test://template/42/data' }, {});
      assert.deepEqual(JSON.parse(tpl.body.result?.contents?.[0]?.text), {
        id: '42',
        templateTest: true,
        data: 'Data for ID: 42',
      });
      const none = await rpc(g1, 'resources/read', { uri: 'test://nothing-here' }, {});
      assert.equal(none.body.error?.code, -32602);
      assert.deepEqual(none.body.error?.data, { uri: 'test://nothing-here' });
    });

    it('completion/complete: prompt arguments and template variables; an unknown prompt → -32602', async () => {
      const p = await rpc(
        g1,
        'completion/complete',
        { ref: { type: 'ref/prompt', name: 'test_prompt_with_arguments' }, argument: { name: 'arg1', value: 'pa' } },
        {},
      );
      assert.deepEqual(p.body.result?.completion, { values: ['paris', 'park', 'party'], total: 3, hasMore: false });
      const t = await rpc(
        g2,
        'completion/complete',
        { ref: { type: 'ref/resource', uri: 'test://template/{id}/data' }, argument: { name: 'id', value: '4' } },
        {},
      );
      assert.deepEqual(t.body.result?.completion?.values, ['456']);
      const u = await rpc(
        g1,
        'completion/complete',
        { ref: { type: 'ref/prompt', name: 'nope' }, argument: { name: 'a', value: '' } },
        {},
      );
      assert.equal(u.body.error?.code, -32602);
    });

    it('logging (L-01): a gateway tool logs only to a request that set a log level at or below the message', async () => {
      const none = await callTool(g1, 'test_logging_tool', {}, {});
      assert.equal(none.messages.filter((m) => m.method === 'notifications/message').length, 0);
      const info = await callTool(
        g1,
        'test_logging_tool',
        {},
        { meta: { 'io.modelcontextprotocol/logLevel': 'info' } },
      );
      const logs = info.messages.filter((m) => m.method === 'notifications/message');
      assert.equal(logs.length, 1, JSON.stringify(info.messages));
      assert.equal(logs[0]!.params.level, 'info');
      assert.equal(logs[0]!.params.logger, 'test_logging_tool');
      const error = await callTool(
        g2,
        'test_logging_tool',
        {},
        { meta: { 'io.modelcontextprotocol/logLevel': 'error' } },
      );
      assert.equal(error.messages.filter((m) => m.method === 'notifications/message').length, 0);
    });
  });
});
