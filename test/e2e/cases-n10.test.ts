// @needs redis redis-server
/**
 * Case N-10 (issue 9 §7): the service unchanged against a Redis Cluster. A local 3-master
 * cluster (`redis-server --cluster-enabled yes` on three random ports, `redis-cli --cluster
 * create`), two gateways and two workers started with REDIS_CLUSTER_NODES, and the whole
 * lifecycle through them: create + poll, input_required answered on the other gateway, cancel,
 * a synchronous call with progress, subscriptions/listen, the reconciler, expiry, readiness.
 * Every multi-key script and BullMQ queue must keep its keys in one slot (no CROSSSLOT in any
 * log), task keys must spread over the masters, and pub/sub must reach every process. A second
 * run on the same cluster sets TOOL_QUEUE_SHARDS=3: each task's jobs on its FNV-1a shard, the
 * shards in different slots, queue depth and the queue view covering every shard.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Cluster as RedisCluster } from 'ioredis';
import { startCluster, waitFor, sleep, type Cluster, type Proc } from '../support/cluster.js';
import { startRedisCluster, type RedisClusterHandle } from '../support/redis-cluster.js';
import { callTool, cancelTask, getTask, pollTask, rpc, updateTask } from '../support/mcp.js';
import { toolShard, toolsPrefix } from '@mcp-tasks/jobs';
import { sseCall, type SseCall } from '../support/sse.js';

let rc: RedisClusterHandle;
const t0 = Date.now();
before(async () => {
  rc = await startRedisCluster(3);
});
after(async () => {
  await rc?.stop();
  console.log(`# N-10: file (cluster + both service runs) ${Date.now() - t0} ms`);
});

describe('case N-10: Redis Cluster, 3 masters, 2 gateways + 2 workers', () => {
  let c: Cluster;
  /** Gateways 1 and 2 (default settings) and 3 (TASK_TTL_MS=2000, for the expiry check). */
  let g1: string, g2: string, g3: string;
  let admin: RedisCluster;
  const open: SseCall[] = [];
  before(async () => {
    // REDIS_URL= (empty) is "unset": the topology comes from REDIS_CLUSTER_NODES alone.
    c = await startCluster({
      redisUrl: `redis://127.0.0.1:${rc.ports[0]}`,
      gateways: 0,
      workers: 0,
      env: { REDIS_URL: '', REDIS_CLUSTER_NODES: rc.nodes },
    });
    const [a, b, short] = await Promise.all([
      c.addGateway(),
      c.addGateway(),
      c.addGateway({ TASK_TTL_MS: '2000' }),
      c.addWorker(),
      c.addWorker(),
    ]);
    [g1, g2, g3] = [a.url!, b.url!, short.url!];
    admin = new RedisCluster(
      rc.nodes.split(',').map((n) => ({ host: '127.0.0.1', port: Number(n.split(':')[1]) })),
      { redisOptions: { maxRetriesPerRequest: 1 } },
    );
    await admin.ping();
  });
  after(async () => {
    for (const s of open) s.close();
    admin?.disconnect();
    await c?.stop();
  });

  it('start-up: every process names the cluster topology, without a password', () => {
    for (const p of [...c.gateways, ...c.workers]) {
      const ready = p.logs.find((l) => l.msg === `${p.kind}.ready`)!;
      assert.equal(ready.redis, `cluster ${rc.nodes}`, JSON.stringify(ready));
    }
  });

  it('create on gateway 1, poll on gateway 2 until completed; task keys spread over the masters', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) {
      const r = await callTool(g1, 'slow_echo', { seconds: 0, text: `n10-${i}` });
      assert.equal(r.body.result?.resultType, 'task', JSON.stringify(r.body));
      ids.push(r.body.result!.taskId as string);
    }
    for (const [i, id] of ids.entries()) {
      const done = await pollTask(
        () => g2,
        id,
        (t) => t.status !== 'working',
        15_000,
        50,
      );
      assert.equal(done.status, 'completed', JSON.stringify(done));
      assert.equal(done.result.content[0].text, `echo: n10-${i}`);
    }
    // The per-task hash tags put the records on more than one master (one slot is not the ceiling).
    const owners = new Set<number>();
    for (const id of ids) {
      for (const [i, n] of admin.nodes('master').entries())
        if ((await n.exists(`${c.prefix}:{t:${id}}:task`).catch(() => 0)) === 1) owners.add(i); // MOVED elsewhere
    }
    assert.ok(owners.size >= 2, `6 task records on ${owners.size} master(s)`);
  });

  it('input_required on a worker, answered with tasks/update on the other gateway, resumes to completed', async () => {
    const made = await callTool(g1, 'ask_confirm', {});
    const id = made.body.result!.taskId as string;
    const parked = await pollTask(
      () => g1,
      id,
      (t) => t.status === 'input_required',
      15_000,
      50,
    );
    const key = Object.keys(parked.inputRequests)[0]!;
    const upd = await updateTask(g2, id, { [key]: { action: 'accept', content: { confirm: true } } });
    assert.equal(upd.body.result?.resultType, 'complete', JSON.stringify(upd.body));
    const done = await pollTask(
      () => g1,
      id,
      (t) => t.status !== 'working' && t.status !== 'input_required',
      15_000,
      50,
    );
    assert.equal(done.status, 'completed', JSON.stringify(done));
  });

  it('tasks/cancel on gateway 2 stops the job running on a worker (cancel fan-out by pub/sub)', async () => {
    const made = await callTool(g1, 'countdown', { seconds: 10 });
    const id = made.body.result!.taskId as string;
    await pollTask(
      () => g1,
      id,
      (t) => /1\/10/.test(t.statusMessage ?? ''),
      10_000,
      50,
    );
    const t1 = Date.now();
    assert.equal((await cancelTask(g2, id)).body.result?.resultType, 'complete');
    const end = await pollTask(
      () => g1,
      id,
      (t) => t.status !== 'working',
      3000,
      20,
    );
    assert.equal(end.status, 'cancelled');
    const ms = Date.now() - t1;
    assert.ok(ms < 2000, `cancelled within 2 s (${ms} ms)`);
    const msg = end.statusMessage;
    await sleep(1500);
    assert.equal(
      (await getTask(g2, id)).body.result!.statusMessage,
      msg,
      'no progress after the cancel: the worker stopped',
    );
  });

  it('a synchronous call with a progressToken relays every progress event from the worker (pub/sub + stream on one slot)', async () => {
    const s = sseCall(
      g2,
      'tools/call',
      { name: 'progress_sync', arguments: { steps: 3, intervalSeconds: 0.3 } },
      { tasks: false, meta: { progressToken: 'n10' } },
    );
    open.push(s);
    const d = await s.done;
    assert.equal(d.how, 'end');
    assert.equal(
      s.final()?.result?.content?.[0]?.text,
      'progress_sync: 3 steps done',
      JSON.stringify(s.frames.slice(-3)),
    );
    assert.deepEqual(
      s.progress().map((e) => e.progress),
      [1, 2, 3],
    );
    assert.ok(s.progress().every((e) => e.progressToken === 'n10'));
  });

  it('subscriptions/listen on gateway 1 hears the status changes a worker and gateway 2 make', async () => {
    const made = await callTool(g2, 'ask_confirm', {});
    const id = made.body.result!.taskId as string;
    const s = sseCall(g1, 'subscriptions/listen', { notifications: { taskIds: [id] } }, { id: 'n10-listen' });
    open.push(s);
    const has = (status: string) => (f: { message?: Record<string, any> }) =>
      f.message?.method === 'notifications/tasks' &&
      f.message.params?.taskId === id &&
      f.message.params?.status === status;
    const parked = await s.waitFrame(has('input_required'), 15_000);
    const key = Object.keys(parked.message!.params.inputRequests)[0]!;
    await updateTask(g2, id, { [key]: { action: 'accept', content: { confirm: true } } });
    const done = await s.waitFrame(has('completed'), 15_000);
    assert.equal(done.message!.params.taskId, id);
    s.close();
  });

  it('the reconciler: its repeatable job runs on the cluster and drops finished tasks from its index', async () => {
    const made = await callTool(g1, 'slow_echo', { seconds: 0, text: 'reconciled' });
    const id = made.body.result!.taskId as string;
    await pollTask(
      () => g1,
      id,
      (t) => t.status === 'completed',
      15_000,
      50,
    );
    const index = `${c.prefix}:tasks:reconcile`;
    assert.notEqual(await admin.zscore(index, id), null, 'a new task is in the reconciler index');
    // RECONCILE_AFTER_MS = 3 s, RECONCILE_INTERVAL_MS = 1 s (testEnv): a finished task leaves the index.
    await waitFor(
      async () => (await admin.zscore(index, id)) === null,
      15_000,
      200,
      'the reconciler to drop the finished task',
    );
    const runs = await admin.zcard(`${c.prefix}:{jobs}:maintenance:completed`);
    assert.ok(runs > 0, `maintenance runs completed: ${runs}`);
  });

  it('expiry: a task past its ttlMs (TASK_TTL_MS=2000 on gateway 3) answers -32602 on every gateway', async () => {
    const made = await callTool(g3, 'slow_echo', { seconds: 0, text: 'short-lived' });
    assert.equal(made.body.result?.ttlMs, 2000);
    const id = made.body.result!.taskId as string;
    await pollTask(
      () => g3,
      id,
      (t) => t.status === 'completed',
      5000,
      50,
    );
    await sleep(2300);
    for (const url of c.urls) {
      const r = await getTask(url, id);
      assert.equal(r.body.error?.code, -32602, JSON.stringify(r.body));
    }
  });

  it('Idempotency-Key: the key and the outstanding slot in one script on the principal slot; two gateways at once give one task; after the task expires the key names nothing', async () => {
    const key = `"n10-${Date.now()}"`;
    const o = { headers: { 'idempotency-key': key } };
    const [a, b] = await Promise.all([
      callTool(g1, 'slow_echo', { seconds: 0, text: 'idem' }, o),
      callTool(g2, 'slow_echo', { seconds: 0, text: 'idem' }, o),
    ]);
    assert.equal(a.body.result?.resultType, 'task', JSON.stringify(a.body));
    assert.equal(b.body.result?.taskId, a.body.result?.taskId, JSON.stringify(b.body));
    const other = await callTool(g2, 'slow_echo', { seconds: 0, text: 'other' }, o);
    assert.equal(other.status, 422, JSON.stringify(other.body));
    // TASK_TTL_MS=2000 on gateway 3: its keyed task and its key expire together; then the key is free.
    const k3 = { headers: { 'idempotency-key': `"n10-short-${Date.now()}"` } };
    const s1 = await callTool(g3, 'slow_echo', { seconds: 0, text: 'short' }, k3);
    const first = s1.body.result!.taskId as string;
    assert.equal((await callTool(g3, 'slow_echo', { seconds: 0, text: 'short' }, k3)).body.result?.taskId, first);
    await waitFor(
      async () => (await getTask(g1, first)).body.error?.code === -32602,
      10_000,
      100,
      'the task to expire',
    );
    const s2 = await callTool(g3, 'slow_echo', { seconds: 0, text: 'short' }, k3);
    assert.equal(s2.body.result?.resultType, 'task', JSON.stringify(s2.body));
    assert.notEqual(s2.body.result?.taskId, first, 'an expired key names nothing: a new task');
  });

  it('readiness: /readyz 200 on every gateway and worker (every master answers, noeviction on each)', async () => {
    for (const g of c.gateways) {
      const r = await fetch(g.url!.replace(/\/mcp$/, '/readyz'));
      assert.equal(r.status, 200, await r.text());
    }
    for (const w of c.workers) {
      const r = await fetch(`${w.opsUrl}/readyz`);
      assert.equal(r.status, 200, await r.text());
    }
  });

  it('server/discover and tools/list answer through the cluster too', async () => {
    const r = await rpc(g1, 'tools/list', {});
    assert.ok(
      Array.isArray(r.body.result?.tools) && r.body.result.tools.length > 0,
      JSON.stringify(r.body).slice(0, 200),
    );
  });

  it('no process logged CROSSSLOT, MOVED or an unhandled Redis error', () => {
    const procs: Proc[] = [...c.gateways, ...c.workers];
    for (const p of procs) {
      const bad = p.logs.filter((l) => /CROSSSLOT|MOVED|ASK |Unhandled error|ReplyError/i.test(JSON.stringify(l)));
      assert.deepEqual(bad, [], `${p.kind} ${p.proc.pid}`);
    }
  });
});

describe('case N-10 with TOOL_QUEUE_SHARDS=3: the tools queue split over three hash tags', () => {
  const SHARDS = 3;
  const ADMIN_KEY = 'ops-admin-key-0123456789abcdef';
  let adminUrl: string;
  let c: Cluster;
  let admin: RedisCluster;
  let g1: string, g2: string;
  before(async () => {
    c = await startCluster({
      redisUrl: `redis://127.0.0.1:${rc.ports[0]}`,
      gateways: 0,
      workers: 0,
      env: { REDIS_URL: '', REDIS_CLUSTER_NODES: rc.nodes, TOOL_QUEUE_SHARDS: String(SHARDS) },
    });
    // Gateway 2 also serves the queue view (every shard listed).
    const [a, b] = await Promise.all([
      c.addGateway(),
      c.addGateway({ ADMIN_API_KEYS: `ops:${ADMIN_KEY}`, ADMIN_PORT: '0' }),
      c.addWorker(),
      c.addWorker(),
    ]);
    [g1, g2] = [a.url!, b.url!];
    adminUrl = (await b.waitLog((l) => l.msg === 'admin.ready')).url as string;
    admin = new RedisCluster(
      rc.ports.map((port) => ({ host: '127.0.0.1', port })),
      { redisOptions: { maxRetriesPerRequest: 1 } },
    );
  });
  after(async () => {
    admin?.disconnect();
    await c?.stop();
  });

  it("each task's job lands on shard FNV-1a(taskId) mod 3, every shard is consumed, and the shards sit in different slots", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 12; i++)
      ids.push(
        (await callTool(i % 2 ? g2 : g1, 'slow_echo', { seconds: 0, text: `s${i}` })).body.result!.taskId as string,
      );
    for (const id of ids)
      assert.equal(
        (
          await pollTask(
            () => g1,
            id,
            (t) => t.status !== 'working',
            15_000,
            50,
          )
        ).status,
        'completed',
      );
    const used = new Set<number>();
    for (const id of ids) {
      const shard = toolShard(id, SHARDS);
      used.add(shard);
      for (let i = 0; i < SHARDS; i++) {
        const exists = await admin.exists(`${toolsPrefix(c.prefix, i)}:tools:t.${id}.1`);
        assert.equal(exists, i === shard ? 1 : 0, `task ${id}: job on shard ${shard} only (looked at ${i})`);
      }
    }
    assert.ok(used.size >= 2, `12 tasks used ${used.size} shard(s)`);
    const slots = await Promise.all(
      [0, 1, 2].map((i) => admin.call('CLUSTER', 'KEYSLOT', `${toolsPrefix(c.prefix, i)}:tools:wait`)),
    );
    assert.equal(new Set(slots).size, SHARDS, `slots ${slots.join(', ')}`);
  });

  it("input_required (input-timeout job on the task's shard) answered on the other gateway, and cancel, work on every shard", async () => {
    const asks: string[] = [];
    // Enough tasks that more than one shard is involved.
    for (let i = 0; i < 4; i++) asks.push((await callTool(g1, 'ask_confirm', {})).body.result!.taskId as string);
    for (const id of asks) {
      const parked = await pollTask(
        () => g1,
        id,
        (t) => t.status === 'input_required',
        15_000,
        50,
      );
      // The worker parks the task, then schedules its input timeout: wait for that job to exist
      // (on whichever shard), then it must be on the task's shard and on no other.
      const onShards = await waitFor(
        async () => {
          const found: number[] = [];
          for (let i = 0; i < SHARDS; i++)
            if (await admin.exists(`${toolsPrefix(c.prefix, i)}:tools:t.${id}.1.timeout`)) found.push(i);
          return found.length ? found : undefined;
        },
        10_000,
        20,
        `the input-timeout job of ${id}`,
      );
      assert.deepEqual(onShards, [toolShard(id, SHARDS)], "the input timeout is on the task's shard, and only there");
      const key = Object.keys(parked.inputRequests)[0]!;
      await updateTask(g2, id, { [key]: { action: 'accept', content: { confirm: true } } });
    }
    for (const id of asks)
      assert.equal(
        (
          await pollTask(
            () => g2,
            id,
            (t) => t.status !== 'working' && t.status !== 'input_required',
            15_000,
            50,
          )
        ).status,
        'completed',
      );
    const made = await callTool(g2, 'countdown', { seconds: 10 });
    const id = made.body.result!.taskId as string;
    await pollTask(
      () => g1,
      id,
      (t) => /1\/10/.test(t.statusMessage ?? ''),
      10_000,
      50,
    );
    await cancelTask(g1, id);
    assert.equal(
      (
        await pollTask(
          () => g2,
          id,
          (t) => t.status !== 'working',
          3000,
          20,
        )
      ).status,
      'cancelled',
    );
  });

  it('queue depth (/metrics) and the queue view cover every shard', async () => {
    // A countdown running on a shard other than 0 (the ids are the server's: start until one is):
    // the gauge must sum the shards, the view must list that shard's job.
    const started: string[] = [];
    let id = '';
    while (!id) {
      const t = (await callTool(g1, 'countdown', { seconds: 10 })).body.result!.taskId as string;
      started.push(t);
      if (toolShard(t, SHARDS) !== 0) id = t;
    }
    for (const other of started.filter((t) => t !== id)) await cancelTask(g1, other);
    await pollTask(
      () => g1,
      id,
      (t) => /1\/10/.test(t.statusMessage ?? ''),
      10_000,
      50,
    );
    const metrics = await (await fetch(g1.replace(/\/mcp$/, '/metrics'))).text();
    assert.match(
      metrics,
      /^mcp_queue_jobs\{state="active"\} [1-9]/m,
      metrics
        .split('\n')
        .filter((l) => l.startsWith('mcp_queue'))
        .join('\n'),
    );
    const shard = toolShard(id, SHARDS);
    const name = `shard-${shard}.tools`;
    const r = await fetch(`${adminUrl}/api/queues?activeQueue=${name}&status=active&page=1&jobsPerPage=50`, {
      headers: { authorization: `Bearer ${ADMIN_KEY}` },
    });
    assert.equal(r.status, 200);
    const { queues } = (await r.json()) as { queues: { name: string; jobs: { id: string }[] }[] };
    assert.deepEqual(queues.map((q) => q.name).sort(), [
      'maintenance',
      'shard-1.tools',
      'shard-2.tools',
      'tools',
      'webhooks',
    ]);
    assert.ok(
      queues.find((q) => q.name === name)!.jobs.some((j) => j.id === `t.${id}.1`),
      `the running job is listed under ${name}`,
    );
    await cancelTask(g1, id);
  });

  it('readiness 200, no CROSSSLOT or MOVED in any log', async () => {
    for (const g of c.gateways) assert.equal((await fetch(g.url!.replace(/\/mcp$/, '/readyz'))).status, 200);
    for (const w of c.workers) assert.equal((await fetch(`${w.opsUrl}/readyz`)).status, 200);
    for (const p of [...c.gateways, ...c.workers]) {
      assert.deepEqual(
        p.logs.filter((l) => /CROSSSLOT|MOVED|ASK |Unhandled error|ReplyError/i.test(JSON.stringify(l))),
        [],
        `${p.kind} ${p.proc.pid}`,
      );
    }
  });
});
