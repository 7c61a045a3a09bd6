/**
 * SEP-2243 `x-mcp-header` (H-15, H-17, H-18): our two mirrors of SDK functions that
 * `@modelcontextprotocol/server` 2.4.0 does not export are checked against the SDK itself, case
 * by case, through its public surface (an `McpServer` behind `createMcpHandler`, in process):
 *  - `checkParamHeaders` (apps/gateway/src/headers.ts) against the `-32020` answers the SDK's
 *    `validateMcpParamHeaders` gives a `tools/call` of an `McpServer` tool;
 *  - `scanXMcpHeaderDeclarations` (packages/tools/src/x-mcp-header.ts) against the warning the
 *    SDK prints for an invalid declaration when it lists the tool.
 * Plus the kit: `mcpHeader` shows in `tools/list`, and the registry refuses an invalid
 * declaration when it is built (at process start).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { z } from 'zod';
import { createMcpHandler, fromJsonSchema, McpServer } from '@modelcontextprotocol/server';
import { checkParamHeaders } from '../../apps/gateway/src/headers.js';
import { defineTool, mcpHeader, textResult, type ToolDefinition } from '../../packages/tools/src/index.js';
import { scanXMcpHeaderDeclarations, ToolRegistry } from '../../packages/tools/src/internal.js';

const V = '2026-07-28';
const SCHEMA = {
  type: 'object',
  properties: {
    region: { type: 'string', 'x-mcp-header': 'Region' },
    level: { type: 'integer', 'x-mcp-header': 'Level' },
    dry: { type: 'boolean', 'x-mcp-header': 'Dry-Run' },
    nested: { type: 'object', properties: { zone: { type: 'string', 'x-mcp-header': 'Zone' } } },
    note: { type: 'string' },
  },
};

/** A modern handler serving one McpServer tool `t` with `schema`. */
function sdkHandler(schema: Record<string, unknown>) {
  return createMcpHandler(() => {
    const s = new McpServer({ name: 'mirror', version: '0' });
    s.registerTool('t', { description: 'd', inputSchema: fromJsonSchema(schema) }, async () => ({
      content: [{ type: 'text', text: 'ok' }],
    }));
    return s;
  });
}

async function sdkCall(handler: ReturnType<typeof sdkHandler>, args: unknown, headers: Record<string, string>) {
  const body = {
    jsonrpc: '2.0',
    id: 7,
    method: 'tools/call',
    params: {
      name: 't',
      arguments: args,
      _meta: { 'io.modelcontextprotocol/protocolVersion': V, 'io.modelcontextprotocol/clientCapabilities': {} },
    },
  };
  const res = await handler.fetch(
    new Request('http://127.0.0.1/mcp', {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': V,
        'mcp-method': 'tools/call',
        'mcp-name': 't',
        ...headers,
      },
      body: JSON.stringify(body),
    }),
  );
  const text = await res.text();
  const json = JSON.parse(
    text.startsWith('{')
      ? text
      : text
          .split('\n')
          .find((l) => l.startsWith('data: '))!
          .slice(6),
  );
  return { status: res.status, body: json as { error?: { code: number; message: string; data?: unknown } } };
}

/** Node's `req.headers` shape (lower-case names) of a header set. */
const nodeHeaders = (h: Record<string, string>) =>
  Object.fromEntries(Object.entries(h).map(([k, v]) => [k.toLowerCase(), v]));

const b64 = (s: string) => `=?base64?${Buffer.from(s, 'utf8').toString('base64')}?=`;

const CASES: { what: string; reject: boolean; args: unknown; headers: Record<string, string> }[] = [
  {
    what: 'all present and equal',
    reject: false,
    args: { region: 'eu-west', level: 3, dry: true },
    headers: { 'Mcp-Param-Region': 'eu-west', 'Mcp-Param-Level': '3', 'Mcp-Param-Dry-Run': 'true' },
  },
  { what: 'header absent, argument present', reject: true, args: { region: 'eu-west' }, headers: {} },
  { what: 'header differs', reject: true, args: { region: 'eu-west' }, headers: { 'Mcp-Param-Region': 'us-east' } },
  {
    what: 'value case differs (values are case-sensitive)',
    reject: true,
    args: { region: 'eu-west' },
    headers: { 'Mcp-Param-Region': 'EU-WEST' },
  },
  {
    what: 'header name in other case (names are not)',
    reject: false,
    args: { region: 'eu-west' },
    headers: { 'mcp-param-region': 'eu-west' },
  },
  {
    what: 'Base64 sentinel, valid',
    reject: false,
    args: { region: 'Hello' },
    headers: { 'Mcp-Param-Region': b64('Hello') },
  },
  {
    what: 'Base64 sentinel, non-ASCII',
    reject: false,
    args: { region: 'Zürich ☂' },
    headers: { 'Mcp-Param-Region': b64('Zürich ☂') },
  },
  {
    what: 'Base64 sentinel, bad padding',
    reject: true,
    args: { region: 'Hello' },
    headers: { 'Mcp-Param-Region': '=?base64?SGVsbG8?=' },
  },
  {
    what: 'Base64 sentinel, bad characters',
    reject: true,
    args: { region: 'Hello' },
    headers: { 'Mcp-Param-Region': '=?base64?SGVs!!!bG8=?=' },
  },
  {
    what: 'no suffix: a literal value',
    reject: false,
    args: { region: '=?base64?SGVsbG8=' },
    headers: { 'Mcp-Param-Region': '=?base64?SGVsbG8=' },
  },
  {
    what: 'integer compared numerically (42.0 = 42)',
    reject: false,
    args: { level: 42 },
    headers: { 'Mcp-Param-Level': '42.0' },
  },
  { what: 'integer differs', reject: true, args: { level: 42 }, headers: { 'Mcp-Param-Level': '43' } },
  {
    what: 'integer header not a number',
    reject: true,
    args: { level: 42 },
    headers: { 'Mcp-Param-Level': 'forty-two' },
  },
  { what: 'boolean in other case', reject: true, args: { dry: true }, headers: { 'Mcp-Param-Dry-Run': 'True' } },
  { what: 'null argument: header not expected', reject: false, args: { region: null }, headers: {} },
  {
    what: 'absent argument: a header is ignored',
    reject: false,
    args: {},
    headers: { 'Mcp-Param-Region': 'anything' },
  },
  { what: 'nested property', reject: true, args: { nested: { zone: 'a' } }, headers: { 'Mcp-Param-Zone': 'b' } },
  { what: 'no arguments at all', reject: false, args: undefined, headers: {} },
];

describe('checkParamHeaders mirrors the SDK validateMcpParamHeaders (H-15, H-17)', () => {
  const handler = sdkHandler(SCHEMA);
  const scan = scanXMcpHeaderDeclarations(SCHEMA);
  assert.ok(scan.valid);

  for (const c of CASES) {
    it(`${c.what}: ${c.reject ? '-32020, HTTP 400' : 'accepted'}`, async () => {
      const sdk = await sdkCall(handler, c.args, c.headers);
      assert.equal(sdk.body.error?.code === -32020, c.reject, `the SDK: ${JSON.stringify(sdk.body)}`);
      const ours = checkParamHeaders(scan.declarations, c.args, nodeHeaders(c.headers));
      if (sdk.body.error?.code === -32020) {
        assert.ok(ours, `the SDK refused (${sdk.body.error.message}); we accepted`);
        assert.equal(sdk.status, ours.httpStatus);
        assert.deepEqual({ code: ours.code, message: ours.message, data: ours.data }, sdk.body.error);
      } else {
        assert.equal(sdk.status, 200, JSON.stringify(sdk.body));
        assert.equal(ours, undefined, `we refused (${ours?.message}); the SDK accepted`);
      }
    });
  }
});

describe('scanXMcpHeaderDeclarations mirrors the SDK (H-18)', () => {
  const INVALID: [string, Record<string, unknown>][] = [
    ['on a number', { type: 'object', properties: { n: { type: 'number', 'x-mcp-header': 'N' } } }],
    ['on an object', { type: 'object', properties: { o: { type: 'object', 'x-mcp-header': 'O' } } }],
    ['empty', { type: 'object', properties: { s: { type: 'string', 'x-mcp-header': '' } } }],
    ['not a token', { type: 'object', properties: { s: { type: 'string', 'x-mcp-header': 'Has Space' } } }],
    [
      'duplicate in other case',
      {
        type: 'object',
        properties: { a: { type: 'string', 'x-mcp-header': 'Key' }, b: { type: 'string', 'x-mcp-header': 'KEY' } },
      },
    ],
    [
      'under items',
      { type: 'object', properties: { list: { type: 'array', items: { type: 'string', 'x-mcp-header': 'Item' } } } },
    ],
    ['under anyOf', { type: 'object', properties: { s: { anyOf: [{ type: 'string', 'x-mcp-header': 'S' }] } } }],
    ['on the root', { type: 'object', 'x-mcp-header': 'Root', properties: {} }],
  ];

  for (const [what, schema] of INVALID) {
    it(`refuses a declaration ${what}, with the SDK's reason`, async () => {
      const ours = scanXMcpHeaderDeclarations(schema);
      assert.equal(ours.valid, false);
      const warned: string[] = [];
      const warn = console.warn;
      console.warn = (...a: unknown[]) => void warned.push(a.map(String).join(' '));
      try {
        const res = await sdkHandler(schema).fetch(
          new Request('http://127.0.0.1/mcp', {
            method: 'POST',
            headers: {
              'content-type': 'application/json',
              accept: 'application/json, text/event-stream',
              'mcp-protocol-version': V,
              'mcp-method': 'tools/list',
            },
            body: JSON.stringify({
              jsonrpc: '2.0',
              id: 1,
              method: 'tools/list',
              params: {
                _meta: {
                  'io.modelcontextprotocol/protocolVersion': V,
                  'io.modelcontextprotocol/clientCapabilities': {},
                },
              },
            }),
          }),
        );
        await res.text();
      } finally {
        console.warn = warn;
      }
      const sdkReason = warned
        .map(
          (w) =>
            /invalid x-mcp-header declaration and will be excluded by conforming Streamable HTTP clients: (.*)$/.exec(
              w,
            )?.[1],
        )
        .find(Boolean);
      assert.equal(ours.valid === false && ours.reason, sdkReason);
    });
  }

  it('collects valid declarations with their paths and types', () => {
    const r = scanXMcpHeaderDeclarations(SCHEMA);
    assert.deepEqual(r.valid && r.declarations, [
      { path: ['region'], headerName: 'Region', type: 'string' },
      { path: ['level'], headerName: 'Level', type: 'integer' },
      { path: ['dry'], headerName: 'Dry-Run', type: 'boolean' },
      { path: ['nested', 'zone'], headerName: 'Zone', type: 'string' },
    ]);
  });
});

describe('kit: mcpHeader and the registry', () => {
  const tool = (name: string, inputSchema: z.ZodObject, extra: Partial<ToolDefinition> = {}) =>
    defineTool({
      name,
      description: 'd',
      inputSchema,
      taskSupport: 'forbidden',
      runsIn: 'gateway',
      async run() {
        return textResult('x');
      },
      ...extra,
    }) as unknown as ToolDefinition;

  it('mcpHeader annotates the property in tools/list and the registry knows the declaration', () => {
    const reg = new ToolRegistry([
      tool(
        'h',
        z.object({
          region: mcpHeader('Region', z.string()),
          n: mcpHeader('N', z.number().int()).optional(),
          b: mcpHeader('B', z.boolean()),
        }),
      ),
    ]);
    const props = (reg.list()[0]!.inputSchema as { properties: Record<string, Record<string, unknown>> }).properties;
    assert.equal(props.region!['x-mcp-header'], 'Region');
    assert.equal(props.n!['x-mcp-header'], 'N');
    assert.equal(props.n!.type, 'integer');
    assert.deepEqual(
      reg.headerDeclarations('h').map((d) => d.headerName),
      ['Region', 'N', 'B'],
    );
    assert.deepEqual(reg.headerDeclarations('nope'), []);
  });

  it('refuses, when built, a tool whose declaration breaks a rule, naming the tool and the rule', () => {
    assert.throws(
      () => new ToolRegistry([tool('bad_number', z.object({ x: mcpHeader('X', z.number()) }))]),
      /tool bad_number: invalid x-mcp-header declaration: x: x-mcp-header is only permitted on primitive-typed properties \(string, integer, boolean\); got number/,
    );
    assert.throws(
      () =>
        new ToolRegistry([
          tool('bad_dup', z.object({ a: mcpHeader('Key', z.string()), b: mcpHeader('key', z.string()) })),
        ]),
      /tool bad_dup: .*not case-insensitively unique/,
    );
    assert.throws(
      () => new ToolRegistry([tool('bad_items', z.object({ a: z.array(mcpHeader('Item', z.string())) }))]),
      /tool bad_items: .*statically reachable/,
    );
  });

  it('inputJsonSchema is listed verbatim; a root that is not an object is refused', () => {
    const json = {
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      type: 'object',
      $defs: { a: { $anchor: 'x', type: 'string' } },
      properties: { a: { $ref: '#/$defs/a' } },
      if: { required: ['a'] },
      then: {},
      else: {},
    };
    const reg = new ToolRegistry([tool('j', z.object({ a: z.string().optional() }), { inputJsonSchema: json })]);
    assert.deepEqual(reg.list()[0]!.inputSchema, json);
    assert.throws(
      () => new ToolRegistry([tool('k', z.object({}), { inputJsonSchema: { type: 'array' } })]),
      /tool k: inputSchema must have type "object"/,
    );
  });
});
