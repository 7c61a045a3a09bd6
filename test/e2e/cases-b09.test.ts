// @needs redis
/**
 * Case B-09 (shared/cases/cases.md): long tools vs client timeouts. Real processes: two gateways
 * with the default synchronous budget (SYNC_BUDGET_MS 100 s), a third gateway G3 whose budget
 * for `progress_sync` is 5 s and for `slow_echo` 3 s (SYNC_BUDGET_MS_BY_TOOL), two workers.
 *
 * Expected (the assertions):
 *  (a) a client declaring the Tasks extension gets the CreateTaskResult (with pollIntervalMs)
 *      within 2 s (every one of 20 calls, so p99 ≤ 2 s) and the POST is ended by the server;
 *  (b) a client without it never sees `resultType:"task"` (not even when the budget runs out);
 *      a task-only tool answers HTTP 400 + -32021 naming the extension in
 *      data.requiredCapabilities (spec §2.6);
 *  (c) `progress_sync(18, 5)` with progressToken "pt-1": SSE, progress at most 20 s apart, the
 *      token echoed, then the result (spec §7 P-01); a tool silent for 45 s gets heartbeat
 *      progress (PROGRESS_HEARTBEAT_MS 15 s), strictly increasing, also ≤ 20 s apart;
 *  (d) the same without a token: `: keepalive` comments at most 25 s apart, no progress at all
 *      (H-22, P-02); past the documented budget the call ends with a normal result naming
 *      `task_status` and the taskId, and task_status follows the task to its result.
 * (c) and (d) run concurrently (90 s each).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startCluster, waitFor, type Cluster, type Proc } from '../support/cluster.js';
import { callTool, cancelTask, getTask, pollTask, TASKS } from '../support/mcp.js';
import { sseCall, type SseCall } from '../support/sse.js';

const KEEPALIVE_MAX_GAP_MS = 25_000; // case B-10/H-22: comments at least every 25 s
const PROGRESS_MAX_GAP_MS = 20_000; // case B-09c

/** Starts a `tools/call` as a stream (see sse.ts). */
const call = (url: string, name: string, args: Record<string, unknown>, o: Parameters<typeof sseCall>[3] = {}) =>
  sseCall(url, 'tools/call', { name, arguments: args }, o);

/** Largest gap between consecutive instants. */
const maxGap = (ts: number[]) => ts.slice(1).reduce((m, t, i) => Math.max(m, t - ts[i]!), 0);

/** Every message frame of a stream, described for assertion messages. */
const describeFrames = (c: SseCall) =>
  c.frames.map((f) => `${f.at - c.sentAt}ms ${f.kind === 'comment' ? `:${f.text}` : f.text.slice(0, 160)}`).join('\n');

/** Asserts a hand-off result (D1): a normal CallToolResult that names task_status and the task. */
function assertHandOff(result: Record<string, any>, tool: string): string {
  assert.notEqual(result.resultType, 'task', 'a client without the extension never gets a task');
  assert.ok(!result.isError, JSON.stringify(result));
  const sc = result.structuredContent;
  assert.ok(sc && typeof sc.taskId === 'string', JSON.stringify(result));
  const taskId = sc.taskId as string;
  assert.equal(sc.status, 'working');
  assert.equal(typeof sc.pollIntervalMs, 'number');
  assert.deepEqual(sc.next, { tool: 'task_status', arguments: { taskId } });
  const text = result.content.map((c: any) => c.text).join('\n');
  assert.ok(text.includes('task_status'), text);
  assert.ok(text.includes(taskId), text);
  assert.ok(text.includes(tool), text);
  return taskId;
}

describe('Case B-09: long tools vs client timeouts', { concurrency: true }, () => {
  let c: Cluster;
  let G3: Proc;
  before(async () => {
    c = await startCluster({ gateways: 2, workers: 2 });
    G3 = await c.addGateway({ SYNC_BUDGET_MS_BY_TOOL: JSON.stringify({ progress_sync: 5000, slow_echo: 3000 }) });
  });
  after(async () => c?.stop());

  it('Case B-09a: with the Tasks extension, slow_echo(600) → CreateTaskResult with pollIntervalMs within 2 s (20 calls), and the POST ends', async () => {
    const times: number[] = [];
    const ids: string[] = [];
    for (let batch = 0; batch < 4; batch++) {
      const calls = Array.from({ length: 5 }, (_, i) =>
        call(c.urls[(batch + i) % 2]!, 'slow_echo', { seconds: 600, text: `a-${batch}-${i}` }),
      );
      for (const s of calls) {
        const d = await s.done;
        const r = await s.response;
        assert.equal(d.how, 'end', 'the server ended the POST');
        assert.equal(r.status, 200);
        assert.match(String(r.headers['content-type']), /^application\/json/, 'a task handle is a plain JSON answer');
        const body = JSON.parse(s.raw());
        assert.equal(body.result?.resultType, 'task', s.raw());
        assert.equal(body.result.status, 'working');
        assert.equal(typeof body.result.taskId, 'string');
        assert.equal(
          body.result.pollIntervalMs,
          500,
          'pollIntervalMs present (TASK_POLL_INTERVAL_MS of the test profile)',
        );
        times.push(d.at - s.sentAt);
        ids.push(body.result.taskId);
      }
    }
    times.sort((a, b) => a - b);
    console.log(
      `Case B-09a handle latency over ${times.length} calls: median ${times[times.length >> 1]} ms, max ${times.at(-1)} ms`,
    );
    assert.ok(times.at(-1)! <= 2000, `every handle within 2 s: ${times.join(', ')}`);
    // Clean up: they are tasks, cancelled with tasks/cancel.
    for (const id of ids) assert.ok(!(await cancelTask(c.urls[0]!, id)).body.error);
    for (const id of ids)
      await pollTask(
        () => c.urls[1]!,
        id,
        (t) => t.status === 'cancelled',
        10_000,
      );
  });

  it('Case B-09b: without the extension slow_echo(600) streams and never returns resultType "task", even when its budget runs out (G3: 3 s)', async () => {
    const s = call(
      G3.url!,
      'slow_echo',
      { seconds: 600, text: 'b' },
      { tasks: false, meta: { progressToken: 'pt-b' } },
    );
    const r = await s.response;
    assert.equal(r.status, 200);
    assert.match(String(r.headers['content-type']), /^text\/event-stream/);
    const first = await s.waitFrame(() => true, 2000);
    assert.equal(first.kind, 'comment', 'the first byte is a comment, at once');
    assert.ok(first.at - s.sentAt < 2000, `first byte after ${first.at - s.sentAt} ms`);
    const d = await s.done;
    assert.equal(d.how, 'end');
    const final = s.final();
    assert.ok(final?.result, describeFrames(s));
    for (const f of s.frames) assert.ok(!f.message || f.message.result?.resultType !== 'task', describeFrames(s));
    const after = d.at - s.sentAt;
    assert.ok(after >= 3000 && after < 6000, `the budget (3 s) ended the call after ${after} ms`);
    const taskId = assertHandOff(final.result, 'slow_echo');
    // It is a task now: the tasks client may cancel it (cleanup, and proof it did not die with the stream).
    assert.equal((await getTask(c.urls[0]!, taskId)).body.result?.status, 'working');
    assert.ok(!(await cancelTask(c.urls[1]!, taskId)).body.error);
    await pollTask(
      () => c.urls[0]!,
      taskId,
      (t) => t.status === 'cancelled',
      10_000,
    );
  });

  it('Case B-09b: a task-only tool (failing_job) without the extension → HTTP 400 + -32021 with data.requiredCapabilities.extensions[tasks], on every gateway', async () => {
    for (const url of [...c.urls, G3.url!]) {
      const r = await callTool(url, 'failing_job', {}, { tasks: false });
      assert.equal(r.status, 400, JSON.stringify(r.body));
      assert.equal(r.body.error?.code, -32021, JSON.stringify(r.body));
      assert.ok(
        r.body.error!.data?.requiredCapabilities?.extensions?.[TASKS] !== undefined,
        JSON.stringify(r.body.error),
      );
      assert.ok(!r.body.result, 'no task was made');
    }
  });

  it('Case B-09c+d: progress_sync(18, 5) with token "pt-1": progress ≤ 20 s apart then the result (and heartbeats ≤ 20 s apart for a silent tool); without a token: keep-alives ≤ 25 s apart, no progress, the result (concurrent, 90 s)', async () => {
    const withToken = call(
      c.urls[0]!,
      'progress_sync',
      { steps: 18, intervalSeconds: 5 },
      { tasks: false, meta: { progressToken: 'pt-1' } },
    );
    const noToken = call(c.urls[1]!, 'progress_sync', { steps: 18, intervalSeconds: 5 }, { tasks: false });
    // A tool that reports nothing for 45 s, with a token: heartbeat progress keeps it ≤ 20 s apart.
    const quiet = call(
      c.urls[0]!,
      'slow_echo',
      { seconds: 45, quiet: true, text: 'quiet' },
      { tasks: false, meta: { progressToken: 'pt-quiet' } },
    );
    const [dc, dd, dq] = await Promise.all([withToken.done, noToken.done, quiet.done]);

    // (c) on a silent tool: heartbeats (PROGRESS_HEARTBEAT_MS = 15 s).
    assert.equal(dq.how, 'end', describeFrames(quiet));
    const hq = quiet.progress();
    assert.ok(hq.length >= 2, `heartbeat progress on a silent 45 s tool:\n${describeFrames(quiet)}`);
    for (const e of hq) assert.equal(e.progressToken, 'pt-quiet');
    for (let i = 1; i < hq.length; i++)
      assert.ok(hq[i]!.progress > hq[i - 1]!.progress, `heartbeats strictly increasing: ${hq.map((e) => e.progress)}`);
    assert.equal(quiet.final()?.result?.content?.[0]?.text, 'echo: quiet');
    assert.equal(quiet.frames.at(-1)!.message, quiet.final(), 'the result is the last frame');
    const gapQ = maxGap([quiet.sentAt, ...hq.map((e) => e.at), dq.at]);
    console.log(
      `Case B-09c silent tool: ${hq.length} heartbeat notifications (${hq.map((e) => `${e.at - quiet.sentAt}ms:${e.progress}`).join(', ')}), largest gap ${gapQ} ms`,
    );
    assert.ok(gapQ <= PROGRESS_MAX_GAP_MS, `heartbeats at most 20 s apart (largest gap ${gapQ} ms)`);

    // (c)
    assert.equal(dc.how, 'end', describeFrames(withToken));
    assert.match(String((await withToken.response).headers['content-type']), /^text\/event-stream/);
    const p = withToken.progress();
    assert.ok(p.length >= 18, `one progress per step at least (${p.length}):\n${describeFrames(withToken)}`);
    for (const e of p) {
      assert.equal(e.progressToken, 'pt-1');
      assert.equal(e.total, 18);
    }
    for (let i = 1; i < p.length; i++)
      assert.ok(p[i]!.progress > p[i - 1]!.progress, `strictly increasing: ${p.map((e) => e.progress)}`);
    assert.equal(p.at(-1)!.progress, 18);
    const finalC = withToken.final();
    assert.equal(finalC?.result?.content?.[0]?.text, 'progress_sync: 18 steps done', describeFrames(withToken));
    const finalAt = withToken.frames.find((f) => f.message === finalC)!.at;
    assert.ok(
      withToken.frames.indexOf(withToken.frames.find((f) => f.message === finalC)!) === withToken.frames.length - 1,
      'the result is the last frame',
    );
    const gapC = maxGap([withToken.sentAt, ...p.map((e) => e.at), finalAt]);
    console.log(
      `Case B-09c: ${p.length} progress notifications, largest gap (request → progress… → result) ${gapC} ms, call ${finalAt - withToken.sentAt} ms`,
    );
    assert.ok(gapC <= PROGRESS_MAX_GAP_MS, `progress at most 20 s apart (largest gap ${gapC} ms)`);

    // (d)
    assert.equal(dd.how, 'end', describeFrames(noToken));
    assert.equal(noToken.progress().length, 0, `no progress without a token:\n${describeFrames(noToken)}`);
    const messages = noToken.frames.filter((f) => f.kind === 'message');
    assert.equal(messages.length, 1, `only the result:\n${describeFrames(noToken)}`);
    assert.equal(noToken.final()?.result?.content?.[0]?.text, 'progress_sync: 18 steps done');
    const keepalives = noToken.frames.filter((f) => f.kind === 'comment' && f.text === 'keepalive');
    assert.ok(
      keepalives.length >= 4,
      `keep-alive comments on a 90 s silent stream (${keepalives.length}):\n${describeFrames(noToken)}`,
    );
    const comments = noToken.frames.filter((f) => f.kind === 'comment').map((f) => f.at);
    const gapD = maxGap([noToken.sentAt, ...comments, dd.at]);
    console.log(
      `Case B-09d: ${keepalives.length} keep-alive comments, largest silence ${gapD} ms, call ${dd.at - noToken.sentAt} ms`,
    );
    assert.ok(gapD <= KEEPALIVE_MAX_GAP_MS, `comments at most 25 s apart (largest gap ${gapD} ms)`);
  });

  it('Case B-09d: past the documented budget (G3: progress_sync 5 s) the call without a token ends with a result naming task_status and the taskId; task_status → working → the result', async () => {
    const s = call(G3.url!, 'progress_sync', { steps: 4, intervalSeconds: 2.5 }, { tasks: false });
    const d = await s.done;
    assert.equal(d.how, 'end');
    const after = d.at - s.sentAt;
    assert.ok(after >= 5000 && after < 8000, `handed off at the 5 s budget, after ${after} ms`);
    assert.equal(s.progress().length, 0, 'still no progress without a token');
    const final = s.final();
    assert.ok(final?.result, describeFrames(s));
    const taskId = assertHandOff(final.result, 'progress_sync');
    assert.match(final.result.structuredContent.statusMessage ?? '', /step [12] of 4/, 'the latest progress is named');

    // task_status on the other gateways: working, then the tool's own result.
    const working = await callTool(c.urls[0]!, 'task_status', { taskId }, { tasks: false });
    assert.equal(working.status, 200);
    assert.ok(!working.body.error, JSON.stringify(working.body));
    assert.ok(!working.body.result!.isError, JSON.stringify(working.body));
    assert.equal(working.body.result!.structuredContent?.status, 'working', JSON.stringify(working.body));
    assert.equal(working.body.result!.structuredContent?.taskId, taskId);
    assert.match(working.body.result!.content[0].text, /still working/);
    const done = await waitFor(
      async () => {
        const r = await callTool(c.urls[1]!, 'task_status', { taskId }, { tasks: false });
        return r.body.result?.structuredContent?.status === 'working' ? undefined : r;
      },
      10_000,
      250,
      'task_status to show the result',
    );
    assert.equal(done.body.result!.content[0].text, 'progress_sync: 4 steps done', JSON.stringify(done.body));
    assert.deepEqual(done.body.result!.structuredContent, { summary: 'progress_sync: 4 steps done', steps: 4 });
    assert.ok(!done.body.result!.isError);
  });
});
