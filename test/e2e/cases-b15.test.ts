/**
 * Case B-15 (b): a Redis whose `maxmemory-policy` may evict keys (here `allkeys-lru`) can lose
 * BullMQ locks and task records, so gateways and workers refuse readiness with a reason naming
 * the policy (and log it at start), and become ready once the policy is `noeviction`
 * (re-read at most every 5 s). A throwaway `redis-server`, real processes.
 * (Parts a and c — memory back to baseline after the TTL, a full Redis — are not automated here.)
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { startCluster, startRedis, waitFor, type Cluster, type ThrowawayRedis } from '../support/cluster.js';

describe('case B-15 (b): readiness refuses an evicting Redis policy', () => {
  let r: ThrowawayRedis;
  let c: Cluster;
  before(async () => {
    r = await startRedis(['--maxmemory', '256mb', '--maxmemory-policy', 'allkeys-lru']);
    c = await startCluster({ gateways: 1, workers: 1, redisUrl: r.url });
  });
  after(async () => {
    await c?.stop();
    await r?.stop();
  });

  it('gateway and worker /readyz answer 503 naming allkeys-lru, then 200 after CONFIG SET noeviction', async () => {
    const gatewayReady = c.urls[0]!.replace(/\/mcp$/, '/readyz');
    const workerReady = `${c.workers[0]!.opsUrl}/readyz`;
    for (const url of [gatewayReady, workerReady]) {
      const res = await fetch(url);
      const body = (await res.json()) as { reason?: string };
      assert.equal(res.status, 503, url);
      assert.match(body.reason ?? '', /maxmemory-policy is allkeys-lru/);
      assert.match(body.reason ?? '', /noeviction/);
    }
    assert.ok(c.gateways[0]!.logs.some((l) => String(l.msg).startsWith('redis.eviction_policy_unsafe') && l.policy === 'allkeys-lru'));
    const admin = new Redis(r.url);
    try {
      await admin.config('SET', 'maxmemory-policy', 'noeviction');
    } finally {
      admin.disconnect();
    }
    for (const url of [gatewayReady, workerReady]) {
      await waitFor(async () => (await fetch(url)).status === 200, 8000, 200, `${url} ready`);
    }
  });
});
