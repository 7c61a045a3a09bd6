// @needs redis
/**
 * End to end with a client nobody here wrote: the official Tasks requester
 * `@modelcontextprotocol/ext-tasks` (0.2.2, through test/support/ext-tasks-client.ts) against
 * two gateways and two workers. Every raw dispatch (`tools/call`, `tasks/*`) goes to the other
 * gateway than the one before (`urlFor(n)` alternates), so polls, updates and cancels of one
 * task land on both replicas. Authentication is on (`AUTH_API_KEYS`): the session sends its key
 * as `Authorization: Bearer …` on the SDK transport and on every raw dispatch, and every task
 * belongs to that key's principal.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { resultFromTaskOutcome, TaskFailedError } from '@modelcontextprotocol/ext-tasks/client';
import { startCluster, type Cluster } from '../support/cluster.js';
import {
  callToolToOutcome,
  openExtTasksSession,
  type ExtTasksSession,
  type InputRequestForAnswer,
} from '../support/ext-tasks-client.js';
import { callTool, getTask, pollTask, roundRobin } from '../support/mcp.js';

const KEY = `ext-tasks-${randomBytes(16).toString('hex')}`;
/** The principal the gateways derive from the key (`key:<name>`). */
const PRINCIPAL = 'key:alice';

/** The text of the first content block of a tool result. */
const textOf = (r: { content?: any[] } | undefined): string => String(r?.content?.[0]?.text ?? '');

describe('official ext-tasks requester across two gateways and two workers', () => {
  let c: Cluster;
  let s: ExtTasksSession;
  /** Answers by input key for the test that is running (tests in a suite run one at a time). */
  let answers: Record<string, (req: InputRequestForAnswer) => unknown> = {};

  before(async () => {
    c = await startCluster({ gateways: 2, workers: 2, env: { AUTH_API_KEYS: `alice:${KEY}` } });
    s = await openExtTasksSession({
      url: c.urls[0]!,
      urlFor: (n) => c.urls[n % c.urls.length]!,
      headers: { Authorization: `Bearer ${KEY}` },
      answer: (req) => {
        // Task input keys are unique per step on the wire (`audience.1`, T-29); route by the logical key.
        const a = answers[req.key] ?? answers[req.key.replace(/\.\d+$/, '')];
        if (!a) throw new Error(`unexpected input request ${req.method} key=${req.key} scope=${req.scope}`);
        return a(req);
      },
    });
  });
  after(async () => {
    await s?.close();
    await c?.stop();
  });

  /** Dispatch-log entries added by `fn`. */
  async function logged<T>(fn: () => Promise<T>): Promise<{ value: T; entries: ExtTasksSession['dispatchLog'] }> {
    const from = s.dispatchLog.length;
    const value = await fn();
    return { value, entries: s.dispatchLog.slice(from) };
  }

  it('deep_research: the elicitation is answered through tasks/update, report names topic and audience; polls and update alternate gateways (T-21, T-27, T-30, T-42)', async () => {
    answers = {
      audience: (req) => {
        assert.equal(req.method, 'elicitation/create');
        assert.equal(req.scope, 'task');
        assert.deepEqual(
          req.params.requestedSchema.properties.audience.oneOf.map((o: any) => o.const),
          ['team', 'company'],
        );
        return { action: 'accept', content: { audience: 'team' } };
      },
    };
    const inputsBefore = s.inputLog.length;
    const { value: out, entries } = await logged(() =>
      callToolToOutcome(s.session, 'deep_research', { topic: 'tidal energy' }),
    );
    assert.equal(out.kind, 'task');
    assert.equal(out.outcome.status, 'completed', JSON.stringify(out.outcome));
    const text = textOf(out.result);
    assert.match(text, /tidal energy/);
    assert.match(text, /team/);
    assert.doesNotMatch(text, /company/);
    assert.ok(!out.result!.isError);

    // Exactly one question, asked once, scoped to the task (T-23: de-duplicated across polls).
    const asked = s.inputLog.slice(inputsBefore);
    assert.deepEqual(
      asked.map((r) => [r.key.replace(/\.\d+$/, ''), r.scope, r.taskId]),
      [['audience', 'task', out.taskId]],
    );

    // The statuses the library observed went working → input_required → working → completed.
    const order = out.tasks.map((t) => t.status).filter((st, i, a) => st !== a[i - 1]);
    assert.deepEqual(order, ['working', 'input_required', 'working', 'completed']);

    // Wire: the call, then polls and the update, spread over both gateways, all HTTP 200,
    // each tasks/* request routed by Mcp-Name = taskId (T-42).
    assert.equal(entries[0]!.method, 'tools/call');
    const gets = entries.filter((e) => e.method === 'tasks/get');
    const updates = entries.filter((e) => e.method === 'tasks/update');
    assert.ok(gets.length >= 2, `expected several tasks/get, saw ${gets.length}`);
    assert.equal(updates.length, 1, JSON.stringify(entries));
    assert.deepEqual(new Set(gets.map((e) => e.url)), new Set(c.urls), 'tasks/get served by both gateways');
    for (const e of entries) {
      assert.equal(e.status, 200, JSON.stringify(e));
      if (e.method.startsWith('tasks/')) assert.equal(e.mcpName, out.taskId);
    }
    for (let i = 1; i < entries.length; i++)
      assert.notEqual(entries[i]!.url, entries[i - 1]!.url, 'consecutive requests on different gateways');
    // Both task methods were seen by both gateways over the session so far (update on one, polls on both).
    const byGateway = c.urls.map((u) => new Set(entries.filter((e) => e.url === u).map((e) => e.method)));
    assert.ok(
      byGateway.every((m) => m.has('tasks/get')),
      JSON.stringify(entries),
    );
    assert.ok(byGateway.some((m) => m.has('tasks/update')));
    // The gateway that got the update logged applying it.
    const updGw = c.gateways[c.urls.indexOf(updates[0]!.url)]!;
    assert.ok(
      updGw.logs.some((l) => l.msg === 'task.updated' && l.taskId === out.taskId && l.outcome === 'resumed'),
      'task.updated logged by the gateway that got tasks/update',
    );
  });

  it('countdown: execution.cancel() acks, and the server-side task really reaches cancelled (T-36)', async () => {
    answers = {};
    const { value: out, entries } = await logged(() =>
      callToolToOutcome(
        s.session,
        'countdown',
        { seconds: 10 },
        { cancelWhen: (t) => t.status === 'working' && /1\/10/.test(t.statusMessage ?? '') },
      ),
    );
    assert.equal(out.kind, 'task');
    assert.ok(out.cancelRequested);
    assert.equal(out.outcome.status, 'cancelled', JSON.stringify(out.outcome));
    const cancels = entries.filter((e) => e.method === 'tasks/cancel');
    assert.equal(cancels.length, 1);
    assert.equal(cancels[0]!.status, 200);
    assert.equal(cancels[0]!.mcpName, out.taskId);

    // ext-tasks settles on the ack alone; check the server with raw tasks/get on both gateways.
    const next = roundRobin(c.urls);
    const end = await pollTask(next, out.taskId!, (t) => t.status !== 'working', 3000, 50, { token: KEY });
    assert.equal(end.status, 'cancelled', JSON.stringify(end));
    assert.equal(end.resultType, 'complete');
    for (const k of ['result', 'error', 'inputRequests']) assert.ok(!(k in end), `cancelled task must not carry ${k}`);
    // The worker stopped: nothing changes afterwards, on either gateway.
    await new Promise((r) => setTimeout(r, 1500));
    for (const url of c.urls) {
      const later = await getTask(url, out.taskId!, { token: KEY });
      assert.equal(later.body.result?.status, 'cancelled');
      assert.equal(later.body.result?.statusMessage, end.statusMessage);
    }
  });

  it('confirm_delete: accept through tasks/update completes the task (T-27, T-28, T-30)', async () => {
    answers = {
      confirm: (req) => {
        assert.equal(req.method, 'elicitation/create');
        assert.equal(req.scope, 'task');
        assert.match(String(req.params.message), /report\.txt/);
        return { action: 'accept', content: { confirm: true } };
      },
    };
    const out = await callToolToOutcome(s.session, 'confirm_delete', { filename: 'report.txt' });
    assert.equal(out.kind, 'task');
    assert.equal(out.outcome.status, 'completed', JSON.stringify(out.outcome));
    assert.equal(textOf(out.result), 'Deleted report.txt');
    assert.ok(out.tasks.some((t) => t.status === 'input_required'));
  });

  it('multi_input: both outstanding keys are answered and the task completes (T-21, T-32)', async () => {
    const seen: string[] = [];
    answers = {
      name: (req) => (seen.push(req.key.replace(/\.\d+$/, '')), { action: 'accept', content: { name: 'Ada' } }),
      confirm: (req) => (seen.push(req.key.replace(/\.\d+$/, '')), { action: 'accept', content: { confirm: true } }),
    };
    const { value: out, entries } = await logged(() => callToolToOutcome(s.session, 'multi_input', {}));
    assert.equal(out.outcome.status, 'completed', JSON.stringify(out.outcome));
    assert.deepEqual([...seen].sort(), ['confirm', 'name']);
    assert.equal(textOf(out.result), 'name=Ada, confirm=true');
    assert.ok(entries.some((e) => e.method === 'tasks/update' && e.status === 200));
  });

  it('failing_job: a tool error is a completed task with isError, not an exception (T-14)', async () => {
    answers = {};
    const out = await callToolToOutcome(s.session, 'failing_job', {});
    assert.equal(out.kind, 'task');
    assert.equal(out.outcome.status, 'completed', JSON.stringify(out.outcome));
    assert.equal(out.result!.isError, true);
    assert.match(textOf(out.result), /simulated tool failure/);
    assert.equal(resultFromTaskOutcome(out.outcome).isError, true); // does not throw
  });

  it('protocol_error_job: a JSON-RPC error ends the task failed; the library surfaces TaskFailedError -32603 (T-14, §13)', async () => {
    answers = {};
    const out = await callToolToOutcome(s.session, 'protocol_error_job', {});
    assert.equal(out.kind, 'task');
    assert.equal(out.outcome.status, 'failed', JSON.stringify(out.outcome));
    if (out.outcome.status !== 'failed') return;
    assert.ok(out.outcome.error instanceof TaskFailedError);
    assert.equal(out.outcome.error.code, -32603);
    assert.match(out.outcome.error.message, /simulated internal failure/);
    assert.throws(
      () => resultFromTaskOutcome(out.outcome),
      (e: unknown) => e instanceof TaskFailedError && e.code === -32603,
    );
  });

  it('test_tool_with_task: the MRTR round is answered on tools/call before the task exists; the result names the answer (T-16)', async () => {
    answers = {
      user_name: (req) => {
        assert.equal(req.method, 'elicitation/create');
        assert.equal(req.scope, 'request'); // MRTR input, not task input
        assert.equal(req.taskId, undefined);
        return { action: 'accept', content: { name: 'Grace' } };
      },
    };
    const { value: out, entries } = await logged(() => callToolToOutcome(s.session, 'test_tool_with_task', {}));
    assert.equal(out.kind, 'task');
    assert.equal(out.outcome.status, 'completed', JSON.stringify(out.outcome));
    assert.match(textOf(out.result), /Grace/);
    // Two tools/call (round 1 → input_required, round 2 → CreateTaskResult) before any tasks/*.
    const firstTaskMethod = entries.findIndex((e) => e.method.startsWith('tasks/'));
    assert.deepEqual(
      entries.slice(0, firstTaskMethod).map((e) => e.method),
      ['tools/call', 'tools/call'],
    );
    assert.notEqual(entries[0]!.url, entries[1]!.url, 'the MRTR retry went to the other gateway');
    assert.ok(!entries.some((e) => e.method === 'tasks/update'), 'no task input was needed');
  });

  it('greet: an immediate result, no task (T-02, T-03)', async () => {
    answers = {};
    const { value: out, entries } = await logged(() => callToolToOutcome(s.session, 'greet', { name: 'ext-tasks' }));
    assert.equal(out.kind, 'immediate');
    assert.equal(out.taskId, undefined);
    assert.equal(out.outcome.status, 'completed');
    assert.equal(textOf(out.result), 'Hello, ext-tasks!');
    assert.deepEqual(
      entries.map((e) => e.method),
      ['tools/call'],
    );
  });

  it('the library reported no background errors', () => {
    assert.deepEqual(
      s.errors.map((e) => e.message),
      [],
    );
  });

  it("authentication was on: every task above belongs to the key's principal, and the same call without the key is 401 on both gateways", async () => {
    const created = c.gateways.flatMap((g) => g.logs.filter((l) => l.msg === 'task.created'));
    assert.ok(created.length >= 6, `tasks created: ${created.length}`);
    assert.deepEqual([...new Set(created.map((l) => l.principal))], [PRINCIPAL]);
    assert.ok(new Set(created.map((l) => l.mode)).has('task'));
    for (const url of c.urls) {
      const r = await callTool(url, 'countdown', { seconds: 1 });
      assert.equal(r.status, 401, JSON.stringify(r.body));
    }
  });
});
