/**
 * Gateway shutdown (B-07, B-10 d): on SIGTERM it drains — /readyz fails and responses say
 * `Connection: close` — then stops accepting and lets in-flight requests finish; a synchronous
 * call in flight gets its result instead of being cut (and cancelled).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startCluster, sleep, type Cluster } from '../support/cluster.js';
import { callTool } from '../support/mcp.js';

describe('gateway SIGTERM', () => {
  let c: Cluster;
  before(async () => {
    c = await startCluster({ gateways: 1, workers: 1, env: { SHUTDOWN_DRAIN_DELAY_MS: '1500', SHUTDOWN_GRACE_MS: '8000' } });
  });
  after(async () => c?.stop());

  it('drains: readiness fails, in-flight synchronous call completes, exit 0', async () => {
    const g = c.gateways[0]!;
    const base = g.url!.replace(/\/mcp$/, '');
    assert.equal((await fetch(`${base}/readyz`)).status, 200);
    const inflight = callTool(g.url!, 'countdown', { seconds: 3 }, { tasks: false });
    await sleep(500);
    const exited = g.stop('SIGTERM');
    await g.waitLog((l) => l.msg === 'gateway.draining', 3000);
    const ready = await fetch(`${base}/readyz`);
    assert.equal(ready.status, 503, 'not ready while draining');
    assert.equal(ready.headers.get('connection'), 'close');
    const r = await inflight;
    assert.equal(r.status, 200);
    assert.equal(r.body.result?.content?.[0]?.text, 'Countdown from 3 finished.', JSON.stringify(r.body));
    assert.equal(await exited, 0);
    assert.ok(!g.logs.some((l) => l.msg === 'sync.disconnected'), 'the in-flight call was not cancelled');
  });
});
