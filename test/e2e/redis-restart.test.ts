// @needs redis redis-server
/**
 * A Redis that loses its data (restart without persistence, failover to an empty replica):
 * processes reconnect and the reconciler's schedule, which lives in Redis, comes back
 * (otherwise every reconciler backstop, case B-16, would be off until a worker restart).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startCluster, startRedis, waitFor, type Cluster, type ThrowawayRedis } from '../support/cluster.js';
import { callTool, getTask, pollTask, roundRobin } from '../support/mcp.js';
import { Redis } from 'ioredis';

describe('Redis restarted empty', () => {
  let redis: ThrowawayRedis;
  let c: Cluster;
  before(async () => {
    redis = await startRedis();
    c = await startCluster({ redisUrl: redis.url, gateways: 1, workers: 1 });
  });
  after(async () => {
    await c?.stop();
    await redis?.stop();
  });

  it('the reconciler schedule is re-created and tasks work again', async () => {
    const schedulerKeys = async () => (await c.keys()).filter((k) => k.includes(':{jobs}:maintenance:repeat'));
    await waitFor(async () => (await schedulerKeys()).length > 0, 5000, 100, 'scheduler at start');
    await redis.restart();
    // The test's own client reconnects on its own time (and a disconnect()+connect() pair can
    // race); check the restarted server through a fresh connection instead.
    const probe = new Redis(redis.url, { maxRetriesPerRequest: 1 });
    try {
      const repeatKeys = async () => (await probe.keys(`${c.prefix}:{jobs}:maintenance:repeat*`)).length;
      await waitFor(async () => (await repeatKeys()) > 0, 15_000, 200, 'scheduler re-created after the restart');
    } finally {
      probe.disconnect();
    }
    // The service recovered: a task runs to completion.
    const url = c.urls[0]!;
    await waitFor(async () => (await fetch(url.replace(/\/mcp$/, '/readyz'))).status === 200, 10_000, 100, 'ready');
    const r = await callTool(url, 'countdown', { seconds: 1 });
    const taskId = r.body.result!.taskId as string;
    const done = await pollTask(roundRobin([url]), taskId, (t) => t.status === 'completed', 10_000);
    assert.equal(done.result.content[0].text, 'Countdown from 1 finished.');
    assert.equal((await getTask(url, taskId)).body.result?.status, 'completed');
  });
});
