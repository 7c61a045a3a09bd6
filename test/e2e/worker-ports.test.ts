// @needs redis
/**
 * Several workers on one machine, real processes (the compiled `apps/worker/dist/main.js` that
 * `npm run worker` starts) on real Redis:
 *  - with WORKER_HTTP_PORT unset and its default (9464) taken, a worker serves `/metrics`,
 *    `/healthz` and `/readyz` on a free port and logs it (`worker.http_port_taken`, and the URL in
 *    `worker.ready`): two workers started with the default settings both run and both count;
 *  - with WORKER_HTTP_PORT set to a port that is taken, the worker exits 1 with one line, and
 *    it never counts as alive (no heartbeat written: the gateway's `mcp_workers_alive`, which
 *    counts in Redis at each scrape, stays 0) and never takes a job (the queued step stays
 *    waiting, not active under a lock nobody renews).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:net';
import { DEFAULT_WORKER_HTTP_PORT } from '@mcp-tasks/config';
import { appEntry, freePort, ROOT, sleep, startCluster, waitFor, type Cluster } from '../support/cluster.js';
import { callTool } from '../support/mcp.js';
import { scrape } from '../support/prom.js';

/** Listens on 127.0.0.1:`port`; resolves undefined when something else already holds it. */
function hold(port: number): Promise<Server | undefined> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', (e: NodeJS.ErrnoException) => (e.code === 'EADDRINUSE' ? resolve(undefined) : reject(e)));
    s.listen(port, '127.0.0.1', () => resolve(s));
  });
}

/** Runs a worker to its exit: exit code, stderr, stdout. */
function runWorker(env: Record<string, string>): Promise<{ code: number | null; stderr: string; stdout: string }> {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, [appEntry('worker')], {
      cwd: ROOT,
      env: { ...process.env, NODE_ENV: 'test', LOG_LEVEL: 'info', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    p.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    p.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    p.on('close', (code) => resolve({ code, stderr: stderr.trim(), stdout }));
  });
}

describe('workers on one machine: the operations port', () => {
  let c: Cluster;
  let metricsUrl: string;
  const held: Server[] = [];
  before(async () => {
    // The default heartbeat (5 s, alive for 15 s): a heartbeat written by a worker that then
    // exits would count for 15 s, far longer than these assertions take.
    c = await startCluster({ gateways: 1, workers: 0, env: { WORKER_HEARTBEAT_MS: '5000' } });
    metricsUrl = c.urls[0]!.replace(/\/mcp$/, '/metrics');
  });
  after(async () => {
    for (const s of held) s.close();
    await c?.stop();
  });

  it('WORKER_HTTP_PORT unset and 9464 taken: two workers with the default settings both run, each on a free port it logs', async () => {
    // Take the default port (or find it taken already: either way a worker cannot have it).
    const mine = await hold(DEFAULT_WORKER_HTTP_PORT);
    if (mine) held.push(mine);
    // An empty value is "unset" for the configuration (the test helper's own default is 0).
    const [a, b] = await Promise.all([c.addWorker({ WORKER_HTTP_PORT: '' }), c.addWorker({ WORKER_HTTP_PORT: '' })]);
    const ports = [a, b].map((w) => Number(new URL(w.opsUrl!).port));
    assert.notEqual(ports[0], ports[1], 'two ports');
    for (const [i, w] of [a, b].entries()) {
      const taken = w.logs.find((l) => l.msg?.toString().startsWith('worker.http_port_taken'));
      if (ports[i] === DEFAULT_WORKER_HTTP_PORT) continue; // the holder let go meanwhile: it got the default
      assert.ok(taken, `worker ${i + 1} logs that the default port was taken`);
      assert.equal(taken.wanted, DEFAULT_WORKER_HTTP_PORT);
      assert.equal(taken.port, ports[i]);
      assert.equal(taken.level, 40, 'a warning');
      assert.equal((await fetch(`${w.opsUrl}/healthz`)).status, 200);
      const ready = await fetch(`${w.opsUrl}/readyz`);
      assert.equal(ready.status, 200, await ready.text());
      assert.ok((await scrape(`${w.opsUrl}/metrics`)).text.includes('mcp_worker_concurrency'));
    }
    assert.ok(
      ports.some((p) => p !== DEFAULT_WORKER_HTTP_PORT),
      'at least one worker found the default port taken',
    );
    assert.equal((await scrape(metricsUrl)).value('mcp_workers_alive'), 2, 'both count as alive');
    await Promise.all([a.stop(), b.stop()]);
    c.workers.length = 0;
    assert.equal(await c.redis.zcard(`${c.prefix}:workers`), 0, 'stopped workers leave at once');
  });

  it('WORKER_HTTP_PORT set and taken: exit 1 with one line; never counted alive, no job taken', async () => {
    // A step waiting for a worker.
    const created = await callTool(c.urls[0]!, 'countdown', { seconds: 1 });
    assert.equal(created.body.result?.status, 'working', JSON.stringify(created.body));
    // Scrape results are reused for 1 s: wait for the one that sees the step.
    await waitFor(
      async () => (await scrape(metricsUrl)).value('mcp_queue_jobs', { state: 'waiting' }) === 1,
      10_000,
      100,
      'the gateway sees the waiting step',
    );
    assert.equal((await scrape(metricsUrl)).value('mcp_workers_alive'), 0);

    const port = await freePort();
    const blocker = await hold(port);
    assert.ok(blocker, `port ${port} held by the test`);
    held.push(blocker);
    const scrapedAt = Date.now();
    const r = await runWorker({ ...c.env, WORKER_HTTP_PORT: String(port) });
    assert.equal(r.code, 1, r.stderr);
    const lines = r.stderr.split('\n').filter(Boolean);
    assert.equal(lines.length, 1, r.stderr);
    assert.match(
      lines[0]!,
      new RegExp(
        `^worker: cannot listen on 127\\.0\\.0\\.1:${port} \\(WORKER_HTTP_PORT; off disables it\\): .*EADDRINUSE`,
      ),
    );
    assert.doesNotMatch(r.stdout, /worker\.ready/);

    // Counted in Redis at scrape time (a result is reused for 1 s: wait that out), so a heartbeat
    // written before the exit would show here for 15 s.
    await sleep(Math.max(0, scrapedAt + 1100 - Date.now()));
    const afterExit = await scrape(metricsUrl);
    assert.equal(afterExit.value('mcp_workers_alive'), 0, 'the worker that failed to start never counted');
    assert.equal(await c.redis.zcard(`${c.prefix}:workers`), 0, 'no heartbeat entry');
    assert.equal(afterExit.value('mcp_queue_jobs', { state: 'active' }), 0, 'it took no job');
    assert.equal(afterExit.value('mcp_queue_jobs', { state: 'waiting' }), 1, 'the step still waits');
  });
});
