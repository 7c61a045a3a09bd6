// @needs redis redis-server
/**
 * Issue 9 §7: the service through Sentinel (REDIS_SENTINELS, REDIS_SENTINEL_NAME). One master,
 * two replicas and three Sentinels (quorum 2) on random ports (test/support/redis-cluster.ts); a
 * gateway and a worker find the master through the Sentinels. A task completes; then `SENTINEL FAILOVER`
 * promotes the replica, and both processes must follow the new master: a task created after it
 * completes, and polls fail (503 / -32603) for a few seconds at most. The failover time and the window of
 * failing polls are measured and printed. The gateway runs with REDIS_WAIT_REPLICAS=2 (every
 * replica), as docs/deploying.md advises for Sentinel: a handle is returned only once every replica
 * holds the task, so no handle returned around the failover may later be "not found" (without
 * it, a write the old master accepted between the promotion and its demotion was lost; with 1
 * of 2, a replica still following the old master acknowledged one: both seen in CI). The price:
 * creations are refused (503) until the old master has rejoined as a replica.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startCluster, sleep, waitFor, type Cluster } from '../support/cluster.js';
import { startSentinelSetup, type SentinelHandle } from '../support/redis-cluster.js';
import { callTool, getTask, pollTask } from '../support/mcp.js';

describe('Sentinel: the service follows a failover', () => {
  let s: SentinelHandle;
  let c: Cluster;
  before(async () => {
    // Two replicas, and REDIS_WAIT_REPLICAS=2 (every replica), as docs/deploying.md advises: with 1, the
    // replica the Sentinels had not yet re-pointed still followed the old master and acknowledged
    // a creation there, which was then lost (CI, twice at once).
    s = await startSentinelSetup(3, 'mcp-test', 2);
    c = await startCluster({
      redisUrl: `redis://127.0.0.1:${s.masterPort}`,
      gateways: 1,
      workers: 1,
      env: { REDIS_URL: '', REDIS_SENTINELS: s.sentinels, REDIS_SENTINEL_NAME: s.name, REDIS_WAIT_REPLICAS: '2' },
    });
  });
  after(async () => {
    await c?.stop();
    await s?.stop();
  });

  it('start-up names the Sentinel topology; a task completes on the master', async () => {
    for (const p of [...c.gateways, ...c.workers])
      assert.equal(p.logs.find((l) => l.msg === `${p.kind}.ready`)!.redis, `sentinel ${s.name} via ${s.sentinels}`);
    const made = await callTool(c.urls[0]!, 'slow_echo', { seconds: 0, text: 'before' });
    const done = await pollTask(
      () => c.urls[0]!,
      made.body.result!.taskId,
      (t) => t.status !== 'working',
      15_000,
      50,
    );
    assert.equal(done.status, 'completed', JSON.stringify(done));
  });

  it('SENTINEL FAILOVER: gateway and worker follow the new master; polls fail for under 10 s; no handle is lost; a new task completes', async () => {
    const g = c.urls[0]!;
    const made = await callTool(g, 'slow_echo', { seconds: 0, text: 'probe' });
    const probeId = made.body.result!.taskId as string;
    await pollTask(
      () => g,
      probeId,
      (t) => t.status === 'completed',
      15_000,
      50,
    );
    // Poll without pause through the failover; record every answer that is not the task.
    const failures: { at: number; what: string }[] = [];
    let polling = true;
    const poller = (async () => {
      while (polling) {
        const at = Date.now();
        try {
          const r = await getTask(g, probeId);
          if (r.status !== 200 || r.body.result?.status !== 'completed')
            failures.push({ at, what: `HTTP ${r.status} ${r.body.error?.code ?? r.body.result?.status}` });
        } catch (e) {
          failures.push({ at, what: (e as Error).message });
        }
        await sleep(20);
      }
    })();
    // The poller stops however this ends (a failed assertion left it polling a stopped gateway
    // forever, and the test file never exited).
    const stopPoller = async () => {
      polling = false;
      await poller;
    };
    let failoverMs: number, recoveredMs: number;
    try {
      const before = await s.currentMasterPort();
      failoverMs = await s.failover();
      const after = await s.currentMasterPort();
      assert.notEqual(after, before, 'the Sentinel names another master');
      assert.ok(
        s.replicaPorts.includes(after),
        `the new master ${after} is one of the replicas ${s.replicaPorts.join(', ')}`,
      );
      // A task created after the failover completes: the gateway writes and the worker run on the
      // new master. A handle that is returned must stay valid (REDIS_WAIT_REPLICAS=2). Until the
      // old master has rejoined as a replica (the Sentinels re-point it when they next see it,
      // up to ~10 s; 14.5 s was measured at load) creations get 503: retried as a client does.
      const t1 = Date.now();
      let refused = 0;
      const next = await waitFor(
        async () => {
          const r = await callTool(g, 'slow_echo', { seconds: 0, text: 'after' });
          if (r.body.error) {
            assert.equal(r.body.error.code, -32603, JSON.stringify(r.body));
            refused++;
          }
          return r.body.result?.taskId as string | undefined;
          // Once a second, nearer a client that honours Retry-After (5 s) than a tight loop: each
          // refused creation holds the gateway's request connection for its WAIT, and back-to-back
          // ones kept the health check waiting (polls got 503 for up to 7.5 s at 100 ms).
        },
        40_000,
        1000,
        'a tools/call accepted after the failover',
      );
      // Polled as a client that honours 503 + Retry-After does: right after the switch one
      // connection of the gateway may still be reconnecting to the new master (-32603 "Task store
      // unavailable"); how long polls fail is what the poller above measures and bounds.
      const done = await waitFor(
        async () => {
          const r = await getTask(g, next);
          if (r.body.error?.code === -32603) return undefined;
          if (r.body.error) throw new Error(`tasks/get failed: ${JSON.stringify(r.body.error)}`);
          return r.body.result?.status !== 'working' ? r.body.result : undefined;
        },
        15_000,
        50,
        'the task created after the failover to finish',
      );
      assert.equal(done.status, 'completed', JSON.stringify(done));
      recoveredMs = Date.now() - t1;
      console.log(`# sentinel: ${refused} creations refused (503) before one was accepted after the failover`);
      await sleep(500);
    } finally {
      await stopPoller();
    }
    const windowMs = failures.length ? failures[failures.length - 1]!.at - failures[0]!.at : 0;
    console.log(
      `# sentinel: failover ${failoverMs} ms (SENTINEL FAILOVER → new master named); polls failing for ${windowMs} ms (${failures.length} answers: ${[...new Set(failures.map((f) => f.what))].join(', ')}); new task created and completed ${recoveredMs} ms after`,
    );
    assert.ok(windowMs < 10_000, `polls failed for ${windowMs} ms`);
    for (const f of failures)
      assert.match(f.what, /HTTP 503|-32603/, 'a failing poll is a 503 or -32603, never a wrong answer');
    // The worker's readiness is back (it talks to the new master).
    await waitFor(
      async () => (await fetch(`${c.workers[0]!.opsUrl}/readyz`)).status === 200,
      10_000,
      100,
      'worker ready again',
    );
    await waitFor(
      async () => (await fetch(g.replace(/\/mcp$/, '/readyz'))).status === 200,
      10_000,
      100,
      'gateway ready again',
    );
  });
});
