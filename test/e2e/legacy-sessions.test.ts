// @needs redis
/**
 * 2025-era sessions across replicas (design D15; LG-01, LG-02, LG-07): raw 2025-11-25 and
 * 2025-06-18 clients against 2 gateways and 2 workers with an API key. Every step a client takes
 * after `initialize` is sent to the OTHER gateway than the one before, as a load balancer without
 * affinity would: the session, the question's answer and the cancel must all work from Redis.
 *  - `initialize` issues an `Mcp-Session-Id`; it works on every replica, only with the credential
 *    that opened it, and `DELETE` ends it everywhere (404 afterwards);
 *  - deep_research (a worker tool) and share_report (a gateway tool) ask their question as an
 *    `elicitation/create` request on the call's stream; the client's response, POSTed to the
 *    other gateway, resumes the call; accept, decline and cancel behave as on the other lanes; an
 *    answer that does not fit the form is refused (400) and asked again;
 *  - `notifications/cancelled` for a running `countdown {10}`, sent to the other gateway, leaves
 *    its task `cancelled` within 3 s (measured), the worker's step stops, and the call's stream
 *    ends with no response; without a session it is ignored; closing the stream still cancels.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { startCluster, waitFor, type Cluster } from '../support/cluster.js';
import {
  call as legacyCall,
  createdTask,
  isElicitation,
  open as legacyOpen,
  post as legacyPost,
  textOf,
} from '../support/legacy.js';

const ALICE = `alice-${randomBytes(12).toString('hex')}`;
const BOB = `bob-${randomBytes(12).toString('hex')}`;

/** The raw client's calls, as Alice unless told otherwise. */
const post = (
  url: string,
  message: Record<string, unknown>,
  o: { sid?: string; token?: string; version?: string | null } = {},
) => legacyPost(url, message, { ...o, token: o.token ?? ALICE });
const open = (c: Cluster, version: string, capabilities: Record<string, unknown>) =>
  legacyOpen(c, version, capabilities, { token: ALICE });
const call = (
  c: Cluster,
  via: number,
  sid: string | undefined,
  id: number,
  name: string,
  args: Record<string, unknown>,
  version = '2025-11-25',
) => legacyCall(c, via, sid, id, name, args, ALICE, version);

describe('2025-era sessions, questions and cancels across 2 gateways + 2 workers (no affinity)', () => {
  let c: Cluster;
  const seen = new Set<string>();
  const status = (taskId: string) => c.redis.hget(`${c.prefix}:{t:${taskId}}:task`, 'status');

  before(async () => {
    c = await startCluster({ gateways: 2, workers: 2, env: { AUTH_API_KEYS: `alice:${ALICE},bob:${BOB}` } });
  });
  after(async () => {
    await c?.stop();
  });

  it('initialize issues a session id (visible ASCII, 256 random bits) that works on every replica, only with the credential that opened it; DELETE ends it everywhere (LG-01, LG-02, LG-07)', async () => {
    const sid = await open(c, '2025-11-25', { elicitation: { form: {}, url: {} } });
    assert.match(sid, /^[\x21-\x7E]{43}$/);
    const other = await open(c, '2025-11-25', {});
    assert.notEqual(sid, other);
    // Every replica knows it.
    for (const url of c.urls) {
      const list = await post(url, { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }, { sid });
      assert.equal(list.status, 200, list.text);
      assert.ok((list.message?.result?.tools as { name: string }[]).some((t) => t.name === 'deep_research'));
    }
    // Bob presenting Alice's session: exactly like an unknown one, on every replica (LG-07).
    for (const url of c.urls) {
      for (const [who, id] of [
        ['bob', sid],
        ['alice', 'no-such-session'],
        ['alice', randomBytes(32).toString('base64url')],
      ] as const) {
        const r = await post(
          url,
          { jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} },
          { sid: id, token: who === 'bob' ? BOB : ALICE },
        );
        assert.equal(r.status, 404, `${who} ${id}: ${r.text}`);
        assert.deepEqual(r.message, { jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: 2 });
      }
    }
    const bobDelete = await fetch(c.urls[1]!, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${BOB}`, 'mcp-session-id': sid, 'mcp-protocol-version': '2025-11-25' },
    });
    assert.equal(bobDelete.status, 404, 'another principal cannot end it');
    // Still Alice's.
    assert.equal(
      (await post(c.urls[0]!, { jsonrpc: '2.0', id: 3, method: 'tools/list', params: {} }, { sid })).status,
      200,
    );
    // As the Python SDK sends it: with Content-Type and no body.
    const del = await fetch(c.urls[1]!, {
      method: 'DELETE',
      headers: {
        authorization: `Bearer ${ALICE}`,
        'mcp-session-id': sid,
        'mcp-protocol-version': '2025-11-25',
        'content-type': 'application/json',
      },
    });
    assert.equal(del.status, 200, await del.text());
    for (const url of c.urls) {
      const r = await post(url, { jsonrpc: '2.0', id: 4, method: 'tools/list', params: {} }, { sid });
      assert.equal(r.status, 404, r.text);
      assert.equal(r.message?.error?.code, -32001);
    }
    const again = await fetch(c.urls[0]!, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${ALICE}`, 'mcp-session-id': sid },
    });
    assert.equal(again.status, 404);
    // The other session is untouched; the record holds no credential, and expires.
    assert.equal(
      (await post(c.urls[1]!, { jsonrpc: '2.0', id: 5, method: 'tools/list', params: {} }, { sid: other })).status,
      200,
    );
    const keys = (await c.keys()).filter((k) => k.includes('{s:') && k.endsWith(':session'));
    assert.equal(keys.length, 1, keys.join(', '));
    const ttl = await c.redis.pttl(keys[0]!);
    assert.ok(ttl > 0 && ttl <= 86_400_000, `session TTL ${ttl}`);
    const fields = await c.redis.hgetall(keys[0]!);
    assert.equal(fields.principal, 'key:alice');
    assert.ok(!JSON.stringify(fields).includes(ALICE), 'no credential in Redis');
    assert.ok(!keys[0]!.includes(other), 'the session id is not in the key name');
  });

  it('a request without Mcp-Session-Id is still served (no question can be asked of it): tools/list 200, deep_research → the isError that says why', async () => {
    const list = await post(c.urls[0]!, { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} });
    assert.equal(list.status, 200, list.text);
    const r = call(c, 1, undefined, 7, 'deep_research', { topic: 'no session' });
    await r.done;
    const res = r.final()?.result;
    assert.equal(res?.isError, true, JSON.stringify(r.final()));
    assert.match(textOf(res), /Mcp-Session-Id/);
    assert.ok(!r.frames.some(isElicitation));
  });

  it('deep_research (worker tool, 2025-11-25): the question arrives as elicitation/create on the call stream; the answer POSTed to the other gateway resumes the worker; progress goes on; the report names the audience', async () => {
    const sid = await open(c, '2025-11-25', { elicitation: { form: {}, url: {} } });
    const r = call(c, 0, sid, 11, 'deep_research', { topic: 'sessions' });
    const taskId = await createdTask(c, 'deep_research', seen);
    const q = (await r.waitFrame(isElicitation, 20_000)).message!;
    assert.ok(Number.isSafeInteger(q.id), `server request id ${JSON.stringify(q.id)}`);
    assert.equal(q.params.mode, 'form');
    assert.match(q.params.message, /Who is the report on "sessions" for/);
    assert.ok(q.params.requestedSchema?.properties?.audience, JSON.stringify(q.params));
    assert.equal(await status(taskId), 'input_required');
    const before = r.progress().length;
    const answered = await post(
      c.urls[1]!,
      { jsonrpc: '2.0', id: q.id, result: { action: 'accept', content: { audience: 'company' } } },
      { sid },
    );
    assert.equal(answered.status, 202, answered.text);
    await r.done;
    const final = r.final();
    assert.equal(final?.id, 11);
    assert.equal(final?.result?.isError, undefined, JSON.stringify(final));
    assert.equal(final?.result?.structuredContent?.audience, 'company', JSON.stringify(final));
    const progress = r.progress();
    assert.ok(progress.length > before, 'progress resumed after the answer');
    for (let i = 1; i < progress.length; i++) assert.ok(progress[i]!.progress > progress[i - 1]!.progress);
    assert.equal(await status(taskId), 'completed');
    // A replay of the same response: 202 and ignored (nothing waits for that id any more).
    const replay = await post(
      c.urls[0]!,
      { jsonrpc: '2.0', id: q.id, result: { action: 'accept', content: { audience: 'team' } } },
      { sid },
    );
    assert.equal(replay.status, 202);
  });

  it('share_report (gateway tool, 2025-06-18, elicitation: {}): the form question goes out, the answer on the other gateway finishes the call', async () => {
    const sid = await open(c, '2025-06-18', { elicitation: {} });
    const r = call(c, 1, sid, 12, 'share_report', { channel: '#legacy' }, '2025-06-18');
    const q = (await r.waitFrame(isElicitation, 10_000)).message!;
    assert.match(q.params.message, /Share to #legacy\?/);
    const answered = await post(
      c.urls[0]!,
      { jsonrpc: '2.0', id: q.id, result: { action: 'accept', content: { notify: true } } },
      { sid, version: '2025-06-18' },
    );
    assert.equal(answered.status, 202, answered.text);
    await r.done;
    assert.equal(
      r.final()?.result?.structuredContent?.summary,
      'Shared the report to #legacy and notified its members.',
    );
  });

  it('decline and cancel behave as on the other lanes: deep_research declined ends cancelled with the tool\'s words; share_report cancelled is "Not shared"; a JSON-RPC error as the answer counts as cancel', async () => {
    const sid = await open(c, '2025-11-25', { elicitation: { form: {} } });
    const r1 = call(c, 0, sid, 21, 'deep_research', { topic: 'declined' });
    const taskId = await createdTask(c, 'deep_research', seen);
    const q1 = (await r1.waitFrame(isElicitation, 20_000)).message!;
    await post(c.urls[1]!, { jsonrpc: '2.0', id: q1.id, result: { action: 'decline' } }, { sid });
    await r1.done;
    assert.equal(r1.final()?.result?.isError, true, JSON.stringify(r1.final()));
    assert.match(textOf(r1.final()?.result), /Research cancelled: no audience was chosen/);
    assert.equal(await status(taskId), 'cancelled');

    const r2 = call(c, 1, sid, 22, 'share_report', { channel: '#nope' });
    const q2 = (await r2.waitFrame(isElicitation, 10_000)).message!;
    await post(c.urls[0]!, { jsonrpc: '2.0', id: q2.id, result: { action: 'cancel' } }, { sid });
    await r2.done;
    assert.equal(textOf(r2.final()?.result), 'Not shared to #nope.');

    const r3 = call(c, 0, sid, 23, 'share_report', { channel: '#err' });
    const q3 = (await r3.waitFrame(isElicitation, 10_000)).message!;
    const err = await post(
      c.urls[1]!,
      { jsonrpc: '2.0', id: q3.id, error: { code: -32601, message: 'no UI here' } },
      { sid },
    );
    assert.equal(err.status, 202);
    await r3.done;
    assert.equal(textOf(r3.final()?.result), 'Not shared to #err.');
  });

  it('an answer that does not fit the form is refused (400 -32602) and the question comes again under a new id; the right answer then finishes the call', async () => {
    const sid = await open(c, '2025-11-25', { elicitation: {} });
    const r = call(c, 1, sid, 31, 'deep_research', { topic: 'invalid answer' });
    const q = (await r.waitFrame(isElicitation, 20_000)).message!;
    const bad = await post(
      c.urls[0]!,
      { jsonrpc: '2.0', id: q.id, result: { action: 'accept', content: { audience: 'nobody' } } },
      { sid },
    );
    assert.equal(bad.status, 400, bad.text);
    assert.equal(bad.message?.error?.code, -32602);
    assert.match(bad.message?.error?.message, /does not match the requested schema/);
    const again = (await r.waitFrame((f) => isElicitation(f) && f.message!.id !== q.id, 10_000)).message!;
    assert.ok(again.id > q.id, `new id ${again.id} after ${q.id}`);
    // An unknown id, and one of another session: 202, ignored.
    assert.equal(
      (await post(c.urls[1]!, { jsonrpc: '2.0', id: 999_999, result: { action: 'accept' } }, { sid })).status,
      202,
    );
    const good = await post(
      c.urls[1]!,
      { jsonrpc: '2.0', id: again.id, result: { action: 'accept', content: { audience: 'team' } } },
      { sid },
    );
    assert.equal(good.status, 202, good.text);
    await r.done;
    assert.equal(r.final()?.result?.structuredContent?.audience, 'team', JSON.stringify(r.final()));
    assert.equal(r.frames.filter(isElicitation).length, 2);
  });

  it('a 2025-03-26 session (no elicitation in that revision) and a session without elicitation get the isError that says why; nothing is asked', async () => {
    for (const [version, caps] of [
      ['2025-03-26', { elicitation: {} }],
      ['2025-11-25', {}],
    ] as const) {
      const sid = await open(c, version, caps);
      const r = call(c, 0, sid, 41, 'share_report', { channel: '#x' }, version);
      await r.done;
      assert.equal(r.final()?.result?.isError, true, `${version}: ${JSON.stringify(r.final())}`);
      assert.match(textOf(r.final()?.result), /declared form elicitation at initialize/);
      assert.ok(!r.frames.some(isElicitation));
    }
  });

  it('notifications/cancelled for a running countdown {10}, sent to the other gateway: the task is cancelled within 3 s, the worker step stops, the stream ends with no response', async (t) => {
    const sid = await open(c, '2025-11-25', {});
    const r = call(c, 0, sid, 51, 'countdown', { seconds: 10 });
    const taskId = await createdTask(c, 'countdown', seen);
    await r.waitFrame((f) => f.message?.method === 'notifications/progress', 10_000);
    const t0 = Date.now();
    const ack = await post(
      c.urls[1]!,
      { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 51, reason: 'user pressed stop' } },
      { sid },
    );
    assert.equal(ack.status, 202, ack.text);
    await waitFor(async () => (await status(taskId)) === 'cancelled', 3000, 10, `task ${taskId} cancelled`);
    const ms = Date.now() - t0;
    t.diagnostic(`notifications/cancelled → task cancelled in ${ms} ms`);
    const done = await r.done;
    assert.equal(done.how, 'end');
    assert.equal(r.final(), undefined, 'no response to a cancelled request');
    const stepLogs = c.workers.flatMap((w) => w.logs).filter((l) => l.taskId === taskId);
    await waitFor(
      () => c.workers.flatMap((w) => w.logs).some((l) => l.taskId === taskId && l.msg === 'step.cancelled'),
      3000,
    );
    assert.ok(!stepLogs.some((l) => l.msg === 'step.completed'), 'the step did not run to its end');
    const progress = JSON.parse((await c.redis.hget(`${c.prefix}:{t:${taskId}}:task`, 'progress')) ?? '{"progress":0}');
    assert.ok(progress.progress < 10, `stopped at ${progress.progress}/10`);
  });

  it('without a session, notifications/cancelled cannot name a call: 202 and ignored (the call completes); closing the stream of a session call still cancels it (no resumability: nobody could receive its result)', async () => {
    const r = call(c, 0, undefined, 61, 'countdown', { seconds: 2 });
    const first = await createdTask(c, 'countdown', seen);
    const ack = await post(c.urls[1]!, {
      jsonrpc: '2.0',
      method: 'notifications/cancelled',
      params: { requestId: 61 },
    });
    assert.equal(ack.status, 202);
    await r.done;
    assert.equal(textOf(r.final()?.result), 'Countdown from 2 finished.');
    assert.equal(await status(first), 'completed');

    const sid = await open(c, '2025-11-25', {});
    const r2 = call(c, 1, sid, 62, 'countdown', { seconds: 10 });
    const taskId = await createdTask(c, 'countdown', seen);
    await r2.waitFrame((f) => f.message?.method === 'notifications/progress', 10_000);
    r2.close();
    await waitFor(
      async () => (await status(taskId)) === 'cancelled',
      3000,
      20,
      `task ${taskId} cancelled on disconnect`,
    );
    // Logged once the cancel and the slot release are written, which may be just after the poll
    // above saw 'cancelled'.
    await c.gateways[1]!.waitLog((l) => l.msg === 'sync.disconnected' && l.taskId === taskId, 5000);
  });
});
