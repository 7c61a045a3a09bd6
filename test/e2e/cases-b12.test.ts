// @needs redis
/**
 * Case B-12 (shared/cases/cases.md): progress notification token and ordering. Real processes
 * (two gateways, two workers): progress is produced by the tool on a worker, written to the
 * task's Redis stream (coalesced to one per PROGRESS_MIN_INTERVAL_MS = 200 ms) and relayed by
 * the gateway holding the synchronous call (spec §7, §2.4).
 *
 * Expected (the assertions), for every stream:
 *  - every `notifications/progress` carries the client's token with the same value and JSON
 *    type (`12345` stays a number: checked on the raw bytes too);
 *  - `progress` strictly increases (P-01), `total` stays constant;
 *  - all progress is written before the final response, which is the last frame and ends the
 *    stream (P-02, H-21); none for another request's token (H-24);
 *  (c) no token → no progress at all;
 *  (d) a task tool called with a token (Tasks declared) → a JSON CreateTaskResult, no progress
 *      after the handle; tasks/get reports through `statusMessage`;
 *  (e) the last progress published right before the result (and with 20 such calls at once):
 *      the last progress is relayed before the result, nothing ever follows the result, and the
 *      gateways log no write-after-end. How soon the result follows the completion is a speed
 *      figure, not asserted here (a busy machine stretches it): `npm run bench` measures it, and
 *      test/integration/task-events.test.ts checks the property it rests on (a status message
 *      arriving while the gateway is busy is kept for its next wait, not lost until the 1 s
 *      re-read).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { startCluster, waitFor, type Cluster } from '../support/cluster.js';
import { getTask, pollTask } from '../support/mcp.js';
import { sseCall, type SseCall } from '../support/sse.js';

type Token = string | number;

const call = (url: string, name: string, args: Record<string, unknown>, o: Parameters<typeof sseCall>[3] = {}) =>
  sseCall(url, 'tools/call', { name, arguments: args }, o);

const describeFrames = (c: SseCall) =>
  c.frames.map((f) => `${f.at - c.sentAt}ms ${f.kind === 'comment' ? `:${f.text}` : f.text.slice(0, 200)}`).join('\n');

/**
 * The case B-12 invariants on one finished synchronous stream: ended by the server, the result is
 * the last frame, every progress before it carries exactly `token` (value and JSON type),
 * strictly increasing, one constant `total`. Returns the progress params.
 */
async function assertProgressStream(s: SseCall, token: Token | undefined, total: number | undefined) {
  const d = await s.done;
  const head = await s.response;
  assert.equal(d.how, 'end', `the server ended the stream:\n${describeFrames(s)}`);
  assert.equal(head.status, 200);
  assert.match(String(head.headers['content-type']), /^text\/event-stream/);
  const messages = s.frames.filter((f) => f.kind === 'message');
  assert.ok(
    messages.every((f) => f.message),
    `every data frame is JSON:\n${describeFrames(s)}`,
  );
  const finalIdx = s.frames.findIndex(
    (f) => f.message && 'id' in f.message && ('result' in f.message || 'error' in f.message),
  );
  assert.ok(finalIdx >= 0, `a final response:\n${describeFrames(s)}`);
  assert.equal(finalIdx, s.frames.length - 1, `nothing after the final response (P-02):\n${describeFrames(s)}`);
  assert.ok(s.raw().trimEnd().endsWith(s.frames[finalIdx]!.text.trimEnd()), 'no bytes after the final response');
  // Only progress notifications besides the response (H-19, H-20: no requests on the stream).
  for (const f of messages.slice(0, -1)) assert.equal(f.message!.method, 'notifications/progress', f.text);
  const p = s.progress();
  if (token === undefined) {
    assert.equal(p.length, 0, `no progress without a token:\n${describeFrames(s)}`);
    assert.ok(!s.raw().includes('notifications/progress'));
    return p;
  }
  for (const e of p) {
    assert.equal(typeof e.progressToken, typeof token, `token JSON type: ${JSON.stringify(e)}`);
    assert.equal(e.progressToken, token, `token value: ${JSON.stringify(e)}`);
    if (total !== undefined) assert.equal(e.total, total, `constant total: ${JSON.stringify(e)}`);
  }
  for (let i = 1; i < p.length; i++)
    assert.ok(p[i]!.progress > p[i - 1]!.progress, `strictly increasing: ${p.map((e) => e.progress).join(', ')}`);
  // The raw bytes, not only the parsed value: "12345" would parse to a string, 12345 to a number.
  const rawToken = `"progressToken":${JSON.stringify(token)}`;
  const count = s.raw().split(rawToken).length - 1;
  assert.equal(count, p.length, `each notification carries ${rawToken} verbatim`);
  return p;
}

/** Gateway log lines that would mean a write on a finished response. */
const WRITE_AFTER_END =
  /headers already sent|write after end|ERR_STREAM_WRITE_AFTER_END|ERR_HTTP_HEADERS_SENT|ERR_STREAM_DESTROYED/i;

describe('Case B-12: progress notification token and ordering', { concurrency: true }, () => {
  let c: Cluster;
  before(async () => {
    c = await startCluster({ gateways: 2, workers: 2 });
  });
  /** The task record of a call (sync calls never show their id), by tool and arguments. */
  async function findTask(
    tool: string,
    match: (args: Record<string, any>) => boolean,
  ): Promise<(Record<string, string> & { taskId: string }) | undefined> {
    for (const k of (await c.keys()).filter((k) => k.endsWith(':task'))) {
      const h = await c.redis.hgetall(k);
      if (h.tool === tool && h.args && match(JSON.parse(h.args)))
        return { ...h, taskId: /\{t:([^}]+)\}/.exec(k)![1]! } as Record<string, string> & { taskId: string };
    }
    return undefined;
  }
  after(async () => {
    // No gateway ever tried to write on a finished stream (case B-12e).
    const bad = c.gateways.flatMap((g) => g.logs).filter((l) => WRITE_AFTER_END.test(JSON.stringify(l)));
    await c?.stop();
    assert.deepEqual(bad, [], 'no write-after-end in gateway logs');
  });

  it('Case B-12a: progress_sync(5, 1) with token "pt-7" → 5 progress (1..5 of 5) echoing "pt-7", then the result', async () => {
    const s = call(
      c.urls[0]!,
      'progress_sync',
      { steps: 5, intervalSeconds: 1 },
      { tasks: false, meta: { progressToken: 'pt-7' } },
    );
    const p = await assertProgressStream(s, 'pt-7', 5);
    assert.deepEqual(
      p.map((e) => e.progress),
      [1, 2, 3, 4, 5],
    );
    assert.deepEqual(
      p.map((e) => e.message),
      [1, 2, 3, 4, 5].map((i) => `step ${i} of 5`),
    );
    assert.equal(s.final()!.result?.content?.[0]?.text, 'progress_sync: 5 steps done');
    assert.equal((await s.response).headers['x-accel-buffering'], 'no', 'H-22: X-Accel-Buffering: no');
  });

  it('Case B-12b: the numeric token 12345 stays a JSON number (and 0, a falsy integer, is still a token)', async () => {
    const s = call(
      c.urls[1]!,
      'progress_sync',
      { steps: 5, intervalSeconds: 1 },
      { tasks: false, meta: { progressToken: 12345 } },
    );
    const zero = call(
      c.urls[0]!,
      'progress_sync',
      { steps: 3, intervalSeconds: 0.5 },
      { tasks: false, meta: { progressToken: 0 } },
    );
    const p = await assertProgressStream(s, 12345, 5);
    assert.deepEqual(
      p.map((e) => e.progress),
      [1, 2, 3, 4, 5],
    );
    assert.ok(!s.raw().includes('"12345"'), 'never the string "12345"');
    const pz = await assertProgressStream(zero, 0, 3);
    assert.deepEqual(
      pz.map((e) => e.progress),
      [1, 2, 3],
    );
  });

  it('Case B-12c: no token → no progress notification at all, only the result', async () => {
    const s = call(c.urls[0]!, 'progress_sync', { steps: 5, intervalSeconds: 1 }, { tasks: false });
    await assertProgressStream(s, undefined, undefined);
    assert.equal(s.frames.filter((f) => f.kind === 'message').length, 1);
    assert.equal(s.final()!.result?.content?.[0]?.text, 'progress_sync: 5 steps done');
  });

  it('Case B-12d: a task tool called with a token (Tasks declared) → JSON CreateTaskResult, no progress on the POST; tasks/get reports statusMessage; a listen stream on it carries no progress', async () => {
    const s = call(
      c.urls[1]!,
      'progress_sync',
      { steps: 5, intervalSeconds: 0.6 },
      { meta: { progressToken: 'pt-d' } },
    );
    const d = await s.done;
    assert.equal(d.how, 'end');
    assert.match(String((await s.response).headers['content-type']), /^application\/json/);
    assert.ok(!s.raw().includes('notifications/progress'), s.raw());
    const handle = JSON.parse(s.raw()).result;
    assert.equal(handle.resultType, 'task');
    // A listen stream on the task carries task status, never progress (H-24, T-41).
    const listen = sseCall(
      c.urls[0]!,
      'subscriptions/listen',
      { notifications: { taskIds: [handle.taskId] } },
      { meta: { progressToken: 'pt-d-listen' } },
    );
    const seen = new Set<string>();
    const done = await pollTask(
      () => c.urls[seen.size % 2]!,
      handle.taskId,
      (t) => {
        if (t.status === 'working' && t.statusMessage) seen.add(t.statusMessage);
        return t.status === 'completed';
      },
      15_000,
      150,
    );
    assert.ok(
      [...seen].some((m) => /^step [1-4] of 5$/.test(m)),
      `tasks/get showed the progress as statusMessage: ${[...seen].join(' | ')}`,
    );
    assert.equal(done.result?.content?.[0]?.text, 'progress_sync: 5 steps done');
    await listen
      .waitFrame((f) => f.message?.method === 'notifications/tasks' && f.message.params?.status === 'completed', 5000)
      .catch(() => undefined);
    listen.close();
    const listenMsgs = listen.frames.filter((f) => f.kind === 'message').map((f) => f.message?.method);
    assert.ok(
      listenMsgs.includes('notifications/tasks'),
      `the listen stream carried task notifications: ${listenMsgs.join(', ')} (${listen.raw().slice(0, 300)})`,
    );
    assert.ok(
      !listen.raw().includes('notifications/progress'),
      `no progress on a listen stream:\n${describeFrames(listen)}`,
    );
    // A tasks/get is answered as JSON too: the token is dead after the handle (spec §7).
    const g = await getTask(c.urls[0]!, handle.taskId, { meta: { progressToken: 'pt-d' } });
    assert.match(g.contentType, /^application\/json/);
    assert.equal(g.messages.length, 0);
  });

  it('Case B-12e: last progress right before the result (steps 20, 5 ms / 50 ms / 250 ms apart): all progress before the result, none after, increasing, total 20', async () => {
    const runs = [0.005, 0.05, 0.25].map((interval, i) => ({
      interval,
      token: i === 1 ? 7000 + i : `pt-e-${i}`,
      s: call(
        c.urls[i % 2]!,
        'progress_sync',
        { steps: 20, intervalSeconds: interval, stamp: true },
        { tasks: false, meta: { progressToken: i === 1 ? 7000 + i : `pt-e-${i}` } },
      ),
    }));
    for (const r of runs) {
      const p = await assertProgressStream(r.s, r.token, 20);
      assert.ok(p.length >= 1, 'some progress');
      assert.equal(
        p.at(-1)!.progress,
        20,
        `the last progress always lands (${r.interval} s): ${p.map((e) => e.progress).join(', ')}`,
      );
      if (r.interval === 0.25)
        assert.equal(p.length, 20, 'every step when they are further apart than the 200 ms coalescing window');
      if (r.interval === 0.005)
        assert.ok(p.length < 10, `coalesced to ≤ 1 per 200 ms (P-04): ${p.length} for 20 steps in ~0.1 s`);
      // Each relayed event arrives soon after its emission on the worker (same clock).
      const lat = p.map((e) => e.at - Number(/@(\d+)$/.exec(String(e.message))![1]));
      console.log(
        `Case B-12e interval ${r.interval} s: ${p.length} progress, emission → client max ${Math.max(...lat)} ms; last progress → result ${r.s.frames.at(-1)!.at - p.at(-1)!.at} ms`,
      );
      assert.equal(r.s.final()!.result?.content?.[0]?.text, 'progress_sync: 20 steps done');
    }
  });

  it('Case B-12e under load: 20 concurrent calls (string and numeric tokens, both gateways): each stream only its own token, nothing after the result', async () => {
    const runs = Array.from({ length: 20 }, (_, i) => {
      const token: Token = i % 2 ? 90_000 + i : `pt-load-${i}`;
      const interval = [0.005, 0.02, 0.05, 0.1][i % 4]!;
      return {
        token,
        s: call(
          c.urls[i % 2]!,
          'progress_sync',
          { steps: 20, intervalSeconds: interval },
          { tasks: false, meta: { progressToken: token } },
        ),
      };
    });
    let frames = 0;
    for (const r of runs) {
      const p = await assertProgressStream(r.s, r.token, 20);
      assert.equal(p.at(-1)!.progress, 20, `last progress landed for ${r.token}`);
      assert.equal(r.s.final()!.result?.content?.[0]?.text, 'progress_sync: 20 steps done');
      frames += p.length;
    }
    console.log(`Case B-12e load: 20 calls, ${frames} progress notifications, none after a result`);
  });

  it('Case B-12e: the last progress published a millisecond before the completion (24 calls, 4 at a time) → relayed before the result, nothing after it', async () => {
    // The worker publishes the last progress and, a millisecond later, the completion: the
    // gateway, woken by that progress, must still relay it, then the result, then nothing. The
    // delay from the completion's announcement (as a subscriber here receives it) to the result
    // frame is printed, not asserted: on a loaded machine it reached 0.9 s with nothing wrong
    // in the gateway; `npm run bench` measures it on a quiet one.
    const sub = new Redis(c.redisUrl, { maxRetriesPerRequest: 1 });
    /** When each task channel announced `completed` (the message is the new status), as received here (ms). */
    const announced = new Map<string, number>();
    sub.on('pmessage', (_pattern: string, channel: string, status: string) => {
      if (status === 'completed' && !announced.has(channel)) announced.set(channel, Date.now());
    });
    await sub.psubscribe(`${c.prefix}:task:*`);
    const delays: number[] = [];
    let n = 0;
    try {
      for (let round = 0; round < 6; round++) {
        await Promise.all(
          Array.from({ length: 4 }, async (_, j) => {
            const i = n++;
            const steps = j % 2 ? 3 : 1;
            const interval = (j % 2 ? 0.2 : 0) + i / 1e4; // tells the runs apart in Redis
            const token = `pt-w-${i}`;
            const s = call(
              c.urls[i % 2]!,
              'progress_sync',
              { steps, intervalSeconds: interval },
              { tasks: false, meta: { progressToken: token } },
            );
            const p = await assertProgressStream(s, token, steps);
            assert.equal(
              p.at(-1)?.progress,
              steps,
              `the last progress is relayed, before the result:\n${describeFrames(s)}`,
            );
            assert.equal(s.final()!.result?.content?.[0]?.text, `progress_sync: ${steps} steps done`);
            const rec = await findTask('progress_sync', (a) => a.intervalSeconds === interval);
            assert.equal(rec?.status, 'completed');
            const at = await waitFor(
              () => announced.get(`${c.prefix}:task:${rec!.taskId}`),
              10_000,
              20,
              `the completion of ${rec!.taskId} announced on its channel`,
            );
            delays.push(s.frames.at(-1)!.at - at);
          }),
        );
      }
    } finally {
      sub.disconnect();
    }
    console.log(`Case B-12e: completion announced → result on the stream (ms, not asserted): ${delays.join(', ')}`);
  });

  it('Case B-12d/e: a stream closed mid-call gets nothing more and the call is cancelled (no write to a closed stream)', async () => {
    const s = call(
      c.urls[0]!,
      'progress_sync',
      { steps: 50, intervalSeconds: 0.1 },
      { tasks: false, meta: { progressToken: 'pt-close' } },
    );
    await s.waitFrame((f) => f.message?.method === 'notifications/progress', 10_000);
    s.close();
    assert.equal((await s.done).how, 'closed');
    await new Promise((r) => setTimeout(r, 1500));
    assert.ok(!s.final(), 'no result on a closed stream');
    // The gateway logged the disconnect, not a write error (checked in after()), and the call
    // was cancelled (C-01).
    const log = await c.gateways[0]!.waitLog((l) => l.msg === 'sync.disconnected', 5000);
    const taskId = String(log.taskId);
    const rec = await c.redis.hgetall(`${c.prefix}:{t:${taskId}}:task`);
    assert.equal(rec.tool, 'progress_sync');
    assert.equal(rec.mode, 'sync', 'the synchronous call (its args are dropped once it ended)');
    assert.equal(rec.status, 'cancelled', JSON.stringify(rec));
  });
});
