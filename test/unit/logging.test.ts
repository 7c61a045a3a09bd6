/**
 * Unit tests of the process logger (packages/observability; issue 10 §5, case N-04): every
 * logged value is bounded (one request with 100k keys or a 3 MB string cannot write megabytes)
 * and the fields of REDACT_KEYS never reach a line, at any depth. The logger writes to an
 * in-memory stream; each test reads back the JSON lines it produced.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { createLogger, LOG_LIMITS, REDACT_KEYS, type Logger } from '@mcp-tasks/observability';

/** A debug-level logger and the lines it wrote. */
function capture(): { log: Logger; lines: string[] } {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk, _enc, cb) {
      lines.push(...String(chunk).split('\n').filter(Boolean));
      cb();
    },
  });
  return { log: createLogger('test', 'debug', {}, stream), lines };
}

/** Upper bound of a bounded line: the per-line budget plus keys, quotes, markers and pino's own fields. */
const MAX_LINE = LOG_LIMITS.totalChars * 2 + 4096;

describe('bounded log lines (N-04: 100k answer keys wrote 3 MB to the log)', () => {
  it('an object with 100,000 keys is summarised: one small line that says how many keys were left out', () => {
    const { log, lines } = capture();
    const answers: Record<string, unknown> = {};
    for (let i = 0; i < 100_000; i++) answers[`key${i}`] = { action: 'accept', content: { v: 'x'.repeat(30) } };
    log.warn({ taskId: 't1', inputResponses: answers }, 'task.update_unknown_keys');
    assert.equal(lines.length, 1);
    const line = lines[0]!;
    assert.ok(line.length < MAX_LINE, `line is ${line.length} chars`);
    const o = JSON.parse(line);
    assert.equal(o.taskId, 't1');
    assert.equal(o.msg, 'task.update_unknown_keys');
    assert.equal(Object.keys(o.inputResponses).length, LOG_LIMITS.entries + 1);
    assert.equal(o.inputResponses['…'], `+${100_000 - LOG_LIMITS.entries} keys`);
    assert.deepEqual(
      o.inputResponses.key0,
      { action: 'accept', content: { v: 'x'.repeat(30) } },
      'the kept entries are intact',
    );
  });

  it('a 3 MB string, a 1M-item array, 10,000 nested levels and a cycle each give a small line, and logging never throws', () => {
    const { log, lines } = capture();
    let deep: Record<string, unknown> = { leaf: true };
    for (let i = 0; i < 10_000; i++) deep = { d: deep };
    const cyclic: Record<string, unknown> = { name: 'loop' };
    cyclic.self = cyclic;
    log.info({ args: 'a'.repeat(3 * 1024 * 1024) }, 'big.string');
    log.info({ items: Array.from({ length: 1_000_000 }, (_, i) => i) }, 'big.array');
    log.info({ deep }, 'deep.object');
    log.info({ cyclic }, 'cycle');
    log.info({ many: Array.from({ length: 30 }, () => ({ s: 'y'.repeat(5000) })) }, 'budget');
    assert.equal(lines.length, 5);
    for (const line of lines) assert.ok(line.length < MAX_LINE, `${JSON.parse(line).msg}: ${line.length} chars`);
    const [str, arr, dp, cyc, budget] = lines.map((l) => JSON.parse(l));
    assert.equal(
      str.args.length,
      LOG_LIMITS.stringChars + `…[+${3 * 1024 * 1024 - LOG_LIMITS.stringChars} chars]`.length,
    );
    assert.match(str.args, /…\[\+\d+ chars\]$/);
    assert.equal(arr.items.length, LOG_LIMITS.entries + 1);
    assert.equal(arr.items.at(-1), `…[+${1_000_000 - LOG_LIMITS.entries} items]`);
    assert.equal(
      JSON.stringify(dp.deep).split('"d"').length - 1,
      LOG_LIMITS.depth - 1,
      'nesting stops at the depth limit',
    );
    assert.match(JSON.stringify(dp.deep), /\[Object\]/);
    assert.equal(cyc.cyclic.name, 'loop');
    assert.ok(budget.many.includes('[truncated]'), 'once the line budget is spent, the rest is [truncated]');
  });

  it('an Error keeps its type, message and stack, each capped; small ordinary fields are unchanged', () => {
    const { log, lines } = capture();
    class ToolBroke extends Error {}
    const err = new ToolBroke(`failed at /srv/app/secret-path.ts ${'z'.repeat(10_000)}`);
    log.error({ err, errorId: 'abc123', step: 2, ok: false, ratio: 0.5, none: null }, 'step.failed');
    const o = JSON.parse(lines[0]!);
    assert.equal(o.err.type, 'ToolBroke');
    assert.ok(o.err.message.startsWith('failed at /srv/app/secret-path.ts'));
    assert.ok(o.err.message.length < LOG_LIMITS.stringChars + 40);
    assert.ok(typeof o.err.stack === 'string' && o.err.stack.length <= LOG_LIMITS.stackChars + 40);
    assert.deepEqual(
      { errorId: o.errorId, step: o.step, ok: o.ok, ratio: o.ratio, none: o.none },
      { errorId: 'abc123', step: 2, ok: false, ratio: 0.5, none: null },
    );
  });
});

describe('one redaction list (N-04: no credential in the logs, even at debug)', () => {
  it('every REDACT_KEYS field is censored at the top level and nested, whatever its case; a bearer token inside a string is cut out', () => {
    const { log, lines } = capture();
    const secret = (k: string) => `SECRET-${k}-0123456789`;
    const top = Object.fromEntries(REDACT_KEYS.map((k) => [k, secret(`top-${k}`)]));
    // As deep as a logged object is expanded (LOG_LIMITS.depth); deeper is `[Object]` anyway.
    const nested = { a: { b: Object.fromEntries(REDACT_KEYS.map((k) => [k, secret(`deep-${k}`)])) } };
    log.debug(
      {
        ...top,
        nested,
        req: {
          method: 'POST',
          url: '/mcp',
          headers: { authorization: `Bearer ${secret('req')}`, cookie: secret('cookie') },
        },
        headers: { Authorization: `Bearer ${secret('hdr')}`, 'X-Api-Key': secret('xapi') },
        config: { requestState: { key: secret('rs') }, password: secret('pw'), apiKey: secret('ak') },
        note: `client sent Authorization: Bearer ${secret('inline')} with its call`,
        list: [{ token: secret('list') }],
      },
      'request.debug',
    );
    const line = lines[0]!;
    assert.doesNotMatch(line, /SECRET-/, `a secret reached the log: ${line.match(/.{40}SECRET-.{20}/)?.[0]}`);
    const o = JSON.parse(line);
    for (const k of REDACT_KEYS) {
      assert.equal(o[k], '[redacted]', k);
      assert.equal(o.nested.a.b[k], '[redacted]', `nested ${k}`);
    }
    assert.equal(o.req.headers.authorization, '[redacted]');
    assert.equal(o.req.method, 'POST', 'what is not secret stays');
    assert.equal(o.headers.Authorization, '[redacted]');
    assert.equal(o.config.requestState, '[redacted]');
    assert.equal(o.note, 'client sent Authorization: Bearer [redacted] with its call');
  });

  it('child loggers redact and bound too (the worker logs through children with taskId/jobId)', () => {
    const { log, lines } = capture();
    log.child({ taskId: 't9' }).info({ token: 'SECRET-child', blob: 'q'.repeat(100_000) }, 'child.line');
    const o = JSON.parse(lines[0]!);
    assert.equal(o.taskId, 't9');
    assert.equal(o.token, '[redacted]');
    assert.ok(lines[0]!.length < MAX_LINE);
  });
});
