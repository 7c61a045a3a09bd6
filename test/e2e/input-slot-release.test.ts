// @needs redis
/**
 * An `input_required` task that nobody polls or answers stops holding its principal's
 * outstanding slot (MAX_OUTSTANDING_TASKS) after TASK_INPUT_SLOT_RELEASE_MS, while it keeps
 * waiting for its answer; a task its client still polls keeps its slot; answering a released one
 * resumes it (it takes a slot back, even past the limit, once) and it completes. Real gateway and
 * worker processes; the reconciler does the release.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { principalTag } from '@mcp-tasks/task-store';
import { startCluster, waitFor, type Cluster } from '../support/cluster.js';
import { callTool, getTask, pollTask, roundRobin, updateTask } from '../support/mcp.js';

const ALICE = 'alice-slot-key-0123456789abcdef';

describe('idle input_required tasks release their outstanding slot (TASK_INPUT_SLOT_RELEASE_MS)', () => {
  let c: Cluster;
  before(async () => {
    c = await startCluster({
      gateways: 2,
      workers: 1,
      env: {
        AUTH_API_KEYS: `alice:${ALICE}`,
        MAX_OUTSTANDING_TASKS: '2',
        TASK_INPUT_SLOT_RELEASE_MS: '1500',
        RECONCILE_AFTER_MS: '500',
      },
    });
  });
  after(async () => c?.stop());

  const outstanding = () => c.redis.zrange(`${c.prefix}:{p:${principalTag('key:alice')}}:outstanding`, '0', '-1');

  it('unpolled: released after the idle time and the limit admits a new task; polled: kept; the answer resumes the released one, which completes', async () => {
    const next = roundRobin(c.urls);
    const o = { token: ALICE };
    const polled = (await callTool(next(), 'ask_confirm', {}, o)).body.result!.taskId as string;
    const idle = (await callTool(next(), 'ask_confirm', {}, o)).body.result!.taskId as string;
    for (const id of [polled, idle]) await pollTask(next, id, (t) => t.status === 'input_required', 10_000, 50, o);
    const refused = await callTool(next(), 'countdown', { seconds: 3 }, o);
    assert.equal(refused.status, 429, 'at the limit');
    // One client keeps polling its task; nobody looks at the other.
    let polling = true;
    const poller = (async () => {
      while (polling) {
        await getTask(next(), polled, o);
        await new Promise((r) => setTimeout(r, 300));
      }
    })();
    const line = await waitFor(
      () => c.workers[0]!.logs.find((l) => l.msg === 'reconcile.input_slot_released'),
      15_000,
      50,
      'reconcile.input_slot_released',
    );
    assert.equal(line.taskId, idle);
    assert.deepEqual(await outstanding(), [polled], 'the polled task keeps its slot');
    // The idle task still waits for its answer.
    const t = (await getTask(next(), idle, o)).body.result!;
    assert.equal(t.status, 'input_required');
    // The freed slot admits a new task.
    const admitted = await callTool(next(), 'countdown', { seconds: 3 }, o);
    assert.equal(admitted.body.result?.resultType, 'task', JSON.stringify(admitted.body));
    const over = await callTool(next(), 'countdown', { seconds: 1 }, o);
    assert.equal(over.status, 429, 'full again');
    // Answered after its slot was released: it runs, taking a slot back past the limit (once).
    const [key] = Object.keys(t.inputRequests as object);
    const upd = await updateTask(next(), idle, { [key!]: { action: 'accept', content: { confirm: true } } }, o);
    assert.equal(upd.body.result?.resultType, 'complete', JSON.stringify(upd.body));
    const retaken = await waitFor(
      () => c.gateways.flatMap((g) => g.logs).find((l) => l.msg === 'task.input_slot_retaken' && l.taskId === idle),
      5000,
    );
    assert.ok(retaken);
    const done = await pollTask(next, idle, (x) => x.status === 'completed', 15_000, 50, o);
    assert.equal(
      (done.result as { structuredContent?: { summary?: string } }).structuredContent?.summary,
      'confirmed: true',
    );
    polling = false;
    await poller;
    // Its slot is released again with the terminal transition; the polled one never was.
    await waitFor(async () => !(await outstanding()).includes(idle), 5000);
    assert.ok((await outstanding()).includes(polled));
    assert.ok(
      !c.workers[0]!.logs.some((l) => l.msg === 'reconcile.input_slot_released' && l.taskId === polled),
      'a polled task is never released',
    );
  });
});
