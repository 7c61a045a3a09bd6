/**
 * What a task keeps of its creating request's client capabilities (apps/gateway/src/task-create.ts
 * `storedCapabilities`): enough for its tool to know which input it may ask for (M-04, E-01),
 * and never more than a few KB, whatever the client put in `_meta` (found by review: 3 MB of
 * capabilities were stored for the task's 24 h TTL).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { storedCapabilities } from '../../apps/gateway/src/task-create.js';

describe('storedCapabilities', () => {
  it('keeps elicitation, sampling, roots and the names of extensions', () => {
    assert.deepEqual(
      storedCapabilities({
        elicitation: { form: {}, url: {} },
        sampling: {},
        roots: { listChanged: true },
        extensions: { 'io.modelcontextprotocol/tasks': { some: 'settings' } },
        experimental: { anything: true },
      }),
      {
        elicitation: { form: {}, url: {} },
        sampling: {},
        roots: { listChanged: true },
        extensions: { 'io.modelcontextprotocol/tasks': {} },
      },
    );
  });

  it('bounds what a client can make the service store', () => {
    const junk = 'x'.repeat(3_000_000);
    const stored = storedCapabilities({
      elicitation: { form: { junk } },
      extensions: Object.fromEntries(
        Array.from({ length: 500 }, (_, i) => [`ext/${i}-${'y'.repeat(i % 300)}`, { junk }]),
      ),
      experimental: { junk },
    });
    assert.deepEqual(stored.elicitation, {}, 'declared, but its oversized contents dropped');
    assert.ok(Object.keys(stored.extensions as object).length <= 20);
    assert.ok(JSON.stringify(stored).length < 5000, `${JSON.stringify(stored).length} bytes`);
  });

  it('ignores values that are not objects', () => {
    assert.deepEqual(storedCapabilities({ elicitation: 'yes', sampling: null, roots: 1 }), {});
  });
});
