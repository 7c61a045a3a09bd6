// @needs redis
/**
 * Workers are visible (issue 9 §5), real processes. With no worker running: the gateway is
 * ready but says `workers: 0` and `degraded`, `mcp_workers_alive` is 0, and a task created then
 * says "Waiting for a worker: none is running" (handle and tasks/get). A worker started later
 * runs it; its own `/healthz` and `/readyz` answer; the heartbeat key expires on its own. A
 * worker stopped with SIGTERM stops counting at once; one killed with SIGKILL once its
 * heartbeat lapses (3 × WORKER_HEARTBEAT_MS).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startCluster, waitFor, type Cluster } from '../support/cluster.js';
import { callTool, getTask, pollTask, roundRobin } from '../support/mcp.js';
import { scrape } from '../support/prom.js';

const NO_WORKER = 'Waiting for a worker: none is running';

describe('workers are visible: heartbeats, readiness, statusMessage', () => {
  let c: Cluster;
  const readyz = async (url: string) => {
    const r = await fetch(url.replace(/\/mcp$/, '/readyz'));
    return { status: r.status, body: (await r.json()) as Record<string, unknown> };
  };
  before(async () => {
    c = await startCluster({ gateways: 2, workers: 0, env: { WORKER_HEARTBEAT_MS: '500' } });
  });
  after(async () => c?.stop());

  it('no worker: ready but degraded, mcp_workers_alive 0, a new task says it waits for a worker; a worker started later runs it', async () => {
    const r = await readyz(c.urls[0]!);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.workers, 0);
    assert.match(String(r.body.degraded), /no worker/);
    assert.equal((await scrape(c.urls[1]!.replace(/\/mcp$/, '/metrics'))).value('mcp_workers_alive'), 0);
    assert.ok(c.gateways[0]!.logs.some((l) => l.msg === 'gateway.ready' && l.workers === 0));

    const next = roundRobin(c.urls);
    const created = await callTool(next(), 'countdown', { seconds: 1 });
    const handle = created.body.result!;
    assert.equal(handle.status, 'working');
    assert.equal(handle.statusMessage, NO_WORKER);
    const polled = await getTask(next(), handle.taskId);
    assert.equal(polled.body.result!.statusMessage, NO_WORKER);
    // Nothing was written: the record keeps no such message (only the answer is decorated).
    assert.equal(await c.redis.hget(`${c.prefix}:{t:${handle.taskId}}:task`, 'statusMessage'), null);

    const w = await c.addWorker();
    assert.ok(w.opsUrl);
    assert.equal((await fetch(`${w.opsUrl}/healthz`)).status, 200);
    const wr = await fetch(`${w.opsUrl}/readyz`);
    assert.equal(wr.status, 200, await wr.text());
    const done = await pollTask(next, handle.taskId, (t) => t.status === 'completed', 20_000);
    assert.notEqual(done.statusMessage, NO_WORKER);
    await waitFor(async () => (await readyz(c.urls[0]!)).body.workers === 1, 5000, 100, 'readyz workers 1');
    assert.equal((await scrape(c.urls[0]!.replace(/\/mcp$/, '/metrics'))).value('mcp_workers_alive'), 1);
    assert.ok(!('degraded' in (await readyz(c.urls[1]!)).body));
    // The heartbeat key expires on its own (case B-15): at most 3 heartbeats ahead.
    const pttl = await c.redis.pttl(`${c.prefix}:workers`);
    assert.ok(pttl > 0 && pttl <= 1500, `PTTL ${pttl}`);
  });

  it('SIGTERM: the worker stops counting at once; SIGKILL: once its heartbeat lapses', async () => {
    const a = c.workers[0]!;
    const b = await c.addWorker();
    await waitFor(async () => (await readyz(c.urls[0]!)).body.workers === 2, 5000, 100, 'two workers');
    await a.stop('SIGTERM');
    // Removed at once; the gateway re-counts every 2 s.
    await waitFor(async () => (await readyz(c.urls[0]!)).body.workers === 1, 3000, 100, 'one worker after SIGTERM');
    const t0 = Date.now();
    await b.kill();
    await waitFor(async () => (await readyz(c.urls[1]!)).body.workers === 0, 6000, 100, 'no worker after SIGKILL');
    const took = Date.now() - t0;
    assert.ok(took <= 3 * 500 + 2500, `counted out after ${took} ms`);
    // And a task created now says so again, on every gateway once it re-counted (every 2 s).
    const created = await callTool(c.urls[0]!, 'countdown', { seconds: 1 });
    for (const url of c.urls) {
      await waitFor(
        async () => (await getTask(url, created.body.result!.taskId)).body.result!.statusMessage === NO_WORKER,
        3000,
        100,
        `${url}: the notice`,
      );
    }
  });
});
