// @needs redis redis-server
/**
 * Case B-03 (shared/cases/cases.md): an unknown or expired task must never be reported alive.
 *
 * Spec: T-33 / T-37 (tasks/update, tasks/cancel of an unknown id → -32602), §13 error table
 * (tasks/get of an unknown / expired / purged id → -32602 MUST, "not found" or "expired"),
 * T-24 (after `createdAt + ttlMs` the task may be deleted; then -32602), T-21/T-22 (a Task
 * object only for a task that exists), T-42 + transport H-15 (Mcp-Name must equal
 * params.taskId, else 400 + -32020, checked before the method runs), D10 error table
 * (-32602 → HTTP 200; oversized headers → 431 from Node).
 *
 * Runs on a throwaway redis-server, so DBSIZE and INFO commandstats count only this cluster:
 * two gateways, one worker (stopped once the expired fixtures exist, so nothing in Redis
 * changes on its own while the lookups run), TASK_TTL_MS=2000 (the case's test profile).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import {
  sleep,
  startCluster,
  startRedis,
  waitFor,
  type Cluster,
  type Proc,
  type ThrowawayRedis,
} from '../support/cluster.js';
import {
  callTool,
  cancelTask,
  getTask,
  pollTask,
  roundRobin,
  rpc,
  updateTask,
  type RpcResponse,
} from '../support/mcp.js';

const brief = (r: RpcResponse) => `HTTP ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`;

/** -32602 for a task that does not exist (any more): HTTP 200, "not found"/"expired", no Task. */
function assertNotFound(r: RpcResponse, what: string) {
  assert.equal(r.body.error?.code, -32602, `${what}: ${brief(r)}`);
  assert.match(r.body.error!.message, /not found|expired/i, `${what}: message says not found / expired`);
  assert.equal(r.status, 200, `${what}: -32602 is HTTP 200 (D10)`);
  assert.ok(!('result' in r.body), `${what}: never a Task object: ${brief(r)}`);
}

/** -32602 for a malformed id (any message), HTTP 200, no Task. */
function assertInvalidParams(r: RpcResponse, what: string) {
  assert.equal(r.body.error?.code, -32602, `${what}: ${brief(r)}`);
  assert.equal(r.status, 200, `${what}: -32602 is HTTP 200 (D10)`);
  assert.ok(!('result' in r.body), `${what}: never a Task object: ${brief(r)}`);
}

/** -32020 HeaderMismatch, HTTP 400 (transport H-15), no Task. */
function assertHeaderMismatch(r: RpcResponse, what: string) {
  assert.equal(r.status, 400, `${what}: ${brief(r)}`);
  assert.equal(r.body.error?.code, -32020, `${what}: ${brief(r)}`);
  assert.ok(!('result' in r.body), `${what}: never a Task object`);
}

/** Commands that read by scanning, and commands that write. */
const SCANS = ['keys', 'scan', 'hscan', 'sscan', 'zscan'];
const WRITES = [
  'set',
  'setex',
  'psetex',
  'setnx',
  'del',
  'unlink',
  'expire',
  'pexpire',
  'pexpireat',
  'expireat',
  'persist',
  'hset',
  'hsetnx',
  'hmset',
  'hdel',
  'hincrby',
  'incr',
  'incrby',
  'zadd',
  'zrem',
  'sadd',
  'srem',
  'lpush',
  'rpush',
  'lrem',
  'xadd',
  'xtrim',
  'eval',
  'evalsha',
  'fcall',
  'restore',
  'copy',
  'rename',
];

/** `calls` per command from INFO commandstats, for the given command names. */
async function commandCalls(redis: Redis, names: string[]): Promise<Record<string, number>> {
  const info = await redis.info('commandstats');
  const out: Record<string, number> = {};
  for (const n of names) out[n] = Number(new RegExp(`^cmdstat_${n}:calls=(\\d+)`, 'm').exec(info)?.[1] ?? 0);
  return out;
}

describe('Case B-03 unknown, expired and malformed task ids give -32602, never a Task; lookups create nothing (T-24, T-33, T-37, T-42)', () => {
  let redis: ThrowawayRedis;
  let c: Cluster;
  let admin: Redis;
  /** Fixtures whose 2 s TTL has passed: what tasks/get said before, and their ids. */
  const expired: { id: string; tool: string; beforeTtl: Record<string, any> }[] = [];
  let dbsizeBefore = -1;
  let keysBefore: string[] = [];
  /** Each key's PTTL (ms; -1 without expiry) when `keysBefore` was taken, at `snapshotAt`. */
  let pttlBefore = new Map<string, number>();
  let snapshotAt = 0;
  let statsBefore: Record<string, number> = {};
  /** Every id (or id-like value) sent in a lookup, to look for in key names afterwards. */
  const looked: string[] = [];

  before(async () => {
    redis = await startRedis();
    // Processes are added after `c` exists, so `after` stops whatever started even if one fails.
    c = await startCluster({ redisUrl: redis.url, gateways: 0, workers: 0, env: { TASK_TTL_MS: '2000' } });
    admin = new Redis(redis.url, { maxRetriesPerRequest: 1 });
    // DBSIZE must be this cluster's alone: make sure the server on that port is ours.
    assert.equal(
      Number(/process_id:(\d+)/.exec(await admin.info('server'))?.[1]),
      redis.proc.pid,
      'our own throwaway redis-server',
    );
    await Promise.all([c.addGateway(), c.addGateway(), c.addWorker()]);
    const [g1] = c.urls;
    const next = roundRobin(c.urls);
    const t0 = Date.now();
    // One task that completes, one left waiting for input; both must be readable before the TTL.
    for (const [tool, args, status] of [
      ['slow_echo', { seconds: 0, text: 'soon gone' }, 'completed'],
      ['ask_confirm', {}, 'input_required'],
    ] as const) {
      const made = await callTool(g1!, tool, args);
      assert.equal(made.body.result?.resultType, 'task', brief(made));
      const id = made.body.result!.taskId as string;
      const seen = await pollTask(next, id, (t) => t.status === status, 1500, 50);
      expired.push({ id, tool, beforeTtl: seen });
    }
    // Stop the worker, then wait past the TTL (5 s, as the case says) and until Redis is quiet:
    // the worker's volatile BullMQ keys (stalled-check, locks) expire within 2 s too.
    await Promise.all(c.workers.map((w) => w.kill()));
    await sleep(Math.max(0, 5000 - (Date.now() - t0)));
    // A request counted in Redis on each gateway, so the principal's request counter (for this
    // minute) exists before the lookups: creations and polls above wrote none (limits.ts).
    for (const url of c.urls) assert.equal((await rpc(url, 'tools/list', {})).status, 200);
    let last = -1;
    await waitFor(
      async () => {
        const n = await admin.dbsize();
        const stable = n === last;
        last = n;
        return stable;
      },
      10_000,
      1000,
      'a quiet Redis',
    );
    keysBefore = (await c.keys()).sort();
    const ttls = await Promise.all(keysBefore.map((k) => admin.pttl(k)));
    pttlBefore = new Map(keysBefore.map((k, i) => [k, ttls[i]!]));
    snapshotAt = Date.now();
    dbsizeBefore = await admin.dbsize();
    statsBefore = await commandCalls(admin, [...SCANS, ...WRITES, 'zcount']);
  });
  after(async () => {
    admin?.disconnect();
    await c?.stop();
    await redis?.stop();
  });

  it('Case B-03 §13/T-21: tasks/get with a random UUIDv4 → -32602 "not found" on every gateway, never a Task, answered fast', async () => {
    const times: number[] = [];
    for (let i = 0; i < 20; i++) {
      const id = randomUUID();
      looked.push(id);
      const t0 = Date.now();
      const r = await getTask(c.urls[i % c.urls.length]!, id);
      times.push(Date.now() - t0);
      assertNotFound(r, `tasks/get ${id}`);
    }
    // Bounded latency: one key read, no scan (commandstats are checked in the last test).
    assert.ok(Math.max(...times) < 1000, `slowest lookup ${Math.max(...times)} ms`);
  });

  it('Case B-03 T-24: tasks/get of a task whose ttlMs (2 s) has passed → -32602 "not found"/"expired"; tasks/update and tasks/cancel too', async () => {
    assert.equal(expired.length, 2, 'both fixtures were created');
    for (const { id, tool, beforeTtl } of expired) {
      // It existed: before its TTL, tasks/get answered the Task.
      assert.equal(beforeTtl.taskId, id);
      assert.equal(beforeTtl.ttlMs, 2000, `${tool}: test profile TTL`);
      looked.push(id);
      for (const url of c.urls) assertNotFound(await getTask(url, id), `tasks/get of expired ${tool} task`);
      assertNotFound(
        await updateTask(c.urls[0]!, id, { 'confirm.1': { action: 'accept', content: { confirm: true } } }),
        `tasks/update of expired ${tool} task`,
      );
      assertNotFound(await cancelTask(c.urls[1]!, id), `tasks/cancel of expired ${tool} task`);
    }
  });

  it('Case B-03 §13/T-33/T-37: malformed ids — "", the number 42, no taskId at all → -32602, never a Task', async () => {
    const [g1, g2] = c.urls;
    // "" (Mcp-Name: "" matches the body, so the request reaches the handler).
    assertNotFound(await getTask(g1!, ''), 'taskId ""');
    // 42: a number. Mcp-Name names only string values (the SDK compares only a string
    // params.taskId), so the request is served with or without the header.
    assertInvalidParams(await rpc(g2!, 'tasks/get', { taskId: 42 }), 'taskId 42 with Mcp-Name: 42');
    assertInvalidParams(
      await rpc(g1!, 'tasks/get', { taskId: 42 }, { headers: { 'mcp-name': null } }),
      'taskId 42 without Mcp-Name',
    );
    // No taskId at all (and so no Mcp-Name).
    assertInvalidParams(await rpc(g2!, 'tasks/get', {}), 'no taskId');
    // The same malformed ids on tasks/update and tasks/cancel.
    assertNotFound(await cancelTask(g1!, ''), 'tasks/cancel taskId ""');
    assertInvalidParams(await rpc(g2!, 'tasks/cancel', { taskId: 42 }), 'tasks/cancel taskId 42');
    assertInvalidParams(await rpc(g1!, 'tasks/update', { inputResponses: {} }), 'tasks/update without taskId');
  });

  it('Case B-03 T-42: a 100 KB id in the body and in Mcp-Name → 431 from Node, and the gateway stays up', async () => {
    const big = 'x'.repeat(100 * 1024);
    looked.push(big.slice(0, 64));
    for (const [i, url] of c.urls.entries()) {
      const r = await getTask(url, big);
      assert.equal(r.status, 431, `oversized Mcp-Name: ${brief(r)}`);
      assert.ok(!('result' in r.body), 'never a Task object');
      // The process is alive and serving.
      const g = c.gateways[i]!;
      assert.equal(g.proc.exitCode, null, 'gateway process still running');
      assert.equal(g.proc.signalCode, null, 'gateway process still running');
      assert.equal((await fetch(url.replace(/\/mcp$/, '/healthz'))).status, 200, '/healthz after the 431');
      assertNotFound(await getTask(url, randomUUID()), 'a normal lookup after the 431');
    }
  });

  it('Case B-03 T-42/H-15: a 100 KB id only in the body — -32020 when Mcp-Name is absent or differs, 431 for a Base64 header; an 8 KB id that fits a header → -32602', async () => {
    const [g1, g2] = c.urls;
    const big = 'y'.repeat(100 * 1024);
    // The Streamable HTTP binding (T-42, transport H-15) requires Mcp-Name to equal
    // params.taskId, and the SDK checks it before any handler runs. Node refuses request
    // headers over 16 KB (431), so no header can carry a matching 100 KB value: every request
    // whose body has this id and that reaches the server is a header mismatch, and -32020
    // (HTTP 400) is the only answer the spec allows. It is still an error and never a Task.
    assertHeaderMismatch(await getTask(g1!, big, { headers: { 'mcp-name': null } }), 'Mcp-Name absent');
    assertHeaderMismatch(await getTask(g2!, big, { headers: { 'mcp-name': 'y' } }), 'Mcp-Name differs');
    const sentinel = `=?base64?${Buffer.from(big).toString('base64')}?=`;
    const b64 = await getTask(g1!, big, { headers: { 'mcp-name': sentinel } });
    assert.equal(b64.status, 431, `Base64-sentinel Mcp-Name (~133 KB): ${brief(b64)}`);
    assert.equal((await fetch(g1!.replace(/\/mcp$/, '/healthz'))).status, 200, '/healthz after the 431');
    // A long id the header can carry reaches the handler: malformed ids give -32602.
    const long = 'z'.repeat(8 * 1024);
    looked.push(long.slice(0, 64));
    assertNotFound(await getTask(g2!, long), '8 KB id in body and Mcp-Name');
    assertNotFound(await cancelTask(g1!, long), 'tasks/cancel with an 8 KB id');
  });

  it('Case B-03 T-33, T-37: tasks/update and tasks/cancel with a random UUID → -32602 "not found"', async () => {
    for (const url of c.urls) {
      const a = randomUUID();
      const b = randomUUID();
      looked.push(a, b);
      assertNotFound(
        await updateTask(url, a, { 'confirm.1': { action: 'accept', content: { confirm: true } } }),
        `tasks/update ${a}`,
      );
      assertNotFound(await cancelTask(url, b), `tasks/cancel ${b}`);
    }
  });

  it('Case B-03 T-21: the lookups created no key (DBSIZE and the key set unchanged), wrote nothing but the per-principal request counter (not for polls), and scanned nothing', async () => {
    assert.ok(dbsizeBefore > 0 && looked.length > 20, 'the lookups above ran against a populated Redis');
    assert.ok(
      statsBefore.evalsha! > 0 && statsBefore.scan! > 0,
      `commandstats are read (creating the fixtures ran scripts): ${JSON.stringify(statsBefore)}`,
    );
    // commandstats first: c.keys() below scans.
    const stats = await commandCalls(admin, [...SCANS, ...WRITES, 'zcount']);
    const changed = Object.fromEntries(
      Object.entries(stats)
        .filter(([k, v]) => v !== statsBefore[k])
        .map(([k, v]) => [k, v - statsBefore[k]!]),
    );
    // Every tasks/update and tasks/cancel counts against its principal's rate in Redis
    // (limits.ts): one script call doing one INCR of an existing counter per request; a poll
    // (tasks/get) is counted in the gateway and costs no Redis write. Nothing else may write, and
    // nothing may scan.
    // (A counter window that ends during the test is re-created: one PEXPIRE per window.) The
    // gateways also count live workers every 2 s (presence.ts: a read-only script, one ZCOUNT).
    const { evalsha = 0, incr = 0, pexpire = 0, zcount = 0, ...other } = changed;
    assert.deepEqual(other, {}, 'no scan and no write command ran during the lookups (but the rate counter)');
    assert.ok(pexpire <= 2, `rate windows started during the lookups: ${pexpire}`);
    assert.equal(
      evalsha,
      incr + zcount,
      `each script call is one rate-counter INCR or one live-worker count: ${JSON.stringify(changed)}`,
    );
    // The tasks/update and tasks/cancel requests above: 4 (T-24) + 3 (malformed) + 1 (8 KB) + 4 (random UUIDs).
    assert.equal(incr, 12, `one rate-counter INCR per tasks/update or tasks/cancel, none per tasks/get: ${incr}`);
    const keys = (await c.keys()).sort();
    assert.deepEqual(
      keys.filter((k) => !keysBefore.includes(k)),
      [],
      'no key was created by the lookups',
    );
    // A key may only be gone by its own expiry (a fixture's TTL ending during the lookups on a
    // slow machine), never deleted by a lookup: it had a TTL, and that TTL has run out by now.
    const elapsedMs = Date.now() - snapshotAt;
    const gone = keysBefore.filter((k) => !keys.includes(k));
    assert.deepEqual(
      gone.filter((k) => !((pttlBefore.get(k) ?? -1) > 0 && pttlBefore.get(k)! <= elapsedMs)),
      [],
      `keys gone without their TTL having run out (${elapsedMs} ms since the snapshot)`,
    );
    assert.equal(await admin.dbsize(), dbsizeBefore - gone.length, 'DBSIZE unchanged but for expired keys');
    const named = keys.filter((k) => looked.some((id) => k.includes(id) && !expired.some((e) => e.id === id)));
    assert.deepEqual(named, [], 'no key names a looked-up id');
  });
});
