/**
 * Pure pieces of the client and the CLI: SSE read in arbitrary chunks, header values (H-17),
 * `Mcp-Param-*` headers from `x-mcp-header` (SEP-2243), `--arg` typing by the tool's schema,
 * the percentage a task's `statusMessage` gives, the text of a result (D11).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { encodeHeaderValue, mcpNameFor, paramHeaders, SseParser, type SseEvent } from '@mcp-tasks/client';
import { buildArguments } from '../../apps/cli/src/args.js';
import { fractionFromMessage } from '../../apps/cli/src/progress.js';
import { resultText } from '../../apps/cli/src/render.js';

describe('SseParser', () => {
  const stream = ': stream open\r\n\r\ndata: {"a":1}\n\ndata: {"b":\ndata: 2}\n\n: keepalive\n\ndata: {"c":3}\r\n\r\n';
  const expected: SseEvent[] = [
    { kind: 'comment', text: 'stream open' },
    { kind: 'message', data: '{"a":1}' },
    { kind: 'message', data: '{"b":\n2}' },
    { kind: 'comment', text: 'keepalive' },
    { kind: 'message', data: '{"c":3}' },
  ];
  it('gives the same events however the stream is cut (CRLF split across chunks included)', () => {
    for (let size = 1; size <= stream.length; size++) {
      const p = new SseParser();
      const out: SseEvent[] = [];
      for (let i = 0; i < stream.length; i += size) out.push(...p.push(stream.slice(i, i + size)));
      out.push(...p.end());
      assert.deepEqual(out, expected, `chunks of ${size}`);
    }
  });
  it('delivers a last message that no blank line closed', () => {
    const p = new SseParser();
    assert.deepEqual(p.push('data: {"x":1}'), []);
    assert.deepEqual(p.end(), [{ kind: 'message', data: '{"x":1}' }]);
  });
});

describe('headers (H-17, T-42, SEP-2243)', () => {
  it('plain header-safe ASCII as is; anything else as the Base64 sentinel', () => {
    assert.equal(encodeHeaderValue('deep_research'), 'deep_research');
    assert.equal(encodeHeaderValue(''), '');
    assert.equal(encodeHeaderValue('Zürich'), `=?base64?${Buffer.from('Zürich').toString('base64')}?=`);
    assert.equal(encodeHeaderValue(' padded '), `=?base64?${Buffer.from(' padded ').toString('base64')}?=`);
    assert.equal(encodeHeaderValue('=?base64?abc?='), `=?base64?${Buffer.from('=?base64?abc?=').toString('base64')}?=`);
  });
  it('Mcp-Name from the method table', () => {
    assert.equal(mcpNameFor('tools/call', { name: 'add' }), 'add');
    assert.equal(mcpNameFor('tasks/get', { taskId: 't1' }), 't1');
    assert.equal(mcpNameFor('resources/read', { uri: 'file:///x' }), 'file:///x');
    assert.equal(mcpNameFor('tools/list', {}), undefined);
  });
  it('Mcp-Param-* for annotated arguments that are present, nested through properties', () => {
    const schema = {
      type: 'object',
      properties: {
        region: { type: 'string', 'x-mcp-header': 'Region' },
        count: { type: 'integer', 'x-mcp-header': 'Count' },
        dry: { type: 'boolean', 'x-mcp-header': 'Dry-Run' },
        opts: { type: 'object', properties: { zone: { type: 'string', 'x-mcp-header': 'Zone' } } },
        plain: { type: 'string' },
      },
    };
    assert.deepEqual(
      paramHeaders(schema, { region: 'Zürich', count: 42, dry: false, opts: { zone: 'a' }, plain: 'x' }),
      {
        'mcp-param-region': `=?base64?${Buffer.from('Zürich').toString('base64')}?=`,
        'mcp-param-count': '42',
        'mcp-param-dry-run': 'false',
        'mcp-param-zone': 'a',
      },
    );
    assert.deepEqual(paramHeaders(schema, { region: null, count: undefined }), {});
  });
});

describe('mcp-tasks call arguments', () => {
  const schema = {
    type: 'object',
    properties: {
      seconds: { type: 'integer' },
      ratio: { type: 'number' },
      quiet: { type: 'boolean' },
      topic: { type: 'string' },
      tags: { type: 'array', items: { type: 'string' } },
      limit: { type: ['integer', 'null'] },
      nested: { type: 'object', properties: { depth: { type: 'integer' } } },
    },
  };
  it('types each --arg by the schema, on top of --args', () => {
    assert.deepEqual(
      buildArguments(schema, '{"topic":"x","seconds":1}', [
        'seconds=5',
        'ratio=0.5',
        'quiet=yes',
        'topic=42',
        'tags=["a","b"]',
        'limit=null',
        'nested.depth=3',
        'extra={"k":1}',
        'free=text',
      ]),
      {
        topic: '42',
        seconds: 5,
        ratio: 0.5,
        quiet: true,
        tags: ['a', 'b'],
        limit: null,
        nested: { depth: 3 },
        extra: { k: 1 },
        free: 'text',
      },
    );
    assert.deepEqual(buildArguments(schema, undefined, ['topic=a=b']), { topic: 'a=b' }, 'only the first = splits');
  });
  it('refuses what the schema cannot take, naming the argument', () => {
    assert.throws(() => buildArguments(schema, undefined, ['seconds=1.5']), /seconds is an integer/);
    assert.throws(() => buildArguments(schema, undefined, ['ratio=fast']), /ratio is a number/);
    assert.throws(() => buildArguments(schema, undefined, ['quiet=maybe']), /quiet is a boolean/);
    assert.throws(() => buildArguments(schema, undefined, ['tags=a,b']), /tags is JSON/);
    assert.throws(() => buildArguments(schema, undefined, ['seconds']), /key=value/);
    assert.throws(() => buildArguments(schema, '[1]', []), /JSON object/);
    assert.throws(() => buildArguments(schema, '{', []), /--args is not JSON/);
  });
});

describe('progress from a task statusMessage (T-41: tasks carry no numbers)', () => {
  it('N/M at the start, exactly "N of M", or N%', () => {
    assert.equal(fractionFromMessage('3/5 s (2 left)'), 0.6);
    assert.equal(fractionFromMessage('4 of 8'), 0.5);
    assert.equal(fractionFromMessage('indexing: 40% done'), 0.4);
    // `N of M` anywhere: what the kit's guide tells tools to write (docs/writing-tools.md).
    assert.equal(fractionFromMessage('Mixing layer 2 of 8'), 0.25);
    assert.equal(fractionFromMessage('Collecting sources on x (phase 1 of 2)'), 0.5);
    assert.equal(fractionFromMessage('Waiting for you'), undefined);
    assert.equal(fractionFromMessage(undefined), undefined);
  });
});

describe('result text (D11)', () => {
  it('structuredContent.summary first, else the text content, else the structured JSON', () => {
    assert.equal(
      resultText({ content: [{ type: 'text', text: 'long' }], structuredContent: { summary: 'short' } }),
      'short',
    );
    assert.equal(
      resultText({
        content: [
          { type: 'text', text: 'a' },
          { type: 'image', mimeType: 'image/png' },
        ],
      }),
      'a\n[image: image/png]',
    );
    assert.equal(resultText({ content: [], structuredContent: { n: 1 } }), '{\n  "n": 1\n}');
  });
});
