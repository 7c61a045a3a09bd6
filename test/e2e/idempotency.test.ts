// @needs redis
/**
 * Idempotent creation (apps/gateway/src/idempotency.ts, docs/architecture.md "Idempotent
 * creation"): a `tools/call` with an `Idempotency-Key` header gets the task an earlier call of
 * the same principal with the same key, tool and arguments created, on any gateway and after a
 * gateway restart; other arguments or another tool are refused (-32602, HTTP 422); principals
 * never share keys; two identical calls at once make one task and one job (case B-02 (e): without
 * a key they make two); a synchronous call's retry holds the same running work and gets its
 * result; the key expires with its task; a malformed key is refused (-32602, HTTP 400) and a
 * refused request writes no key. Two gateways, one worker, API-key principals, real Redis.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { Queue } from 'bullmq';
import { startCluster, sleep, waitFor, type Cluster, type Proc } from '../support/cluster.js';
import { callTool, getTask, type CallOptions, type RpcResponse } from '../support/mcp.js';

const ALICE = randomBytes(24).toString('hex');
const BOB = randomBytes(24).toString('hex');
const CAROL = randomBytes(24).toString('hex');

const brief = (r: RpcResponse) => `HTTP ${r.status} ${JSON.stringify(r.body).slice(0, 400)}`;
const keyed = (key: string, o: CallOptions = {}): CallOptions => ({
  token: ALICE,
  ...o,
  headers: { 'idempotency-key': key, ...(o.headers ?? {}) },
});
const fresh = () => `"${randomUUID()}"`;

describe('Idempotency-Key on tools/call: one task per principal, key, tool and arguments', () => {
  let c: Cluster;
  let queue: Queue;
  let g1: Proc;
  let g2: Proc;
  before(async () => {
    c = await startCluster({
      gateways: 2,
      workers: 1,
      env: { AUTH_API_KEYS: `alice:${ALICE},bob:${BOB},carol:${CAROL}` },
    });
    [g1, g2] = c.gateways as [Proc, Proc];
    const u = new URL(c.redisUrl);
    queue = new Queue('tools', {
      connection: { host: u.hostname, port: Number(u.port || 6379), maxRetriesPerRequest: null },
      prefix: `${c.prefix}:{jobs}`,
    });
  });
  after(async () => {
    await queue?.close().catch(() => undefined);
    await c?.stop();
  });

  const created = (taskId: string) =>
    c.gateways.flatMap((g) => g.logs).filter((l) => l.msg === 'task.created' && l.taskId === taskId).length;
  const idemKeys = async () => (await c.keys()).filter((k) => k.includes(':idem:'));

  it('the same call on the other gateway, and after a gateway restart, gets the same task (its current state); one job', async () => {
    const key = fresh();
    const args = { seconds: 30, text: 'same', quiet: true };
    const a = await callTool(g1.url!, 'slow_echo', args, keyed(key));
    assert.equal(a.body.result?.resultType, 'task', brief(a));
    const taskId = a.body.result!.taskId as string;
    const b = await callTool(g2.url!, 'slow_echo', args, keyed(key));
    assert.equal(b.status, 200, brief(b));
    assert.equal(b.body.result?.resultType, 'task');
    assert.equal(b.body.result?.taskId, taskId, 'same task on the other gateway');
    assert.equal(b.body.result?.createdAt, a.body.result?.createdAt);
    // Restart: the first gateway dies, a new one answers from Redis alone.
    await g1.kill();
    const g3 = await c.addGateway();
    const r = await callTool(g3.url!, 'slow_echo', args, keyed(key));
    assert.equal(r.body.result?.taskId, taskId, `same task after a gateway restart: ${brief(r)}`);
    assert.equal(r.body.result?.status, 'working', 'its current state');
    assert.equal(created(taskId), 1, 'created once');
    assert.ok(await queue.getJob(`t.${taskId}.1`), 'its step job');
    const replays = c.gateways.flatMap((g) => g.logs).filter((l) => l.msg === 'task.idempotent_replay');
    assert.equal(replays.filter((l) => l.taskId === taskId).length, 2);
    g1 = g3;
  });

  it('a finished task: the replay is its CreateTaskResult with status completed, and tasks/get gives the result', async () => {
    const key = fresh();
    const a = await callTool(g1.url!, 'slow_echo', { seconds: 0, text: 'done' }, keyed(key));
    const taskId = a.body.result!.taskId as string;
    await waitFor(async () => (await getTask(g2.url!, taskId, { token: ALICE })).body.result?.status === 'completed');
    const b = await callTool(g2.url!, 'slow_echo', { seconds: 0, text: 'done' }, keyed(key));
    assert.equal(b.body.result?.taskId, taskId);
    assert.equal(b.body.result?.status, 'completed', brief(b));
    assert.equal(b.body.result?.resultType, 'task');
    assert.ok(!('result' in b.body.result!), 'a CreateTaskResult carries no payload');
  });

  it('the same key with other arguments, or another tool: -32602 (HTTP 422) saying why; nothing created', async () => {
    const key = fresh();
    const a = await callTool(g1.url!, 'slow_echo', { seconds: 30, text: 'one', quiet: true }, keyed(key));
    const taskId = a.body.result!.taskId as string;
    const tracked = async () => (await c.keys()).filter((k) => k.endsWith(':task') || k.includes(':idem:')).sort();
    const before = await tracked();
    for (const [tool, args] of [
      ['slow_echo', { seconds: 30, text: 'two', quiet: true }],
      ['countdown', { seconds: 3 }],
    ] as const) {
      const r = await callTool(g2.url!, tool, args, keyed(key));
      assert.equal(r.status, 422, brief(r));
      assert.equal(r.body.error?.code, -32602);
      assert.match(r.body.error!.message, /Idempotency-Key already used: .*another tool or other arguments/);
      assert.doesNotMatch(JSON.stringify(r.body), new RegExp(taskId), 'the other task is not named');
    }
    assert.deepEqual(await tracked(), before, 'nothing written');
    // The original still replays.
    const again = await callTool(g2.url!, 'slow_echo', { seconds: 30, text: 'one', quiet: true }, keyed(key));
    assert.equal(again.body.result?.taskId, taskId);
  });

  it('principals never share keys: another principal with the same key and call gets its own task', async () => {
    const key = fresh();
    const args = { seconds: 30, text: 'mine', quiet: true };
    const a = await callTool(g1.url!, 'slow_echo', args, keyed(key));
    const b = await callTool(g2.url!, 'slow_echo', args, keyed(key, { token: BOB }));
    assert.equal(b.body.result?.resultType, 'task', brief(b));
    assert.notEqual(b.body.result?.taskId, a.body.result?.taskId);
    const b2 = await callTool(g1.url!, 'slow_echo', args, keyed(key, { token: BOB }));
    assert.equal(b2.body.result?.taskId, b.body.result?.taskId, "bob's retry gets bob's task");
    // And bob's task is not alice's: tasks/get as alice does not find it.
    const foreign = await getTask(g1.url!, b.body.result!.taskId as string, { token: ALICE });
    assert.equal(foreign.body.error?.code, -32602);
  });

  it('two identical calls at the same moment on two gateways: one task, one job; without a key two (case B-02 (e))', async () => {
    for (let round = 0; round < 5; round++) {
      const key = fresh();
      const args = { seconds: 30, text: `race-${round}`, quiet: true };
      const [a, b] = await Promise.all([
        callTool(g1.url!, 'slow_echo', args, keyed(key)),
        callTool(g2.url!, 'slow_echo', args, keyed(key)),
      ]);
      assert.equal(a.body.result?.resultType, 'task', brief(a));
      assert.equal(b.body.result?.resultType, 'task', brief(b));
      const taskId = a.body.result!.taskId as string;
      assert.equal(b.body.result?.taskId, taskId, `round ${round}: one task`);
      await waitFor(() => created(taskId) === 1, 5000, 20, `the task.created line of ${taskId}`);
      assert.ok(await queue.getJob(`t.${taskId}.1`), 'its one step job');
    }
    // Records with the race's text: exactly one per round.
    const keys = (await c.keys()).filter((k) => k.endsWith(':task'));
    const texts = await Promise.all(keys.map((k) => c.redis.hget(k, 'args')));
    for (let round = 0; round < 5; round++)
      assert.equal(texts.filter((t) => t?.includes(`"race-${round}"`)).length, 1, `round ${round}: one record`);
    const args = { seconds: 30, text: 'no-key', quiet: true };
    const [a, b] = await Promise.all([
      callTool(g1.url!, 'slow_echo', args, { token: ALICE }),
      callTool(g2.url!, 'slow_echo', args, { token: ALICE }),
    ]);
    assert.notEqual(a.body.result?.taskId, b.body.result?.taskId, 'case B-02 (e): two calls without a key, two tasks');
  });

  it('the key expires with its task (same PTTL), and names it until then', async () => {
    const key = fresh();
    const a = await callTool(g1.url!, 'slow_echo', { seconds: 30, text: 'ttl', quiet: true }, keyed(key));
    const taskId = a.body.result!.taskId as string;
    const owned = [];
    for (const k of await idemKeys()) if ((await c.redis.hget(k, 'taskId')) === taskId) owned.push(k);
    assert.equal(owned.length, 1, 'one key names the task');
    const [keyTtl, taskTtl] = await Promise.all([
      c.redis.pttl(owned[0]!),
      c.redis.pttl(`${c.prefix}:{t:${taskId}}:task`),
    ]);
    assert.ok(keyTtl > 0 && taskTtl > 0, `both expire (${keyTtl}, ${taskTtl})`);
    assert.ok(Math.abs(keyTtl - taskTtl) <= 50, `same PTTL: key ${keyTtl} ms, task ${taskTtl} ms`);
    const [keyAt, taskAt] = await Promise.all([
      c.redis.pexpiretime(owned[0]!),
      c.redis.pexpiretime(`${c.prefix}:{t:${taskId}}:task`),
    ]);
    assert.equal(keyAt, taskAt, 'the same expiry instant (the task is created at its claim time)');
    assert.ok(!owned[0]!.includes(key.replaceAll('"', '')), 'the key itself is not in the key name');
  });

  it('a malformed key: -32602 with HTTP 400, nothing counted or written; the bare and the quoted form are one key', async () => {
    const before = await idemKeys();
    for (const bad of ['""', '"a" "b"', '"a", "b"', 'has space', '"x";p=1', `"${'k'.repeat(256)}"`, '"é"']) {
      const r = await callTool(g1.url!, 'slow_echo', { seconds: 1 }, keyed(bad));
      assert.equal(r.status, 400, `${bad}: ${brief(r)}`);
      assert.equal(r.body.error?.code, -32602);
      assert.match(r.body.error!.message, /^Invalid Idempotency-Key header: .*printable ASCII/);
    }
    assert.deepEqual(await idemKeys(), before, 'no key written');
    const id = randomUUID();
    const a = await callTool(g1.url!, 'slow_echo', { seconds: 30, quiet: true }, keyed(id));
    const b = await callTool(g2.url!, 'slow_echo', { seconds: 30, quiet: true }, keyed(`"${id}"`));
    assert.equal(a.body.result?.resultType, 'task', brief(a));
    assert.equal(b.body.result?.taskId, a.body.result?.taskId, 'bare and quoted: the same key');
  });

  it('a refused request writes no key; a replay is not a creation (neither the creation rate nor the outstanding limit refuses it)', async () => {
    const g = await c.addGateway({ RATE_LIMIT_TASK_CREATIONS_PER_MIN: '2', MAX_OUTSTANDING_TASKS: '1' });
    const as = (key: string) => keyed(key, { token: CAROL });
    const k1 = fresh();
    const first = await callTool(g.url!, 'slow_echo', { seconds: 60, quiet: true }, as(k1));
    assert.equal(first.body.result?.resultType, 'task', brief(first));
    const before = await idemKeys();
    const full = await callTool(g.url!, 'slow_echo', { seconds: 60, quiet: true }, as(fresh()));
    assert.equal(full.status, 429, brief(full));
    assert.equal(full.body.error?.data?.limit, 'outstanding_tasks');
    const rate = await callTool(g.url!, 'slow_echo', { seconds: 60, quiet: true }, as(fresh()));
    assert.equal(rate.status, 429, brief(rate));
    assert.equal(rate.body.error?.data?.limit, 'task_creations_per_minute');
    assert.deepEqual(await idemKeys(), before, 'no key written by a refused request');
    for (let i = 0; i < 3; i++) {
      const replay = await callTool(g.url!, 'slow_echo', { seconds: 60, quiet: true }, as(k1));
      assert.equal(replay.body.result?.taskId, first.body.result?.taskId, `replay ${i}: ${brief(replay)}`);
    }
  });
});

describe('Idempotency-Key on a synchronous call: a retry holds the same running work and gets its result', () => {
  let c: Cluster;
  before(async () => {
    c = await startCluster({
      gateways: 2,
      workers: 1,
      env: { SYNC_HOLDER_TIMEOUT_MS: '3000', SYNC_BUDGET_MS_BY_TOOL: '{"countdown":1000}' },
    });
  });
  after(async () => c?.stop());

  const sync = (o: CallOptions = {}): CallOptions => ({ tasks: false, ...o });
  const startedRuns = (taskId: string) =>
    c.workers.flatMap((w) => w.logs).filter((l) => l.msg === 'step.started' && l.taskId === taskId).length;

  it("the first request is lost mid-call; the retry on another gateway gets the same run's result (one task, one run)", async () => {
    const [g1, g2] = c.gateways as [Proc, Proc];
    const key = fresh();
    const args = { seconds: 3, text: 'once' };
    const lost = new AbortController();
    const first = callTool(
      g1.url!,
      'slow_echo',
      args,
      sync({ headers: { 'idempotency-key': key }, signal: lost.signal, meta: { progressToken: 'a' } }),
    ).catch((e: Error) => e);
    const taskId = (await g1.waitLog((l) => l.msg === 'task.created' && l.mode === 'sync')).taskId as string;
    await waitFor(() => startedRuns(taskId) === 1, 10_000);
    await sleep(500);
    lost.abort();
    await first;
    await g1.waitLog((l) => l.msg === 'sync.disconnected' && l.taskId === taskId);
    const t0 = Date.now();
    const retry = await callTool(
      g2.url!,
      'slow_echo',
      args,
      sync({ headers: { 'idempotency-key': key }, meta: { progressToken: 'b' } }),
    );
    assert.equal(retry.status, 200, brief(retry));
    const result = retry.body.result!;
    assert.equal(result.isError, undefined, brief(retry));
    assert.equal(result.structuredContent?.summary, 'echo: once');
    assert.equal(result.structuredContent?.attempt, 1, 'the first run, not a restart');
    assert.ok(Date.now() - t0 < 3500, 'it joined the running work rather than starting over');
    assert.ok(
      retry.messages.some((m) => m.method === 'notifications/progress' && m.params?.progressToken === 'b'),
      'progress relayed to the retry',
    );
    assert.equal(startedRuns(taskId), 1, 'one run');
    const creations = c.gateways.flatMap((g) => g.logs).filter((l) => l.msg === 'task.created' && l.mode === 'sync');
    assert.equal(creations.length, 1, 'one task');
    // Done: another retry gets the same result at once.
    const late = await callTool(g1.url!, 'slow_echo', args, sync({ headers: { 'idempotency-key': key } }));
    assert.deepEqual(late.body.result?.structuredContent, result.structuredContent);
  });

  it('a call handed off earlier (its budget ran out): the retry gets the hand-off again, naming the same task; the key retried with the Tasks extension is refused (422)', async () => {
    const [g1, g2] = c.gateways as [Proc, Proc];
    const key = fresh();
    const first = await callTool(g1.url!, 'countdown', { seconds: 4 }, sync({ headers: { 'idempotency-key': key } }));
    const handed = first.body.result?.structuredContent as Record<string, unknown> | undefined;
    assert.match(String(handed?.summary), /is still running after 1 s/, brief(first));
    const retry = await callTool(g2.url!, 'countdown', { seconds: 4 }, sync({ headers: { 'idempotency-key': key } }));
    const again = retry.body.result?.structuredContent as Record<string, unknown> | undefined;
    assert.equal(again?.taskId, handed?.taskId, brief(retry));
    assert.match(String(again?.summary), /was handed off to the background by an earlier request/);
    // A key used on the synchronous lane, sent again by a client with the Tasks extension.
    const k2 = fresh();
    // Only a line logged from now on: an earlier test's synchronous slow_echo on g1 matched at
    // once, so the second call could reach g2 before g1 had claimed the key, and made its own task.
    const mark = g1.logs.length;
    const held = callTool(
      g1.url!,
      'slow_echo',
      { seconds: 2, text: 'lane' },
      sync({ headers: { 'idempotency-key': k2 } }),
    );
    await g1.waitLog(
      (l) => l.msg === 'task.created' && l.mode === 'sync' && l.tool === 'slow_echo' && g1.logs.indexOf(l) >= mark,
    );
    const other = await callTool(
      g2.url!,
      'slow_echo',
      { seconds: 2, text: 'lane' },
      { headers: { 'idempotency-key': k2 } },
    );
    assert.equal(other.status, 422, brief(other));
    assert.match(other.body.error!.message, /without the io\.modelcontextprotocol\/tasks extension/);
    assert.equal((await held).body.result?.structuredContent?.summary, 'echo: lane');
  });

  it('two holders at once both get the result; a keyed call nobody retries is cancelled once its hold lapses (SYNC_HOLDER_TIMEOUT_MS), not at the close', async () => {
    const [g1, g2] = c.gateways as [Proc, Proc];
    const key = fresh();
    const args = { seconds: 2, text: 'both' };
    const [a, b] = await Promise.all([
      callTool(g1.url!, 'slow_echo', args, sync({ headers: { 'idempotency-key': key } })),
      callTool(g2.url!, 'slow_echo', args, sync({ headers: { 'idempotency-key': key } })),
    ]);
    assert.equal(a.body.result?.structuredContent?.summary, 'echo: both', brief(a));
    assert.deepEqual(b.body.result?.structuredContent, a.body.result?.structuredContent);

    // Abandoned keyed call: still working right after the close, cancelled once its hold lapses.
    const gone = new AbortController();
    const k2 = fresh();
    const syncCreated = () => g1.logs.filter((l) => l.msg === 'task.created' && l.mode === 'sync');
    const before = syncCreated().length;
    const p = callTool(
      g1.url!,
      'slow_echo',
      { seconds: 30, text: 'abandoned' },
      sync({ headers: { 'idempotency-key': k2 }, signal: gone.signal }),
    ).catch(() => undefined);
    const created = await waitFor(() => syncCreated()[before], 10_000, 20, 'the abandoned call to be created');
    const taskId = created.taskId as string;
    await waitFor(() => startedRuns(taskId) === 1, 10_000);
    gone.abort();
    await p;
    const closedAt = Date.now();
    await g1.waitLog((l) => l.msg === 'sync.disconnected' && l.taskId === taskId);
    assert.equal(await c.redis.hget(`${c.prefix}:{t:${taskId}}:task`, 'status'), 'working', 'left for a retry');
    await waitFor(
      async () => (await c.redis.hget(`${c.prefix}:{t:${taskId}}:task`, 'status')) === 'cancelled',
      15_000,
      100,
      'the unheld keyed call to be cancelled',
    );
    assert.ok(Date.now() - closedAt >= 2000, 'not before its hold lapsed');
  });
});
