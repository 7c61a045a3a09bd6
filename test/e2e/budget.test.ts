// @needs redis
/**
 * The synchronous budget (design D1; case B-09d): "A synchronous call that outlives its budget
 * (a countdown-like tool with a 3 s budget in the test profile): the client gets the handle
 * result, task_status then shows the task running, then its result; an elicitation asked after
 * the budget is answered through task_status."
 *
 * Test profile: SYNC_BUDGET_MS_BY_TOOL = {"countdown":3000,"ask_confirm":3000}; two gateways,
 * two workers; every follow-up goes to the other gateway. Not tested: task_status from another
 * principal (no authentication yet: every caller is `anonymous`).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { startCluster, waitFor, type Cluster } from '../support/cluster.js';
import { callTool, getTask, type RpcResponse } from '../support/mcp.js';
import { sseCall, type SseCall } from '../support/sse.js';

const BUDGET_MS = 3000;

const call = (url: string, name: string, args: Record<string, unknown>, o: Parameters<typeof sseCall>[3] = {}) =>
  sseCall(url, 'tools/call', { name, arguments: args }, o);

const describeFrames = (c: SseCall) =>
  c.frames.map((f) => `${f.at - c.sentAt}ms ${f.kind === 'comment' ? `:${f.text}` : f.text.slice(0, 200)}`).join('\n');

/** task_status({taskId}) as a client without the Tasks extension (JSON answer, gateway tool). */
const taskStatus = (
  url: string,
  taskId: string,
  o: Parameters<typeof callTool>[3] = {},
  extra: Record<string, unknown> = {},
) => callTool(url, 'task_status', { taskId }, { tasks: false, ...o }, extra);

/** Asserts the hand-off result (D1) and returns the taskId. */
function assertHandOff(s: SseCall, tool: string): { taskId: string; result: Record<string, any> } {
  const final = s.final();
  assert.ok(final?.result, describeFrames(s));
  const result = final.result as Record<string, any>;
  assert.equal(result.resultType, 'complete', 'a normal CallToolResult, never a task');
  assert.ok(!result.isError, JSON.stringify(result));
  const sc = result.structuredContent;
  const taskId = sc?.taskId as string;
  assert.match(taskId ?? '', /^[0-9a-f-]{36}$/, JSON.stringify(result));
  assert.equal(sc.status, 'working');
  assert.equal(sc.pollIntervalMs, 500);
  assert.deepEqual(sc.next, { tool: 'task_status', arguments: { taskId } });
  const text = result.content.map((x: any) => x.text).join('\n');
  assert.ok(text.includes(tool) && text.includes('task_status') && text.includes(taskId), text);
  // Nothing follows the hand-off on the stream, and the server ended it.
  assert.equal(s.frames.at(-1)!.message, final);
  return { taskId, result };
}

describe(
  'synchronous budget → hand-off to a task followed with task_status (D1, case B-09d)',
  { concurrency: true },
  () => {
    let c: Cluster;
    before(async () => {
      c = await startCluster({
        gateways: 2,
        workers: 2,
        env: { SYNC_BUDGET_MS_BY_TOOL: JSON.stringify({ countdown: BUDGET_MS, ask_confirm: BUDGET_MS }) },
      });
    });
    after(async () => c?.stop());

    it('countdown(8) with a 3 s budget: progress, then the hand-off at ~3 s; task_status (other gateway) → working with statusMessage → "Countdown from 8 finished."; tasks/get works on the id', async () => {
      const s = call(c.urls[0]!, 'countdown', { seconds: 8 }, { tasks: false, meta: { progressToken: 'bud-8' } });
      const d = await s.done;
      assert.equal(d.how, 'end', describeFrames(s));
      const endedAfter = s.frames.at(-1)!.at - s.sentAt;
      console.log(`budget: countdown(8) handed off ${endedAfter} ms after the request (budget ${BUDGET_MS} ms)`);
      assert.ok(endedAfter >= BUDGET_MS, `not before the budget: ${endedAfter} ms`);
      assert.ok(
        endedAfter < BUDGET_MS + 1500,
        `at the budget, well before the tool's 8 s: ${endedAfter} ms\n${describeFrames(s)}`,
      );
      // The budget counts from the request's arrival, so how many seconds of countdown fit in it
      // depends on how soon a worker starts the step (2.7 s at load 15): at least one, in order.
      const p = s.progress();
      assert.ok(p.length >= 1, `progress before the hand-off:\n${describeFrames(s)}`);
      assert.ok(
        p.every((e) => e.progressToken === 'bud-8' && e.total === 8),
        JSON.stringify(p),
      );
      assert.deepEqual(
        p.map((e) => e.progress),
        p.map((_, i) => i + 1),
      );
      const { taskId, result } = assertHandOff(s, 'countdown');
      const latest = /^(\d)\/8 s/.exec(result.structuredContent.statusMessage ?? '');
      assert.ok(
        latest && Number(latest[1]) >= p.length,
        `the latest progress: ${result.structuredContent.statusMessage}`,
      );

      // task_status on the other gateway: still running, with the latest progress.
      const running = await taskStatus(c.urls[1]!, taskId);
      assert.equal(running.status, 200);
      assert.ok(!running.body.error, JSON.stringify(running.body));
      const rr = running.body.result!;
      assert.ok(!rr.isError, JSON.stringify(rr));
      assert.equal(rr.structuredContent?.status, 'working', JSON.stringify(rr));
      assert.equal(rr.structuredContent?.taskId, taskId);
      assert.match(rr.structuredContent?.statusMessage ?? '', /^\d\/8 s \(\d left\)$/);
      assert.match(rr.content[0].text, /still working/);

      // It is a task now: a client that declares the extension may follow it with tasks/get.
      const got = await getTask(c.urls[1]!, taskId);
      assert.ok(!got.body.error, JSON.stringify(got.body));
      assert.equal(got.body.result!.taskId, taskId);
      assert.equal(got.body.result!.status, 'working');

      // The stream's end did not cancel it: it runs to its result.
      let polls = 0;
      const done = await waitFor(
        async () => {
          polls++;
          const r = await taskStatus(c.urls[polls % 2]!, taskId);
          assert.ok(!r.body.error, JSON.stringify(r.body));
          return r.body.result?.structuredContent?.status === 'working' ? undefined : r;
        },
        12_000,
        300,
        'task_status to return the result',
      );
      const total = Date.now() - s.sentAt;
      assert.equal(done.body.result!.content[0].text, 'Countdown from 8 finished.', JSON.stringify(done.body));
      assert.ok(!done.body.result!.isError);
      assert.ok(total >= 7500, `ran its full 8 s (result seen after ${total} ms)`);
      const finished = await getTask(c.urls[0]!, taskId);
      assert.equal(finished.body.result!.status, 'completed');
      assert.equal(finished.body.result!.result?.content?.[0]?.text, 'Countdown from 8 finished.');
      // One run, on one worker: the hand-off did not restart the tool.
      const starts = c.workers.flatMap((w) => w.logs).filter((l) => l.msg === 'step.started' && l.taskId === taskId);
      assert.equal(starts.length, 1);
    });

    it('ask_confirm(delaySeconds 5) with elicitation: hand-off at 3 s (client closes on receipt: not cancelled); task_status → input_required (MRTR); the retry with inputResponses + requestState resumes it → "confirmed: true"', async () => {
      const s = call(c.urls[1]!, 'ask_confirm', { delaySeconds: 5 }, { tasks: false });
      // The client drops the stream the moment the hand-off arrives: the task must survive (it is
      // a task now; a disconnect cancels only a call still held, C-01 / §2.5).
      await s.waitFrame((f) => !!f.message && 'result' in f.message, 10_000);
      s.close();
      await s.done;
      const endedAfter = s.frames.at(-1)!.at - s.sentAt;
      assert.ok(
        endedAfter >= BUDGET_MS && endedAfter < 5000,
        `handed off at the budget, before the question: ${endedAfter} ms`,
      );
      const { taskId } = assertHandOff(s, 'ask_confirm');

      // Before the question: working.
      const early = await taskStatus(c.urls[0]!, taskId);
      assert.equal(early.body.result?.structuredContent?.status, 'working', JSON.stringify(early.body));

      // The question comes after the budget: task_status returns it as MRTR input_required.
      const asked: RpcResponse = await waitFor(
        async () => {
          const r = await taskStatus(c.urls[0]!, taskId);
          assert.ok(!r.body.error, JSON.stringify(r.body));
          return r.body.result?.resultType === 'input_required' ? r : undefined;
        },
        10_000,
        250,
        'task_status to return input_required',
      );
      const ir = asked.body.result!;
      const keys = Object.keys(ir.inputRequests);
      assert.equal(keys.length, 1, JSON.stringify(ir));
      assert.match(keys[0]!, /^confirm/);
      assert.equal(ir.inputRequests[keys[0]!].method, 'elicitation/create');
      assert.equal(typeof ir.requestState, 'string');

      // A client that cannot show the question is told so, and the question stays open.
      const blind = await taskStatus(c.urls[1]!, taskId, { elicitation: false });
      assert.ok(!blind.body.error, JSON.stringify(blind.body));
      assert.notEqual(blind.body.result?.resultType, 'input_required');
      assert.equal(blind.body.result?.structuredContent?.status, 'input_required', JSON.stringify(blind.body));

      // The retry (on the other gateway) answers it.
      const retry = await taskStatus(
        c.urls[1]!,
        taskId,
        {},
        {
          inputResponses: { [keys[0]!]: { action: 'accept', content: { confirm: true } } },
          requestState: ir.requestState,
        },
      );
      assert.equal(retry.status, 200);
      assert.ok(!retry.body.error, JSON.stringify(retry.body));
      assert.notEqual(
        retry.body.result?.resultType,
        'input_required',
        `the answer was applied: ${JSON.stringify(retry.body)}`,
      );
      assert.ok(!retry.body.result?.isError, JSON.stringify(retry.body));

      const done = await waitFor(
        async () => {
          const r = await taskStatus(c.urls[0]!, taskId);
          const st = r.body.result?.structuredContent?.status;
          return r.body.result?.resultType === 'input_required' || st === 'working' ? undefined : r;
        },
        10_000,
        250,
        'task_status to return the result',
      );
      assert.equal(done.body.result!.content[0].text, 'confirmed: true', JSON.stringify(done.body));
      assert.ok(!done.body.result!.isError);
    });

    it('task_status for an unknown, malformed or not-handed-off id → an isError result (not a JSON-RPC error); a call within its budget is answered normally', async () => {
      for (const id of [randomUUID(), 'not-a-task-id']) {
        const r = await taskStatus(c.urls[0]!, id);
        assert.equal(r.status, 200);
        assert.ok(!r.body.error, JSON.stringify(r.body));
        assert.equal(r.body.result?.isError, true, JSON.stringify(r.body));
        assert.match(r.body.result!.content[0].text, /no task/i);
      }
      // A synchronous call still held by its request is not a task: its id is not reachable.
      const held = call(c.urls[1]!, 'countdown', { seconds: 2 }, { tasks: false });
      const rec = await waitFor(
        async () => {
          for (const k of (await c.keys()).filter((k) => k.endsWith(':task'))) {
            const h = await c.redis.hgetall(k);
            if (
              h.tool === 'countdown' &&
              h.mode === 'sync' &&
              h.status === 'working' &&
              JSON.parse(h.args!).seconds === 2
            )
              return /\{t:([^}]+)\}/.exec(k)![1]!;
          }
          return undefined;
        },
        5000,
        50,
        'the held call',
      );
      const r = await taskStatus(c.urls[0]!, rec);
      assert.equal(r.body.result?.isError, true, JSON.stringify(r.body));
      // countdown(2) < 3 s budget: the normal result, no hand-off.
      await held.done;
      const final = held.final()?.result;
      assert.equal(final?.content?.[0]?.text, 'Countdown from 2 finished.', describeFrames(held));
      assert.ok(!final?.structuredContent?.taskId);
    });

    it('a retry sent twice: the second copy is refused (single use, M-07); the first is handed off at the budget and its task finishes', async () => {
      // Round 1: the question, synchronously (MRTR).
      const first = call(c.urls[0]!, 'ask_confirm', { afterSeconds: 8 }, { tasks: false });
      await first.done;
      const q = first.final()?.result as Record<string, any>;
      assert.equal(q?.resultType, 'input_required', describeFrames(first));
      const key = Object.keys(q.inputRequests)[0]!;
      const retry = {
        inputResponses: { [key]: { action: 'accept', content: { confirm: true } } },
        requestState: q.requestState,
      };
      // The same retry twice, 1 s apart, on the two gateways: the second is refused.
      const a = sseCall(
        c.urls[0]!,
        'tools/call',
        { name: 'ask_confirm', arguments: { afterSeconds: 8 }, ...retry },
        { tasks: false },
      );
      await new Promise((r) => setTimeout(r, 1000));
      const b = sseCall(
        c.urls[1]!,
        'tools/call',
        { name: 'ask_confirm', arguments: { afterSeconds: 8 }, ...retry },
        { tasks: false },
      );
      await b.done;
      const refused = b.final() as Record<string, any> | undefined;
      assert.equal(refused?.error?.code, -32602, describeFrames(b));
      assert.match(refused!.error.message, /already used/);
      await a.done;
      const { taskId } = assertHandOff(a, 'ask_confirm');
      const done = await waitFor(
        async () => {
          const r = await taskStatus(c.urls[1]!, taskId);
          const text = r.body.result?.content?.[0]?.text as string | undefined;
          return text && !/still working/.test(text) ? r.body.result : undefined;
        },
        20_000,
        250,
        'the task to finish',
      );
      assert.equal(done.content[0].text, 'confirmed: true', JSON.stringify(done));
    });
  },
);
