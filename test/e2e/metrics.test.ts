// @needs redis
/**
 * Metrics (issue 9 §3), real processes: two gateways and one worker running one step at a time
 * (WORKER_CONCURRENCY=1, so a backlog is easy to make). After a real flow — a synchronous call
 * streamed as SSE, a task parked in input_required, a backlog of countdowns, an answer, a
 * cancel, an unknown task id — the gateways' and the worker's `/metrics` show the counters
 * moved and the gauges reading the queue from Redis (waiting, active, parked, oldest waiting
 * age, workers alive). No label carries a principal or a task id.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startCluster, waitFor, type Cluster } from '../support/cluster.js';
import { callTool, cancelTask, getTask, pollTask, roundRobin, updateTask, isTerminal } from '../support/mcp.js';
import { scrape } from '../support/prom.js';

describe('metrics: /metrics on gateways and on the worker port', () => {
  let c: Cluster;
  let gw: string[];
  let worker: string;
  before(async () => {
    c = await startCluster({
      gateways: 2,
      workers: 1,
      env: { WORKER_CONCURRENCY: '1', WORKER_HEARTBEAT_MS: '500', DEMO_RESEARCH_PHASE_MS: '200' },
    });
    gw = c.urls.map((u) => u.replace(/\/mcp$/, '/metrics'));
    assert.ok(c.workers[0]!.opsUrl, 'the worker logs its operations URL');
    worker = `${c.workers[0]!.opsUrl}/metrics`;
  });
  after(async () => c?.stop());

  it('serves the Prometheus text format without credentials, with the workers alive', async () => {
    for (const url of [...gw, worker]) {
      const s = await scrape(url);
      assert.equal(s.status, 200);
      assert.match(s.contentType, /^text\/plain; version=0\.0\.4/);
      assert.equal(s.value('mcp_workers_alive'), 1, url);
      assert.ok(s.value('process_cpu_seconds_total') !== undefined, 'default process metrics');
      assert.ok(s.text.includes('# TYPE mcp_redis_errors_total counter'));
    }
    assert.equal((await scrape(worker)).value('mcp_worker_concurrency'), 1);
    const health = await fetch(`${c.workers[0]!.opsUrl}/healthz`);
    assert.equal(health.status, 200);
    const ready = await fetch(`${c.workers[0]!.opsUrl}/readyz`);
    assert.equal(ready.status, 200, await ready.text());
  });

  it('counts an SSE stream while a synchronous call is held, then the request by method and outcome', async () => {
    const call = callTool(c.urls[0]!, 'countdown', { seconds: 2 }, { tasks: false });
    await waitFor(
      async () => (await scrape(gw[0]!)).value('mcp_sse_streams_open', { method: 'tools/call' }) === 1,
      5000,
      50,
      'the SSE gauge at 1',
    );
    const r = await call;
    assert.equal(r.contentType.startsWith('text/event-stream'), true);
    assert.ok(r.body.result, JSON.stringify(r.body));
    await waitFor(
      async () => (await scrape(gw[0]!)).value('mcp_sse_streams_open', { method: 'tools/call' }) === 0,
      5000,
      50,
      'the SSE gauge back at 0',
    );
    const s = await scrape(gw[0]!);
    assert.equal(s.value('mcp_requests_total', { method: 'tools/call', status: '200', outcome: 'ok' }), 1);
    assert.equal(s.value('mcp_tasks_created_total', { tool: 'countdown', mode: 'sync' }), 1);
    assert.ok(
      s.value('mcp_request_duration_seconds_sum', { method: 'tools/call' })! >= 1.5,
      'the stream lasted about 2 s',
    );
  });

  it('shows the queue: waiting, active, parked in input_required, oldest waiting age; then the finished tasks', async () => {
    const next = roundRobin(c.urls);
    // A task parks in input_required (holds no worker).
    const research = (await callTool(next(), 'deep_research', { topic: 'metrics' })).body.result!.taskId as string;
    const parked = await pollTask(next, research, (t) => t.status === 'input_required', 15_000);
    // A backlog: the one worker slot runs one countdown, the others wait.
    const ids: string[] = [];
    for (let i = 0; i < 3; i++)
      ids.push((await callTool(next(), 'countdown', { seconds: 2 })).body.result!.taskId as string);
    await new Promise((r) => setTimeout(r, 1100)); // make the oldest waiting job at least 1 s old
    for (const url of [gw[0]!, gw[1]!, worker]) {
      const s = await scrape(url);
      assert.equal(s.value('mcp_queue_jobs', { state: 'active' }), 1, `${url}: one step running\n${s.text}`);
      assert.ok(s.value('mcp_queue_jobs', { state: 'waiting' })! >= 1, `${url}: steps waiting`);
      assert.equal(s.value('mcp_tasks_input_required'), 1, `${url}: the parked task`);
      assert.ok(s.value('mcp_queue_oldest_waiting_seconds')! >= 1, `${url}: oldest waiting age`);
    }
    // Cancel one waiting countdown (ended by the gateway), answer the question, let the rest finish.
    await cancelTask(next(), ids[2]!);
    const key = Object.keys(parked.inputRequests)[0]!;
    await updateTask(next(), research, { [key]: { action: 'accept', content: { audience: 'team' } } });
    for (const id of [research, ...ids]) await pollTask(next, id, (t) => isTerminal(t.status), 30_000);
    const unknown = await getTask(next(), '00000000-0000-4000-8000-000000000000');
    assert.equal(unknown.body.error?.code, -32602);

    const [g0, g1, w] = await Promise.all([scrape(gw[0]!), scrape(gw[1]!), scrape(worker)]);
    const both = (name: string, labels: Record<string, string>) => g0.sum(name, labels) + g1.sum(name, labels);
    assert.equal(both('mcp_tasks_created_total', { tool: 'countdown', mode: 'task' }), 3);
    assert.equal(both('mcp_tasks_created_total', { tool: 'deep_research', mode: 'task' }), 1);
    assert.ok(both('mcp_requests_total', { method: 'tasks/get', outcome: 'ok' }) >= 4);
    assert.equal(
      both('mcp_requests_total', { method: 'tasks/get', status: '200', outcome: '-32602' }),
      1,
      'an unknown task id is counted by its JSON-RPC code',
    );
    assert.equal(both('mcp_requests_total', { method: 'tasks/update', outcome: 'ok' }), 1);
    // Finished, counted where the transition was written: the worker, and the gateway for the cancel.
    assert.equal(w.sum('mcp_tasks_finished_total', { tool: 'countdown', status: 'completed' }), 3, w.text); // 2 tasks + the sync call
    assert.equal(w.sum('mcp_tasks_finished_total', { tool: 'deep_research', status: 'completed' }), 1);
    assert.equal(both('mcp_tasks_finished_total', { tool: 'countdown', status: 'cancelled' }), 1);
    assert.equal(w.sum('mcp_task_duration_seconds_count', { tool: 'countdown', status: 'completed' }), 3);
    assert.equal(w.value('mcp_steps_total', { tool: 'deep_research', outcome: 'input_required' }), 1);
    assert.equal(w.value('mcp_steps_total', { tool: 'deep_research', outcome: 'completed' }), 1);
    assert.ok(w.value('mcp_step_duration_seconds_sum', { tool: 'countdown', outcome: 'completed' })! >= 4);
    // The queue is empty again, the parked task gone (its input timeout removed with the answer).
    await waitFor(
      async () => {
        const s = await scrape(gw[0]!);
        return (
          s.value('mcp_queue_jobs', { state: 'waiting' }) === 0 &&
          s.value('mcp_queue_jobs', { state: 'active' }) === 0 &&
          s.value('mcp_tasks_input_required') === 0
        );
      },
      5000,
      100,
      'an empty queue',
    );
    // Cardinality: no label value is a task id or a principal.
    for (const s of [...g0.samples, ...w.samples]) {
      for (const v of Object.values(s.labels))
        assert.ok(!/[0-9a-f]{8}-[0-9a-f]{4}-/.test(v) && !/anonymous|key:/.test(v), `label ${s.name} ${v}`);
    }
  });

  it('METRICS_PORT moves /metrics to a listener of its own; METRICS_ENABLED=false removes it', async () => {
    const bound = await c.addGateway({ METRICS_PORT: '0', METRICS_HOST: '127.0.0.1' });
    const ready = bound.logs.find((l) => l.msg === 'gateway.ready')!;
    assert.match(String(ready.metrics), /^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
    assert.notEqual(String(ready.metrics), bound.url!.replace(/\/mcp$/, '/metrics'));
    const s = await scrape(String(ready.metrics));
    assert.equal(s.status, 200);
    assert.equal(s.value('mcp_workers_alive'), 1);
    assert.equal((await fetch(bound.url!.replace(/\/mcp$/, '/metrics'))).status, 404, 'not on the MCP port');
    const off = await c.addGateway({ METRICS_ENABLED: 'false' });
    assert.equal(off.logs.find((l) => l.msg === 'gateway.ready')!.metrics, 'off');
    assert.equal((await fetch(off.url!.replace(/\/mcp$/, '/metrics'))).status, 404);
  });
});
