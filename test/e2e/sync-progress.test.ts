// @needs redis
/**
 * Progress of synchronous calls relayed across processes (design D6; spec §7, §2.4, §2.5):
 * the tool runs in a worker process, writes progress to the task's Redis stream, and the
 * gateway process holding the client's SSE response relays it as `notifications/progress`.
 * Also the seed tools without the Tasks extension: `countdown` streams one progress a second,
 * closing its stream cancels it (C-01), and `deep_research` streams both phases around its MRTR
 * question (test/e2e/sync.test.ts checks the MRTR round trip and the report, not the progress
 * of each phase nor that the retry relays only the new step's progress: that is done here).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startCluster, waitFor, type Cluster, type Proc } from '../support/cluster.js';
import { sseCall, type SseCall } from '../support/sse.js';

const call = (
  url: string,
  name: string,
  args: Record<string, unknown>,
  o: Parameters<typeof sseCall>[3] = {},
  extra: Record<string, unknown> = {},
) => sseCall(url, 'tools/call', { name, arguments: args, ...extra }, o);

const describeFrames = (c: SseCall) =>
  c.frames.map((f) => `${f.at - c.sentAt}ms ${f.kind === 'comment' ? `:${f.text}` : f.text.slice(0, 200)}`).join('\n');

describe('synchronous progress relay (worker process → Redis → gateway process → SSE)', { concurrency: true }, () => {
  let c: Cluster;
  before(async () => {
    c = await startCluster({ gateways: 2, workers: 2 });
  });
  after(async () => c?.stop());

  /** Task records of `tool` whose arguments satisfy `match` (sync calls never show their id). */
  async function findTasks(tool: string, match: (args: Record<string, any>) => boolean) {
    const out: (Record<string, string> & { taskId: string })[] = [];
    for (const k of (await c.keys()).filter((k) => k.endsWith(':task'))) {
      const h = await c.redis.hgetall(k);
      if (h.tool === tool && h.args && match(JSON.parse(h.args)))
        out.push({ ...h, taskId: /\{t:([^}]+)\}/.exec(k)![1]! });
    }
    return out;
  }

  const workerOf = (taskId: string) =>
    c.workers.filter((w) => w.logs.some((l) => l.msg === 'step.started' && l.taskId === taskId));

  for (const token of ['relay-str', 4242] as const) {
    it(`D6/§7: progress made on a worker process reaches the SSE of another (gateway) process, token ${JSON.stringify(token)} (${typeof token}) echoed`, async () => {
      const interval = typeof token === 'string' ? 0.5 : 0.6; // tells the two calls apart in Redis
      const g: Proc = c.gateways[typeof token === 'string' ? 0 : 1]!;
      const s = call(
        g.url!,
        'progress_sync',
        { steps: 4, intervalSeconds: interval },
        { tasks: false, meta: { progressToken: token } },
      );
      const d = await s.done;
      assert.equal(d.how, 'end', describeFrames(s));
      assert.equal(s.final()?.result?.content?.[0]?.text, 'progress_sync: 4 steps done', describeFrames(s));
      const p = s.progress();
      assert.deepEqual(
        p.map((e) => e.progress),
        [1, 2, 3, 4],
        describeFrames(s),
      );
      for (const e of p) {
        assert.equal(e.progressToken, token);
        assert.equal(typeof e.progressToken, typeof token);
        assert.equal(e.total, 4);
      }
      const [task] = await findTasks('progress_sync', (a) => a.intervalSeconds === interval);
      assert.ok(task, 'the call made a (sync) task record');
      assert.equal(task.mode, 'sync');
      assert.equal(task.status, 'completed');
      // The gateway that holds the stream created it; a worker, another process, ran it.
      assert.ok(
        g.logs.some((l) => l.msg === 'task.created' && l.taskId === task.taskId && l.mode === 'sync'),
        'task.created on the holding gateway',
      );
      const ran = workerOf(task.taskId);
      assert.equal(ran.length, 1, 'exactly one worker process ran the step');
      assert.equal(ran[0]!.kind, 'worker');
      assert.notEqual(ran[0]!.proc.pid, g.proc.pid, 'the worker is another process than the gateway');
      assert.ok(
        !c.gateways.some((gw) => gw.logs.some((l) => l.msg === 'step.started' && l.taskId === task.taskId)),
        'no gateway ran the tool',
      );
      // The events went through the task's Redis stream.
      const events = await c.redis.xrange(`${c.prefix}:{t:${task.taskId}}:progress`, '-', '+');
      assert.equal(events.length, 4, 'four progress events in the Redis stream');
      assert.deepEqual(
        events.map(([, f]) => JSON.parse(f[f.indexOf('e') + 1]!).progress),
        [1, 2, 3, 4],
      );
    });
  }

  it('seed: countdown(3) without the extension streams one progress a second (1/3, 2/3, 3/3), then "Countdown from 3 finished."', async () => {
    const s = call(c.urls[0]!, 'countdown', { seconds: 3 }, { tasks: false, meta: { progressToken: 'cd-3' } });
    assert.equal((await s.done).how, 'end');
    const p = s.progress();
    assert.equal(p.length, 3, describeFrames(s));
    assert.deepEqual(
      p.map((e) => e.progress),
      [1, 2, 3],
    );
    assert.ok(p.every((e) => e.total === 3 && e.progressToken === 'cd-3'));
    assert.match(p[0]!.message, /^1\/3 s \(2 left\)$/);
    assert.match(p[1]!.message, /^2\/3/);
    assert.match(p[2]!.message, /^3\/3 s \(0 left\)$/);
    const gaps = p.slice(1).map((e, i) => e.at - p[i]!.at);
    console.log(
      `countdown(3): progress at ${p.map((e) => e.at - s.sentAt).join(', ')} ms after the request; gaps ${gaps.join(', ')} ms`,
    );
    // The worker makes one a second; each reaches this client after the relay (worker → Redis →
    // gateway → SSE), whose delay a loaded machine stretches (gaps of 1494 and 531 ms with the
    // suite run twice at once). So: none arrives before its second (no early or made-up
    // progress), and they are spread over the countdown, not held back and sent together
    // at the end.
    p.forEach((e, k) =>
      assert.ok(
        e.at - s.sentAt >= (k + 1) * 1000 - 100,
        `progress ${k + 1} at ${e.at - s.sentAt} ms, before its second`,
      ),
    );
    assert.ok(p[2]!.at - p[0]!.at >= 1200, `spread over the countdown: gaps ${gaps.join(', ')} ms`);
    assert.equal(s.final()?.result?.content?.[0]?.text, 'Countdown from 3 finished.');
    assert.equal(s.frames.at(-1)!.message, s.final());
  });

  it('seed: countdown(10) without the extension, stream closed at ~2 s → the task ends cancelled, the tool stops, no result (C-01)', async () => {
    const s = call(c.urls[1]!, 'countdown', { seconds: 10 }, { tasks: false, meta: { progressToken: 'cd-10' } });
    const first = await s.waitFrame(() => true, 5000);
    await new Promise((r) => setTimeout(r, Math.max(0, first.at + 2000 - Date.now())));
    const closedAt = Date.now();
    s.close();
    assert.equal((await s.done).how, 'closed');
    assert.ok(
      s.progress().length >= 1 && s.progress().length <= 2,
      `one or two progress before the close: ${s.progress().length}`,
    );
    // The task id, from the gateway's log (task.created) cross-checked with Redis.
    const [task] = await findTasks('countdown', (a) => a.seconds === 10);
    assert.ok(task);
    assert.ok(
      c.gateways[1]!.logs.some((l) => l.msg === 'task.created' && l.taskId === task.taskId && l.tool === 'countdown'),
    );
    const final = await waitFor(
      async () => {
        const h = await c.redis.hgetall(`${c.prefix}:{t:${task.taskId}}:task`);
        return h.status !== 'working' ? h : undefined;
      },
      3000,
      20,
      'the countdown to leave working',
    );
    console.log(`countdown(10): closed → ${final.status} in ${Date.now() - closedAt} ms (upper bound)`);
    assert.equal(final.status, 'cancelled', JSON.stringify(final));
    assert.match(final.statusMessage ?? '', /closed the request/);
    assert.ok(!final.result, 'no result recorded');
    await waitFor(
      () => c.workers.some((w) => w.logs.some((l) => l.msg === 'step.cancelled' && l.taskId === task.taskId)),
      3000,
      20,
      'the worker aborted the step',
    );
    await new Promise((r) => setTimeout(r, 1500));
    assert.ok(
      !c.workers.some((w) => w.logs.some((l) => l.msg === 'step.completed' && l.taskId === task.taskId)),
      'the countdown never completed',
    );
    assert.equal(
      (await c.redis.hgetall(`${c.prefix}:{t:${task.taskId}}:task`)).status,
      'cancelled',
      'still cancelled (terminal)',
    );
  });

  it('seed: deep_research without the extension (elicitation declared): phase 1 progress, MRTR input_required, retry on the other gateway → only phase 2 progress, then the report', async () => {
    const first = call(
      c.urls[0]!,
      'deep_research',
      { topic: 'otters' },
      { tasks: false, meta: { progressToken: 'dr-1' } },
    );
    assert.equal((await first.done).how, 'end');
    const p1 = first.progress();
    const r1 = first.final()?.result;
    assert.equal(r1?.resultType, 'input_required', describeFrames(first));
    assert.ok(p1.length >= 1, `phase 1 progress:\n${describeFrames(first)}`);
    assert.ok(
      p1.every(
        (e) =>
          e.progressToken === 'dr-1' &&
          e.total === 100 &&
          e.progress <= 50 &&
          /Collecting sources on otters/.test(e.message),
      ),
      JSON.stringify(p1),
    );
    assert.equal(p1.at(-1)!.progress, 50);
    const keys = Object.keys(r1!.inputRequests);
    assert.equal(keys.length, 1);
    assert.match(keys[0]!, /^audience/);
    assert.equal(r1!.inputRequests[keys[0]!].method, 'elicitation/create');
    assert.equal(typeof r1!.requestState, 'string');

    const second = call(
      c.urls[1]!,
      'deep_research',
      { topic: 'otters' },
      { tasks: false, meta: { progressToken: 'dr-2' } },
      {
        inputResponses: { [keys[0]!]: { action: 'accept', content: { audience: 'team' } } },
        requestState: r1!.requestState,
      },
    );
    assert.equal((await second.done).how, 'end');
    const p2 = second.progress();
    const r2 = second.final()?.result;
    assert.equal(r2?.resultType, 'complete', describeFrames(second));
    assert.ok(p2.length >= 1, `phase 2 progress:\n${describeFrames(second)}`);
    // Only what the resumed step reports: phase 1's events are not replayed on the retry.
    assert.ok(
      p2.every(
        (e) => e.progressToken === 'dr-2' && e.progress > 50 && /Writing the report for the team/.test(e.message),
      ),
      JSON.stringify(p2),
    );
    assert.equal(p2.at(-1)!.progress, 100);
    assert.match(r2!.content[0].text, /otters/);
    assert.match(r2!.content[0].text, /your team/);
    // D11: the report itself is in structuredContent (the text a model shown only that reads).
    assert.deepEqual(r2!.structuredContent, { summary: r2!.content[0].text, topic: 'otters', audience: 'team' });
  });
});
