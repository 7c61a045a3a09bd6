/**
 * The kit's durable-step pieces without Redis: `testContext` records
 * checkpoints and drains like a worker, `checkpoint_count` resumes from a checkpoint and hands
 * over on a drain, `retry_flaky` asks for retries, `retryDelayMs` computes the backoff.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  CheckpointError,
  MAX_RETRY_DELAY_MS,
  retryDelayMs,
  testContext,
  ToolHandOver,
  ToolRetry,
  type ToolResult,
} from '@mcp-tasks/tools';
import { checkpointCount, retryFlaky } from '../../packages/tools/src/toolsets/testing-durable.js';

describe('durable steps in the kit', () => {
  it('R-01: checkpoint_count resumes from ctx.lastCheckpoint and checkpoints every count', async () => {
    const t = testContext({ lastCheckpoint: { counted: 3 }, attempt: 2 });
    const out = (await checkpointCount.run({ seconds: 5 }, t.ctx)) as ToolResult;
    assert.deepEqual(t.checkpoints, [{ counted: 4 }, { counted: 5 }]);
    assert.deepEqual(out.structuredContent, {
      summary: 'Counted to 5 resuming from 3 (run 2).',
      counted: 5,
      resumedFrom: 3,
      attempt: 2,
    });
    const fresh = testContext();
    const first = (await checkpointCount.run({ seconds: 2 }, fresh.ctx)) as ToolResult;
    assert.equal(first.structuredContent?.resumedFrom, null);
  });

  it('R-01: testContext refuses a checkpoint over its size limit or not JSON, as a worker does', async () => {
    const t = testContext({}, { maxCheckpointBytes: 64 });
    await assert.rejects(t.ctx.checkpoint({ a: 'x'.repeat(100) }), CheckpointError);
    await assert.rejects(t.ctx.checkpoint(undefined), CheckpointError);
    assert.deepEqual(t.checkpoints, []);
  });

  it('R-02: a drain aborts ctx.drainSignal with a ToolHandOver (not ctx.signal); checkpoint_count stops waiting', async () => {
    const t = testContext({}, { realSleep: true });
    t.drain();
    assert.equal(t.ctx.draining, true);
    assert.equal(t.ctx.signal.aborted, false, 'a drain is not a cancel');
    assert.ok(t.ctx.drainSignal.reason instanceof ToolHandOver);
    assert.throws(() => t.ctx.drainSignal.throwIfAborted(), ToolHandOver);
    await assert.rejects(checkpointCount.run({ seconds: 600 }, t.ctx), { name: 'AbortError' });
  });

  it('R-04: retry_flaky throws ToolRetry until its failures are used up; retryDelayMs doubles the backoff and honours afterMs', async () => {
    const t = testContext();
    await assert.rejects(retryFlaky.run({ failures: 1, afterMs: 250 }, t.ctx), (e: unknown) => {
      assert.ok(e instanceof ToolRetry);
      assert.equal(e.afterMs, 250);
      assert.equal(e.message, 'flaky failure 1 of 1');
      return true;
    });
    const next = testContext({ lastCheckpoint: t.checkpoints.at(-1) });
    assert.equal(((await retryFlaky.run({ failures: 1 }, next.ctx)) as ToolResult).structuredContent?.runs, 2);
    assert.equal(retryDelayMs(1, undefined, undefined), 1000);
    assert.equal(retryDelayMs(3, { attempts: 4, backoffMs: 500 }, undefined), 2000);
    assert.equal(retryDelayMs(2, { attempts: 4, backoffMs: 500 }, 30_000), 30_000);
    assert.equal(retryDelayMs(60, { attempts: 100 }, undefined), MAX_RETRY_DELAY_MS);
  });
});
