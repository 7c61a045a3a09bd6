/**
 * The official conformance suite (`@modelcontextprotocol/conformance@0.2.0-alpha.12`, run by
 * scripts/conformance.mjs on the Node 22 in tools/conformance) against two gateways and two
 * workers behind a per-request round-robin proxy: every request of the suite, `tasks/get`
 * polls included, may land on the other replica. All 9 countable `tasks-*` scenarios must
 * pass with 0 failed checks; so must `tools-call-with-progress` (core, at 2026-07-28). The first
 * run installs tools/conformance (`npm ci`, ~10 s).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { runConformance, DEFAULT_SCENARIOS } from '../../scripts/conformance.mjs';
import { ROOT, startCluster, type Cluster } from '../support/cluster.js';
import { startRoundRobinProxy, type RoundRobinProxy } from '../support/round-robin-proxy.js';

interface ScenarioResult {
  name: string;
  ok: boolean;
  passed: number;
  failed: number;
  warnings: number;
  skipped: number;
  info: number;
  failures: { id: string; errorMessage: string }[];
}

describe('round-robin proxy (test support)', () => {
  const upstreams: Server[] = [];
  let proxy: RoundRobinProxy;

  before(async () => {
    for (const name of ['A', 'B']) {
      const srv = createServer((req, res) => {
        if (req.url === '/sse') {
          res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
          res.write(`data: {"from":"${name}","n":1}\n\n`);
          setTimeout(() => res.end(`data: {"from":"${name}","n":2}\n\n`), 400);
        } else {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ from: name }));
        }
      });
      await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
      upstreams.push(srv);
    }
    proxy = await startRoundRobinProxy(upstreams.map((s) => `http://127.0.0.1:${(s.address() as AddressInfo).port}/mcp`));
  });
  after(async () => {
    await proxy?.close();
    for (const s of upstreams) {
      s.closeAllConnections();
      await new Promise((r) => s.close(r));
    }
  });

  it('sends each request (even on one kept-alive client connection) to the next upstream', async () => {
    const seen: string[] = [];
    for (let i = 0; i < 4; i++) seen.push(((await (await fetch(`${proxy.origin}/json`)).json()) as { from: string }).from);
    assert.deepEqual(seen, ['A', 'B', 'A', 'B']);
  });

  it('streams SSE through without buffering', async () => {
    const t0 = Date.now();
    const res = await fetch(`${proxy.origin}/sse`);
    assert.equal(res.headers.get('content-type'), 'text/event-stream');
    const reader = res.body!.getReader();
    const first = await reader.read();
    const firstAt = Date.now() - t0;
    assert.match(new TextDecoder().decode(first.value), /"n":1/);
    let rest = '';
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      rest += new TextDecoder().decode(value);
    }
    const endAt = Date.now() - t0;
    assert.match(rest, /"n":2/);
    assert.ok(firstAt < 250, `first event after ${firstAt} ms (should not wait for the end)`);
    assert.ok(endAt >= 380, `stream ended after ${endAt} ms`);
  });
});

describe('official conformance suite, tasks-* scenarios, 2 gateways + 2 workers behind a round-robin proxy', () => {
  let c: Cluster;
  let proxy: RoundRobinProxy;

  before(async () => {
    c = await startCluster({ gateways: 2, workers: 2, env: { MCP_TOOLSETS: 'demo,conformance,testing' } });
    proxy = await startRoundRobinProxy(c.urls);
  });
  after(async () => {
    await proxy?.close();
    await c?.stop();
  });

  it('all 9 countable tasks-* scenarios: every scenario has checks, 0 failed (T-01…T-47)', async (t) => {
    const lines: string[] = [];
    // results/ is git-ignored; each scenario leaves its checks.json and cli.log there.
    const out = join(ROOT, 'results', 'conformance', `e2e-${new Date().toISOString().replace(/[:.]/g, '-')}`);
    const started = Date.now();
    const r = (await runConformance({
      url: proxy.url,
      scenarios: [...DEFAULT_SCENARIOS],
      out,
      log: (line: string) => {
        lines.push(line);
        process.stderr.write(`${line}\n`);
      },
    })) as { ok: boolean; passed: number; failed: number; outDir: string; scenarios: ScenarioResult[] };
    for (const l of lines) for (const part of l.split('\n')) t.diagnostic(part);
    t.diagnostic(`total: ${r.passed} passed, ${r.failed} failed in ${((Date.now() - started) / 1000).toFixed(1)} s; results in ${r.outDir}`);
    t.diagnostic(`requests per gateway through the proxy: ${proxy.counts.join(' / ')}`);
    const perMethod = new Map<string, number[]>();
    for (const e of proxy.log) {
      const k = e.mcpMethod ?? `${e.method} (no Mcp-Method)`;
      if (!perMethod.has(k)) perMethod.set(k, proxy.counts.map(() => 0));
      perMethod.get(k)![e.upstream]!++;
    }
    t.diagnostic(`per method and gateway: ${[...perMethod].map(([k, v]) => `${k} ${v.join('/')}`).join(', ')}`);

    assert.equal(r.scenarios.length, 9);
    assert.deepEqual(r.scenarios.map((s) => s.name).sort(), [...DEFAULT_SCENARIOS].sort());
    for (const s of r.scenarios) {
      const checks = s.passed + s.failed + s.warnings + s.skipped + s.info;
      assert.ok(checks > 0, `${s.name}: no checks ran`);
      assert.ok(s.passed > 0, `${s.name}: no check passed`);
    }
    const failures = r.scenarios.flatMap((s) => s.failures.map((f) => `${s.name}:${f.id}: ${f.errorMessage}`));
    assert.deepEqual(failures, [], 'failed conformance checks');
    assert.equal(r.failed, 0);
    assert.ok(r.ok, 'a scenario did not exit cleanly');
    // The suite really was spread over both gateways. Only the frequent methods are asserted:
    // the few tasks/update and tasks/cancel calls land wherever the request parity puts them.
    assert.ok(proxy.counts.every((n) => n > 10), `requests per gateway: ${proxy.counts.join(' / ')}`);
    for (const m of ['tools/call', 'tasks/get']) {
      const ups = new Set(proxy.log.filter((e) => e.mcpMethod === m).map((e) => e.upstream));
      assert.equal(ups.size, 2, `${m} reached both gateways`);
    }
  });

  it('tools-call-with-progress (--spec-version 2026-07-28, fixture test_tool_with_progress): progress relayed from a worker on a synchronous call, 0 failed (P-01, H-19)', async (t) => {
    const out = join(ROOT, 'results', 'conformance', `e2e-progress-${new Date().toISOString().replace(/[:.]/g, '-')}`);
    const r = (await runConformance({
      url: proxy.url,
      scenarios: ['tools-call-with-progress'],
      out,
      log: (line: string) => {
        for (const part of line.split('\n')) t.diagnostic(part);
        process.stderr.write(`${line}\n`);
      },
    })) as { ok: boolean; passed: number; failed: number; outDir: string; scenarios: ScenarioResult[] };
    const [s] = r.scenarios;
    assert.equal(s?.name, 'tools-call-with-progress');
    assert.deepEqual(s!.failures, [], 'failed conformance checks');
    assert.ok(s!.passed >= 2, `${s!.passed} checks passed (the progress check and the wire schema check)`);
    assert.ok(r.ok, 'the scenario did not exit cleanly');
  });
});
