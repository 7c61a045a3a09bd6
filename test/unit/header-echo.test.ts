/**
 * A `-32020` refusal echoes what it compared, cut short (apps/gateway/src/headers.ts
 * `echoValue`): a 100 KB `params.name` against a short `Mcp-Name` gives an answer of a few
 * hundred bytes (it was 200 KB: the value twice), and a raw UTF-8 `Mcp-Name` (which Node reads
 * as Latin-1) is echoed as the text the client sent.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { checkStandardHeaders, ECHO_MAX_CHARS, echoValue } from '../../apps/gateway/src/headers.js';
import { jsonRpcErrorBody } from '../../apps/gateway/src/errors.js';

const HEADERS = { protocolVersion: '2026-07-28', method: 'tools/call' };

describe('-32020 echoes values cut short', () => {
  it('a 100 KB body value and a 100 KB header give a small answer', () => {
    const huge = 'x'.repeat(100_000);
    for (const [name, bodyName] of [
      ['add', huge],
      [huge, 'add'],
    ]) {
      const r = checkStandardHeaders({ ...HEADERS, name }, 'tools/call', { name: bodyName }, '2026-07-28')!;
      assert.equal(r.code, -32020);
      const answer = JSON.stringify(jsonRpcErrorBody(1, r.code, r.message, r.data));
      assert.ok(answer.length < 1000, `answer of ${answer.length} bytes`);
      assert.ok(r.message.includes(`${'x'.repeat(ECHO_MAX_CHARS)}…`), r.message);
    }
    const missing = checkStandardHeaders(HEADERS, 'tools/call', { name: huge }, '2026-07-28')!;
    assert.ok(JSON.stringify(missing).length < 1000);
  });

  it('short values are echoed whole, as before', () => {
    const r = checkStandardHeaders({ ...HEADERS, name: 'sub' }, 'tools/call', { name: 'add' }, '2026-07-28')!;
    assert.equal(
      r.message,
      'Bad Request: the request headers and body disagree: the body carries params.name="add" but the Mcp-Name header names "sub"',
    );
    assert.deepEqual(r.data, { mismatch: { header: 'sub', body: r.message.slice(r.message.indexOf('the body')) } });
  });

  it('a raw UTF-8 Mcp-Name is shown as its text, not as Latin-1 mojibake', () => {
    const asNodeReadsIt = Buffer.from('café', 'utf8').toString('latin1'); // "cafÃ©"
    const r = checkStandardHeaders({ ...HEADERS, name: asNodeReadsIt }, 'tools/call', { name: 'add' }, '2026-07-28')!;
    assert.ok(r.message.endsWith('names "café"'), r.message);
    assert.equal((r.data as { mismatch: { header: string } }).mismatch.header, 'café');
    assert.equal(echoValue('Ã©t\xe9', true), 'Ã©t\xe9', 'not UTF-8: left as it is');
    assert.equal(echoValue('é'.repeat(70)), `${'é'.repeat(64)}…`);
  });
});
