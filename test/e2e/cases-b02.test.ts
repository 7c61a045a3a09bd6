// @needs redis redis-server
/**
 * Case B-02 (shared/cases/cases.md): durable creation before returning the task handle.
 *
 * Spec: T-15 (no CreateTaskResult until a tasks/get on any replica would succeed), T-33 / T-21
 * (tasks/get of a known id answers the task, an unknown one -32602), T-45 (ids are minted,
 * never derived from the arguments). Design: D4 (record, then job, then handle; on failure an
 * error without taskId and nothing left behind), D5 (one BullMQ job per step, id
 * `t.<taskId>.<step>`), D10 (-32603 with HTTP 200, or 503 + Retry-After while Redis is away).
 *
 * Topology for (a, b, d, e): one key prefix on the shared Redis; G1, G2 talk to Redis
 * directly, G3, G4 through a TCP proxy that delays every chunk by 200 ms in each direction;
 * two workers (direct). (c) runs on a throwaway redis-server with one gateway behind a proxy
 * the test can cut, and no worker (so a leaked job would stay visible in `wait`).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { KEEP_COMPLETED_JOBS } from '@mcp-tasks/jobs';
import {
  freePort,
  SHARED_REDIS_URL,
  sleep,
  startCluster,
  startRedis,
  waitFor,
  type Cluster,
  type Proc,
  type ThrowawayRedis,
} from '../support/cluster.js';
import { callTool, getTask, pollTask, roundRobin, type RpcResponse } from '../support/mcp.js';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.js';

const UUID_RE = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/i;
/** The BullMQ job id of step `step` of a task (design D5). */
const jobId = (taskId: string, step = 1) => `t.${taskId}.${step}`;

/** Runs `fn(0..n-1)` with at most `inFlight` calls pending at once. */
async function pool(n: number, inFlight: number, fn: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(n, inFlight) }, async () => {
      while (next < n) await fn(next++);
    }),
  );
}

/** One line describing a response, for assertion messages. */
const brief = (r: RpcResponse) => `HTTP ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`;

/** A bullmq Queue handle on the `tools` queue of a cluster (read-only use: getJob, counts). */
function toolsQueue(c: Cluster): Queue {
  const u = new URL(c.redisUrl);
  // Connection options (not an ioredis instance), so queue.close() also closes the connection.
  return new Queue('tools', {
    connection: { host: u.hostname, port: Number(u.port || 6379), maxRetriesPerRequest: null },
    prefix: `${c.prefix}:{jobs}`,
  });
}

/** Fails unless `admin` talks to the throwaway redis-server this test started (not a stranger on a reused port). */
async function assertOwnRedis(admin: Redis, r: ThrowawayRedis) {
  const pid = Number(/process_id:(\d+)/.exec(await admin.info('server'))?.[1]);
  assert.equal(pid, r.proc.pid, 'the throwaway redis-server answering is the one this test started');
}

const ALL_JOB_STATES = [
  'active',
  'completed',
  'delayed',
  'failed',
  'prioritized',
  'waiting',
  'waiting-children',
] as const;

describe('Case B-02 durable creation before the task handle (T-15, D4, D5)', () => {
  let c: Cluster;
  let proxy: TcpProxy;
  let queue: Queue;
  /** G1, G2 direct; G3, G4 behind the 200 ms proxy. */
  let g: Proc[] = [];
  /** Every taskId any gateway returned in (a), (b), (e): checked against BullMQ in (d). */
  const returned = new Set<string>();

  before(async () => {
    const target = new URL(SHARED_REDIS_URL);
    proxy = await startTcpProxy({ targetHost: target.hostname, targetPort: Number(target.port || 6379), delayMs: 200 });
    // Workers: 2 × 200 slots, so 1,000 one-second jobs drain in a few seconds. Processes are
    // added after `c` exists, so `after` stops whatever started even if one start fails.
    c = await startCluster({ gateways: 0, workers: 0, env: { WORKER_CONCURRENCY: '200' } });
    const slowEnv = { REDIS_URL: proxy.url };
    g = await Promise.all([c.addGateway(), c.addGateway(), c.addGateway(slowEnv), c.addGateway(slowEnv)]);
    await Promise.all([c.addWorker(), c.addWorker()]);
    queue = toolsQueue(c);
  });
  after(async () => {
    await queue?.close().catch(() => undefined);
    await c?.stop();
    await proxy?.close();
  });

  /**
   * Creates on `create`, reads at once on `read` (another gateway, hence another HTTP
   * connection: fetch pools connections per origin), `n` times with `inFlight` concurrent.
   */
  async function createThenGet(create: string, read: string, n: number, inFlight: number, tag: string) {
    const failures: string[] = [];
    const getMs: number[] = [];
    let notFound = 0;
    await pool(n, inFlight, async (i) => {
      const made = await callTool(create, 'slow_echo', { seconds: 1, text: `${tag}-${i}` });
      const taskId = made.body.result?.taskId as string | undefined;
      if (made.status !== 200 || made.body.result?.resultType !== 'task' || typeof taskId !== 'string') {
        failures.push(`#${i} tools/call: ${brief(made)}`);
        return;
      }
      returned.add(taskId);
      const t0 = Date.now();
      const got = await getTask(read, taskId);
      getMs.push(Date.now() - t0);
      if (got.body.error?.code === -32602) notFound++;
      if (got.status !== 200 || got.body.result?.taskId !== taskId || got.body.result?.resultType !== 'complete') {
        failures.push(`#${i} tasks/get ${taskId}: ${brief(got)}`);
      }
    });
    return { failures, notFound, getMs };
  }

  it('Case B-02(a) T-15: 1,000 × tools/call slow_echo(1) on G1 then tasks/get on G2 never gives -32602', async () => {
    const [g1, g2] = g.map((p) => p.url!);
    const before = returned.size;
    const { failures, notFound } = await createThenGet(g1!, g2!, 1000, 20, 'a');
    assert.equal(
      notFound,
      0,
      `tasks/get answered -32602 for ${notFound} ids a gateway had just returned; first: ${failures.slice(0, 3).join(' | ')}`,
    );
    assert.deepEqual(failures.slice(0, 5), [], `${failures.length} of 1000 iterations failed`);
    assert.equal(returned.size - before, 1000, 'every call returned a distinct taskId');
  });

  it('Case B-02(b) T-15: with 200 ms added each way between gateways and Redis, tasks/get on G4 right after tools/call on G3 never gives -32602', async () => {
    const [g3, g4] = g.slice(2).map((p) => p.url!);
    const { failures, notFound, getMs } = await createThenGet(g3!, g4!, 30, 5, 'b');
    assert.equal(
      notFound,
      0,
      `tasks/get answered -32602 for ${notFound} returned ids; first: ${failures.slice(0, 3).join(' | ')}`,
    );
    assert.deepEqual(failures.slice(0, 5), [], `${failures.length} of 30 iterations failed`);
    // The proxy really was in the path: a tasks/get is at least one Redis round trip (2 × 200 ms).
    assert.ok(Math.min(...getMs) >= 380, `tasks/get through the proxy took only ${Math.min(...getMs)} ms`);
  });

  it('Case B-02(e) two concurrent identical tools/call with different JSON-RPC ids give two tasks, two jobs, two results (T-45)', async () => {
    const [g1, g2] = g.map((p) => p.url!);
    const args = { seconds: 1, text: 'same arguments' };
    // Same gateway, and across gateways.
    for (const [u1, u2] of [
      [g1!, g1!],
      [g1!, g2!],
    ] as const) {
      const [r1, r2] = await Promise.all([
        callTool(u1, 'slow_echo', args, { id: 'e-1' }),
        callTool(u2, 'slow_echo', args, { id: 'e-2' }),
      ]);
      assert.equal(r1.body.result?.resultType, 'task', brief(r1));
      assert.equal(r2.body.result?.resultType, 'task', brief(r2));
      assert.equal(r1.body.id, 'e-1');
      assert.equal(r2.body.id, 'e-2');
      const ids = [r1.body.result!.taskId as string, r2.body.result!.taskId as string];
      assert.notEqual(ids[0], ids[1], 'identical arguments must not collapse two calls into one task');
      ids.forEach((id) => returned.add(id));
      const jobs = await Promise.all(ids.map((id) => queue.getJob(jobId(id))));
      assert.ok(jobs[0] && jobs[1], `a job per task: ${jobs.map((j) => j?.id ?? 'missing').join(', ')}`);
      assert.notEqual(jobs[0]!.id, jobs[1]!.id);
      // Both run: each completes with its own echo.
      const next = roundRobin([g1!, g2!]);
      for (const id of ids) {
        const done = await pollTask(next, id, (t) => t.status !== 'working', 20_000, 100);
        assert.equal(done.status, 'completed', JSON.stringify(done));
        assert.equal(done.result.content[0].text, 'echo: same arguments');
      }
    }
  });

  it('Case B-02(d) D5: every returned taskId has exactly one BullMQ job, t.<taskId>.1, and no other job exists', async () => {
    assert.ok(returned.size >= 1030, `expected the ids of (a), (b), (e); have ${returned.size}`);
    const ids = [...returned];
    // BullMQ keeps the last KEEP_COMPLETED_JOBS completed jobs (case B-15): an older completed
    // job is gone from the queue. Its existence is then read from the workers' logs: the job
    // t.<taskId>.1 started exactly once, and the task record says completed.
    const started = new Map<string, number>();
    for (const w of c.workers) {
      for (const l of w.logs)
        if (l.msg === 'step.started') started.set(String(l.jobId), (started.get(String(l.jobId)) ?? 0) + 1);
    }
    const problems: string[] = [];
    let retired = 0;
    await pool(ids.length, 50, async (i) => {
      const id = ids[i]!;
      const [job, second] = await Promise.all([queue.getJob(jobId(id, 1)), queue.getJob(jobId(id, 2))]);
      if (second || started.has(jobId(id, 2))) problems.push(`${id}: unexpected second job ${jobId(id, 2)}`);
      if (job) {
        if (job.data?.taskId !== id || job.data?.step !== 1)
          problems.push(`${id}: job data ${JSON.stringify(job.data)}`);
        return;
      }
      retired++;
      const status = await c.redis.hget(`${c.prefix}:{t:${id}}:task`, 'status');
      if (started.get(jobId(id)) !== 1 || status !== 'completed')
        problems.push(
          `${id}: no job ${jobId(id)} in the queue, started ${started.get(jobId(id)) ?? 0} times, task ${status}`,
        );
    });
    assert.deepEqual(problems.slice(0, 5), [], `${problems.length} tasks without exactly one job`);
    // Exactly one each: the queue holds as many jobs as tasks were returned, in any state, less
    // the completed ones BullMQ's retention dropped (only beyond the count it keeps).
    const counts = await queue.getJobCounts(...ALL_JOB_STATES);
    const total = Object.values(counts).reduce((a, b) => a + b, 0);
    assert.equal(total + retired, ids.length, `jobs in the tools queue: ${JSON.stringify(counts)}, ${retired} retired`);
    assert.ok(
      retired === 0 || counts.completed! >= KEEP_COMPLETED_JOBS,
      `${retired} jobs retired while only ${counts.completed} completed ones are kept`,
    );
    const expected = new Set(ids.map((id) => jobId(id)));
    assert.deepEqual(
      [...started.keys()].filter((j) => !expected.has(j)),
      [],
      'every job the workers started belongs to a returned task',
    );
    // And no task record exists without a returned id (nothing created behind the client's back).
    const taskKeys = (await c.keys()).filter((k) => k.endsWith(':task'));
    const unknown = taskKeys.map((k) => UUID_RE.exec(k)?.[0]).filter((id) => !id || !returned.has(id));
    assert.deepEqual(unknown, [], 'task records whose id no client was given');
  });
});

describe('Case B-02(c) Redis refuses writes while tools/call is handled: -32603, no taskId, nothing left behind (T-15, D4, D10)', () => {
  let redis: ThrowawayRedis;
  let proxy: TcpProxy;
  let c: Cluster;
  let g: Proc;
  let admin: Redis;
  let queue: Queue;

  before(async () => {
    redis = await startRedis();
    proxy = await startTcpProxy({ targetPort: redis.port });
    c = await startCluster({ redisUrl: redis.url, gateways: 0, workers: 0 });
    g = await c.addGateway({ REDIS_URL: proxy.url });
    admin = new Redis(redis.url, { maxRetriesPerRequest: 1 });
    await assertOwnRedis(admin, redis);
    queue = toolsQueue(c);
    // Warm up: one normal creation, so the task and BullMQ scripts are cached in Redis as in
    // any running deployment.
    const warm = await callTool(g.url!, 'slow_echo', { seconds: 1 });
    assert.equal(warm.body.result?.resultType, 'task', brief(warm));
  });
  after(async () => {
    admin?.disconnect();
    await queue?.close().catch(() => undefined);
    await c?.stop();
    await proxy?.close();
    await redis?.stop();
  });

  /** Task records and step jobs under the prefix, plus the queued jobs (wait list + prioritized: step jobs carry a priority). */
  async function snapshot() {
    const keys = await c.keys();
    return {
      tasks: keys.filter((k) => k.includes(':{t:') && k.endsWith(':task')).sort(),
      jobs: keys.filter((k) => k.includes(':{jobs}:tools:t.')).sort(),
      waiting:
        (await admin.llen(`${c.prefix}:{jobs}:tools:wait`)) +
        (await admin.zcard(`${c.prefix}:{jobs}:tools:prioritized`)),
    };
  }

  /** The error reply of a failed creation: -32603, 200 or 503 (+Retry-After), no taskId anywhere. */
  function assertCreationRefused(r: RpcResponse) {
    assert.equal(r.body.error?.code, -32603, brief(r));
    assert.ok(r.status === 200 || r.status === 503, `HTTP status per the error table: ${brief(r)}`);
    if (r.status === 503) assert.ok(r.headers.get('retry-after'), '503 carries Retry-After');
    assert.ok(!('result' in r.body), 'no result');
    assert.doesNotMatch(JSON.stringify(r.body), UUID_RE, 'no taskId in the response');
    for (const m of r.messages) assert.doesNotMatch(JSON.stringify(m), UUID_RE, 'no taskId in any SSE message');
  }

  /** After Redis is back: ready again, late writes had time to land, and nothing new exists. */
  async function assertNothingLeftBehind(before: Awaited<ReturnType<typeof snapshot>>) {
    await waitFor(
      async () => (await fetch(g.url!.replace(/\/mcp$/, '/readyz'))).status === 200,
      15_000,
      100,
      'gateway ready again',
    );
    await sleep(1500); // a command resent on reconnect would land now
    const now = await snapshot();
    const records = await Promise.all(
      now.tasks
        .filter((k) => !before.tasks.includes(k))
        .map(async (k) => `${k} (status ${await admin.hget(k, 'status')}, pttl ${await admin.pttl(k)} ms)`),
    );
    const leftovers = {
      records,
      jobs: now.jobs.filter((k) => !before.jobs.includes(k)),
      waiting: now.waiting - before.waiting,
    };
    assert.deepEqual(
      leftovers,
      { records: [], jobs: [], waiting: 0 },
      'nothing left behind: no task record, no BullMQ job (D4)',
    );
    // Sanity: the service works again, so the absence above means something.
    const ok = await callTool(g.url!, 'slow_echo', { seconds: 1 });
    assert.equal(ok.body.result?.resultType, 'task', `after recovery: ${brief(ok)}`);
  }

  it('Case B-02(c) T-15/D4: Redis is a read-only replica (READONLY on every write): -32603, no task record, no job', async () => {
    const before = await snapshot();
    // Replica of a port nobody listens on: never syncs (keeps its data), refuses every write.
    await admin.call('REPLICAOF', '127.0.0.1', String(await freePort()));
    try {
      const r = await callTool(g.url!, 'slow_echo', { seconds: 1 });
      assertCreationRefused(r);
    } finally {
      await admin.call('REPLICAOF', 'NO', 'ONE');
    }
    await assertNothingLeftBehind(before);
  });

  it('Case B-02(c) T-15/D4/D10: Redis unreachable (every connection cut and refused): 503 + Retry-After with -32603, no task record, no job', async () => {
    const before = await snapshot();
    proxy.pause();
    try {
      await waitFor(
        async () => (await fetch(g.url!.replace(/\/mcp$/, '/readyz'))).status === 503,
        10_000,
        50,
        'gateway sees Redis gone',
      );
      const r = await callTool(g.url!, 'slow_echo', { seconds: 1 });
      assertCreationRefused(r);
      assert.equal(r.status, 503, 'Redis unreachable → 503 (D10)');
    } finally {
      proxy.resume();
    }
    await assertNothingLeftBehind(before);
  });

  it('Case B-02(c) T-15/D4: connection cut while the task record is being written: -32603, and no record appears after Redis is back', async () => {
    const before = await snapshot();
    // Cut (and keep refusing) as soon as the gateway sends a command naming a task key.
    proxy.setTap((chunk, dir) => (dir === 'up' && chunk.includes(`${c.prefix}:{t:`) ? 'cut' : undefined));
    try {
      const r = await callTool(g.url!, 'slow_echo', { seconds: 1 });
      assert.ok(proxy.paused, 'the proxy saw the task write and cut Redis away');
      assertCreationRefused(r);
    } finally {
      proxy.setTap(undefined);
      proxy.resume();
    }
    await assertNothingLeftBehind(before);
  });

  it('Case B-02(c) T-15/D4: with an Idempotency-Key, connection cut while the task record is being written: -32603, the key is freed once Redis is back, and a retry with the key creates the task', async () => {
    const before = await snapshot();
    const key = `"${randomUUID()}"`;
    const idemKeys = async () => (await c.keys()).filter((k) => k.includes(':idem:'));
    const keysBefore = await idemKeys();
    const removed = () => g.logs.filter((l) => l.msg === 'task.abandoned_removed').length;
    const removedBefore = removed();
    proxy.setTap((chunk, dir) => (dir === 'up' && chunk.includes(`${c.prefix}:{t:`) ? 'cut' : undefined));
    try {
      const r = await callTool(g.url!, 'slow_echo', { seconds: 1 }, { headers: { 'idempotency-key': key } });
      assert.ok(proxy.paused, 'the proxy saw the task write and cut Redis away');
      assertCreationRefused(r);
    } finally {
      proxy.setTap(undefined);
      proxy.resume();
    }
    await assertNothingLeftBehind(before);
    // The claim made before the cut is released by the clean-up once Redis answers again.
    await waitFor(() => removed() > removedBefore, 15_000, 100, 'the abandoned creation to be cleaned up');
    assert.deepEqual(await idemKeys(), keysBefore, 'no key names the task that was never created');
    const retry = await callTool(g.url!, 'slow_echo', { seconds: 1 }, { headers: { 'idempotency-key': key } });
    assert.equal(retry.body.result?.resultType, 'task', `the key does not block a retry: ${brief(retry)}`);
    const again = await callTool(g.url!, 'slow_echo', { seconds: 1 }, { headers: { 'idempotency-key': key } });
    assert.equal(again.body.result?.taskId, retry.body.result?.taskId, 'and names the new task');
  });

  it('Case B-02(c) T-15/D4: connection cut while the job is being enqueued (record already written): -32603, and neither record nor job remains after Redis is back', async () => {
    const before = await snapshot();
    proxy.setTap((chunk, dir) => (dir === 'up' && chunk.includes(`${c.prefix}:{jobs}:tools`) ? 'cut' : undefined));
    try {
      const r = await callTool(g.url!, 'slow_echo', { seconds: 1 });
      assert.ok(proxy.paused, 'the proxy saw the enqueue and cut Redis away');
      assertCreationRefused(r);
    } finally {
      proxy.setTap(undefined);
      proxy.resume();
    }
    await assertNothingLeftBehind(before);
  });
});
