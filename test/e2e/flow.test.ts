// @needs redis
/**
 * End to end, real processes: two gateways and two workers. Every request goes to a different
 * gateway than the one before (D7). Drives `deep_research` through working → input_required →
 * working → completed, and cancels a running `countdown`.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startCluster, type Cluster } from '../support/cluster.js';
import { callTool, cancelTask, getTask, pollTask, roundRobin, updateTask } from '../support/mcp.js';

describe('task flow across two gateways and two workers', () => {
  let c: Cluster;
  before(async () => {
    c = await startCluster({ gateways: 2, workers: 2 });
  });
  after(async () => c?.stop());

  it('deep_research: working → input_required → working → completed, each request on another gateway (T-21, T-29, T-30)', async () => {
    const next = roundRobin(c.urls);
    const seen: string[] = [];
    const create = await callTool(next(), 'deep_research', { topic: 'tidal energy' });
    assert.equal(create.status, 200);
    const handle = create.body.result!;
    assert.equal(handle.resultType, 'task', JSON.stringify(create.body)); // T-11
    assert.equal(handle.status, 'working');
    assert.equal(handle.pollIntervalMs, 500);
    assert.ok(Number.isInteger(handle.ttlMs) && handle.ttlMs > 0);
    for (const k of ['result', 'error', 'inputRequests', 'task', 'requestState'])
      assert.ok(!(k in handle), `CreateTaskResult must not carry ${k}`);
    const taskId = handle.taskId as string;

    const first = await getTask(next(), taskId); // T-15: readable at once on the other gateway
    assert.equal(first.body.result?.resultType, 'complete'); // T-22
    seen.push(first.body.result!.status);

    const parked = await pollTask(next, taskId, (t) => (seen.push(t.status), t.status !== 'working'));
    assert.equal(parked.status, 'input_required');
    const keys = Object.keys(parked.inputRequests);
    assert.equal(keys.length, 1);
    const req = parked.inputRequests[keys[0]!];
    assert.equal(req.method, 'elicitation/create');
    assert.deepEqual(
      req.params.requestedSchema.properties.audience.oneOf.map((o: any) => o.const),
      ['team', 'company'],
    );
    assert.ok(parked.statusMessage);

    // The same request reappears on every poll until answered (T-21).
    const again = await getTask(next(), taskId);
    assert.deepEqual(Object.keys(again.body.result!.inputRequests), keys);

    const upd = await updateTask(next(), taskId, {
      [keys[0]!]: { action: 'accept', content: { audience: 'company' } },
    });
    assert.deepEqual(
      Object.keys(upd.body.result!).filter((k) => k !== '_meta'),
      ['resultType'],
    );
    assert.equal(upd.body.result!.resultType, 'complete'); // T-30

    const resumed = await getTask(next(), taskId); // applied before the ack: never input_required again
    assert.equal(resumed.body.result!.status, 'working');

    const done = await pollTask(
      next,
      taskId,
      (t) => (seen.push(t.status), t.status === 'completed' || t.status === 'failed'),
      30_000,
    );
    assert.equal(done.status, 'completed', JSON.stringify(done));
    assert.equal(done.result.resultType, 'complete');
    assert.match(done.result.content[0].text, /tidal energy/);
    assert.match(done.result.content[0].text, /company/);
    assert.ok(!('inputRequests' in done));
    // Status order seen by the client.
    const order = seen.filter((s, i) => s !== seen[i - 1]);
    assert.deepEqual(order, ['working', 'input_required', 'working', 'completed']);
  });

  it('countdown: tasks/cancel stops the running job and the task ends cancelled (T-36)', async () => {
    const next = roundRobin(c.urls);
    const create = await callTool(next(), 'countdown', { seconds: 10 });
    const taskId = create.body.result!.taskId as string;
    await pollTask(next, taskId, (t) => /1\/10/.test(t.statusMessage ?? ''), 5000);
    const t0 = Date.now();
    const ack = await cancelTask(next(), taskId);
    assert.equal(ack.body.result?.resultType, 'complete');
    for (const k of ['taskId', 'status', 'result', 'error']) assert.ok(!(k in ack.body.result!));
    const end = await pollTask(next, taskId, (t) => t.status !== 'working', 3000, 20);
    assert.equal(end.status, 'cancelled');
    assert.ok(Date.now() - t0 < 2000, 'cancelled within 2 s');
    // The worker really stopped: no progress after the cancel.
    const msg = end.statusMessage;
    await new Promise((r) => setTimeout(r, 2200));
    const later = await getTask(next(), taskId);
    assert.equal(later.body.result!.status, 'cancelled');
    assert.equal(later.body.result!.statusMessage, msg);
    // A second cancel of the terminal task acks and changes nothing.
    const again = await cancelTask(next(), taskId);
    assert.equal(again.body.result?.resultType, 'complete');
  });
});
