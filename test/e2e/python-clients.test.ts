// @needs redis python-clients
/**
 * Real Python clients (issue 19 §8): the official Python SDK `mcp` 2.3.0 and FastMCP's `Client`
 * 4.0.10, each in the 2025-11-25 era (`mode="legacy"`: the initialize handshake, a session in
 * Redis) and in the 2026-07-28 era (`mode="auto"`: server/discover), through 2 gateways + 2
 * workers behind the no-affinity round-robin proxy, with an API key. The clients run
 * test/clients/python_clients.py from the venv scripts/python-clients.mjs sets up
 * (tools/python/.venv, pinned by tools/python/requirements.txt). Each run makes four calls and
 * prints one JSON line per call; every call must be `ok`:
 *  - deep_research: its question ("Who is the report for?") reaches the client's elicitation
 *    handler, the answer comes back, the report names the audience (LG-09 on 2025);
 *  - share_report: the same with its confirmation;
 *  - countdown {3} with a progress handler: at least three progress notifications;
 *  - countdown {10} abandoned after 1.5 s (2025: `notifications/cancelled`, LG-08; 2026: the
 *    request is closed, C-01): its task is `cancelled` in Redis, its record's `lastUpdatedAt`
 *    within 3 s of the abandon.
 * Each run first reports the protocol version it negotiated. The combinations run one after
 * another, so each run's new countdown task is its own; each run reaches both gateways.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { ROOT, startCluster, type Cluster } from '../support/cluster.js';
import { runClientScript } from '../support/client-lines.js';
import { pythonClientsPython } from '../support/python-clients.js';
import { startRoundRobinProxy, type RoundRobinProxy } from '../support/round-robin-proxy.js';

const KEY = `py-${randomBytes(16).toString('hex')}`;
const SCRIPT = join(ROOT, 'test', 'clients', 'python_clients.py');

describe('Python SDK 2.3.0 and FastMCP 4.0.10, both eras, 2 gateways + 2 workers behind a round-robin proxy, with an API key', () => {
  let c: Cluster;
  let proxy: RoundRobinProxy;

  before(async () => {
    c = await startCluster({ gateways: 2, workers: 2, env: { AUTH_API_KEYS: `py:${KEY}` } });
    proxy = await startRoundRobinProxy(c.urls);
  });
  after(async () => {
    await proxy?.close();
    await c?.stop();
  });

  for (const which of ['mcp', 'fastmcp'] as const)
    for (const mode of ['legacy', 'auto'] as const)
      it(`${which} in ${mode === 'legacy' ? '2025-11-25' : '2026-07-28'} mode: deep_research and share_report answer their questions, countdown reports progress, a cancelled countdown {10} is cancelled in Redis within 3 s`, async (t) => {
        const before = [...proxy.counts];
        const { lines, stderr } = await runClientScript(pythonClientsPython(), [
          SCRIPT,
          proxy.url,
          KEY,
          which,
          mode,
          c.prefix,
          c.redisUrl,
        ]);
        for (const l of lines)
          t.diagnostic(`${l.client} ${l.mode} ${l.call}: ${l.ok ? 'ok' : 'FAILED'} in ${l.ms} ms (${l.detail})`);
        assert.deepEqual(
          lines.map((l) => l.call),
          ['connect', 'deep_research', 'share_report', 'countdown3+progress', 'cancel countdown10'],
          `every call reported; stderr:\n${stderr.slice(-3000)}`,
        );
        const failed = lines.filter((l) => !l.ok);
        assert.deepEqual(failed, [], JSON.stringify(failed, null, 1));
        // No affinity: the run's requests reached both gateways.
        const used = proxy.counts.map((n, i) => n - before[i]!);
        assert.ok(
          used.every((n) => n >= 3),
          `requests per gateway: ${used.join(' / ')}`,
        );
      });

  it('without the key a client cannot connect (401), in either era', async () => {
    for (const mode of ['legacy', 'auto'] as const) {
      const r = await runClientScript(
        pythonClientsPython(),
        [SCRIPT, proxy.url, 'not-the-key', 'mcp', mode, c.prefix, c.redisUrl],
        { timeoutMs: 60_000 },
      );
      assert.notEqual(r.code, 0, `mode ${mode}: the client connected with a wrong key`);
      assert.match(r.stderr, /401|Unauthorized/i, r.stderr.slice(-2000));
    }
  });
});
