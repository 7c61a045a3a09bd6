// @needs redis
/**
 * Errors that leak nothing (issue 10 §5): an unexpected exception in a tool (on a worker)
 * reaches the client as "Tool <name> failed unexpectedly (error id …)" with `data.errorId`,
 * and the task's statusMessage says the same; the exception's message and stack (file paths,
 * key names) go only to the worker's log, under that errorId. A `ToolProtocolError` (a
 * deliberate failure) keeps its code and message.
 *
 * Real processes: 1 gateway (unchanged) and 1 worker on the shared Redis, own key prefix. The
 * `testing` tool `throw_error` fails on purpose.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startCluster, type Cluster } from '../support/cluster.js';
import { callTool, isTerminal, pollTask } from '../support/mcp.js';

/** What the exception says: a path and a Redis key name, which no client may see. */
const SECRET_DETAIL = 'ENOENT: open /srv/app/node_modules/secret-lib/index.js while reading mcp:{t:abc}:task';
const GENERIC = /^Tool throw_error failed unexpectedly \(error id ([0-9a-f]{16})\)$/;

let c: Cluster;

before(async () => {
  c = await startCluster({ gateways: 1, workers: 1 });
});

after(async () => {
  await c?.stop();
});

describe('issue 10 §5: an unexpected tool error reaches the client as a generic message with an error id', () => {
  it('task: tasks/get shows -32603 "Tool throw_error failed unexpectedly (error id …)", data.errorId, the same statusMessage; the log has the details under that id', async () => {
    const res = await callTool(c.urls[0]!, 'throw_error', { kind: 'unexpected', message: SECRET_DETAIL });
    const taskId = res.body.result!.taskId as string;
    const final = await pollTask(
      () => c.urls[0]!,
      taskId,
      (t) => isTerminal(t.status),
      20_000,
    );
    assert.equal(final.status, 'failed');
    assert.equal(final.error.code, -32603);
    const m = GENERIC.exec(final.error.message);
    assert.ok(m, final.error.message);
    const errorId = m[1]!;
    assert.deepEqual(final.error.data, { errorId });
    assert.equal(final.statusMessage, final.error.message);
    assert.doesNotMatch(
      JSON.stringify(final),
      /srv|node_modules|mcp:\{|ENOENT|\.js/,
      'no detail of the exception in the response',
    );

    const line = await c.workers[0]!.waitLog((l) => l.msg === 'step.failed' && l.errorId === errorId, 5000);
    const err = line.err as { type: string; message: string; stack: string };
    assert.equal(err.message, SECRET_DETAIL, 'the log has the exception message');
    assert.match(err.stack, /Error: ENOENT[\s\S]*at /, 'and its stack');
    assert.equal(line.taskId, taskId);
    assert.equal(line.tool, 'throw_error');
  });

  it('synchronous call: the JSON-RPC error is the same generic message with data.errorId', async () => {
    const res = await callTool(
      c.urls[0]!,
      'throw_error',
      { kind: 'unexpected', message: SECRET_DETAIL },
      { tasks: false },
    );
    assert.equal(res.body.error?.code, -32603, JSON.stringify(res.body));
    const m = GENERIC.exec(res.body.error!.message);
    assert.ok(m, res.body.error!.message);
    assert.deepEqual(res.body.error!.data, { errorId: m[1] });
    assert.doesNotMatch(JSON.stringify(res.body), /srv|node_modules|mcp:\{|ENOENT/);
    await c.workers[0]!.waitLog((l) => l.msg === 'step.failed' && l.errorId === m[1], 5000);
  });

  it('a ToolProtocolError keeps its code and message (a deliberate error is for the client)', async () => {
    const res = await callTool(c.urls[0]!, 'throw_error', { kind: 'protocol', message: 'The file name is not valid' });
    const final = await pollTask(
      () => c.urls[0]!,
      res.body.result!.taskId,
      (t) => isTerminal(t.status),
      20_000,
    );
    assert.equal(final.status, 'failed');
    assert.deepEqual(final.error, { code: -32602, message: 'The file name is not valid' });
  });
});
