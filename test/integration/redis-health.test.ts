// @needs redis-server
/**
 * Integration test of the gateway's Redis health verdict (`watchRedis`, D10): a slow link is
 * not a hung Redis, a hung one is seen. Real throwaway `redis-server`, the request client as the
 * gateway builds it (auto-pipelined, 2 s command timeout), and the test TCP proxy adding delay.
 *
 * The slow link: 600 ms added each way, so every PING takes over 1.2 s, more than the 1 s bound
 * that once turned task creations into 503 through case B-02 (b)'s 200 ms proxy on a loaded
 * machine, and less than the 2 s command timeout within which a request's commands still
 * succeed; meanwhile other commands keep an auto-pipeline in flight, which a PING must not queue
 * behind. The hung Redis: SIGSTOP (connection up, nothing answered).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { createRedis, REQUEST_COMMAND_TIMEOUT_MS, watchRedis, type RedisHealth } from '@mcp-tasks/jobs';
import { sleep, startRedis, waitFor, type ThrowawayRedis } from '../support/cluster.js';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.js';

describe('Redis health (D10): a slow link stays healthy, a hung Redis does not', () => {
  let r: ThrowawayRedis;
  let proxy: TcpProxy;
  let redis: Redis;
  let health: RedisHealth;
  before(async () => {
    r = await startRedis();
    proxy = await startTcpProxy({ targetPort: r.port, delayMs: 600 });
    redis = createRedis({ mode: 'single', url: proxy.url, tls: false }, 'request', 'health-test') as Redis;
    await redis.connect();
    health = watchRedis(redis, 200);
  });
  after(async () => {
    health?.stop();
    r?.proc.kill('SIGCONT');
    redis?.disconnect();
    await proxy?.close();
    await r?.stop();
  });

  it('every PING takes over 1.2 s through the proxy, the auto-pipeline is kept busy, yet ok stays true for 6 s', async () => {
    const t0 = Date.now();
    assert.equal(await redis.ping(), 'PONG');
    const rtt = Date.now() - t0;
    assert.ok(rtt >= 1200 && rtt < REQUEST_COMMAND_TIMEOUT_MS, `one PING took ${rtt} ms`);
    // Other requests' commands, back to back: an auto-pipeline is always in flight. A PING
    // queued behind it would take up to two round trips (over 2.4 s here).
    let busy = true;
    const load = Promise.all(
      Array.from({ length: 4 }, async () => {
        while (busy) await redis.get('health-test-key');
      }),
    );
    try {
      await sleep(100);
      const t1 = Date.now();
      await redis.ping();
      const busyPing = Date.now() - t1;
      assert.ok(
        busyPing < 1.5 * rtt,
        `a PING beside a busy auto-pipeline took ${busyPing} ms (one round trip: ${rtt} ms)`,
      );
      const end = Date.now() + 6000;
      let samples = 0;
      while (Date.now() < end) {
        assert.equal(health.ok, true, `unhealthy after ${samples} samples over a ${rtt} ms link`);
        samples++;
        await sleep(50);
      }
    } finally {
      busy = false;
      await load;
    }
  });

  it('SIGSTOP: ok turns false within everyMs + the command timeout (+1 s); SIGCONT: true again', async () => {
    proxy.setDelay(0);
    await waitFor(() => redis.ping().then((p) => p === 'PONG'), 5000, 50, 'a fast PING');
    r.proc.kill('SIGSTOP');
    const t0 = Date.now();
    try {
      await waitFor(() => !health.ok, 200 + REQUEST_COMMAND_TIMEOUT_MS + 1000, 20, 'the hung verdict');
      const seen = Date.now() - t0;
      assert.ok(seen >= REQUEST_COMMAND_TIMEOUT_MS - 250, `hung seen after ${seen} ms, before a PING could be late`);
    } finally {
      r.proc.kill('SIGCONT');
    }
    await waitFor(() => health.ok, 5000, 20, 'healthy again');
  });
});
