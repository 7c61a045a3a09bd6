// @needs redis redis-server
/**
 * Responses never echo Redis' own error text (issue 9 §6, D10): while Redis refuses writes
 * (`maxmemory 1` with `noeviction`: "OOM command not allowed when used memory > 'maxmemory'")
 * and while it is stopped ("Connection is closed.", "Stream isn't writeable…", ECONNREFUSED),
 * every tasks/* and tools/call answer says `-32603` "Task store unavailable; retry later" and
 * names no Redis error, command or key; the gateways' logs keep the detail. Both request paths
 * are tried: the hot path (HOT_PATH=true, the default) and the SDK's (HOT_PATH=false).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startCluster, startRedis, waitFor, type Cluster, type ThrowawayRedis } from '../support/cluster.js';
import { callTool, cancelTask, getTask, pollTask, updateTask, type RpcResponse } from '../support/mcp.js';

const REDIS_TEXT =
  /OOM|maxmemory|command not allowed|Connection is closed|Stream isn't writeable|enableOfflineQueue|ECONNREFUSED|Command timed out|max retries|ReplyError|EVALSHA|NOSCRIPT|\{t:|:task\b/i;

describe('Redis failures never reach a response as Redis text (issue 9 §6)', () => {
  let redis: ThrowawayRedis;
  let c: Cluster;
  before(async () => {
    redis = await startRedis(['--maxmemory-policy', 'noeviction']);
    c = await startCluster({ redisUrl: redis.url, gateways: 1, workers: 1 });
    await c.addGateway({ HOT_PATH: 'false' });
    c.redis.on('error', () => undefined);
  });
  after(async () => {
    await c?.stop();
    await redis?.stop();
  });

  /** Checks one answer: either it worked, or it is the store-unavailable error with no Redis text. */
  const clean = (r: RpcResponse | undefined, what: string) => {
    assert.ok(r, `${what}: answered`);
    const text = JSON.stringify(r.body) + JSON.stringify(r.messages);
    assert.doesNotMatch(text, REDIS_TEXT, `${what}: ${text}`);
    assert.ok(!text.includes(c.prefix), `${what}: no key prefix in ${text}`);
    return r;
  };
  const unavailable = (r: RpcResponse, what: string) => {
    clean(r, what);
    assert.equal(r.body.error?.code, -32603, `${what}: ${JSON.stringify(r.body)}`);
    assert.equal(r.body.error?.message, 'Task store unavailable; retry later', what);
    assert.ok(r.status === 503 || r.status === 200, `${what}: HTTP ${r.status}`);
  };

  const workedOrUnavailable = (r: RpcResponse, what: string) => {
    if (r.body.error) unavailable(r, what);
    else clean(r, what);
  };

  it('Redis refusing writes (OOM), then stopped: every answer is "Task store unavailable", on both request paths', async () => {
    // A task waiting for input, to update and cancel while Redis refuses writes.
    const parked: string[] = [];
    const keys: string[] = [];
    for (const url of c.urls) {
      const r = await callTool(url, 'ask_confirm', {});
      const id = r.body.result!.taskId as string;
      const t = await pollTask(
        () => url,
        id,
        (x) => x.status === 'input_required',
        15_000,
        100,
      );
      parked.push(id);
      keys.push(Object.keys(t.inputRequests ?? {})[0]!);
    }
    await c.redis.config('SET', 'maxmemory', '1');
    try {
      for (const [i, url] of c.urls.entries()) {
        const path = i === 0 ? 'hot path' : 'SDK path';
        unavailable(await callTool(url, 'countdown', { seconds: 1 }), `${path}: task creation under OOM`);
        unavailable(
          await callTool(url, 'countdown', { seconds: 1 }, { tasks: false }),
          `${path}: synchronous call under OOM`,
        );
        // Redis may still run a script that only changes existing fields (the answers were
        // applied, the enqueue of the next step failed and is the reconciler's to repair): an
        // update or a cancel either works or is refused as unavailable, never with Redis' text.
        workedOrUnavailable(
          await updateTask(url, parked[i]!, { [keys[i]!]: { action: 'accept', content: { confirm: true } } }),
          `${path}: tasks/update under OOM`,
        );
        workedOrUnavailable(await cancelTask(url, parked[i]!), `${path}: tasks/cancel under OOM`);
        // Reads still work under OOM.
        assert.ok(
          clean(await getTask(url, parked[i]!), `${path}: tasks/get under OOM`).body.result?.status,
          'tasks/get answers under OOM',
        );
      }
    } finally {
      await c.redis.config('SET', 'maxmemory', '0');
    }
    await redis.stop();
    for (const [i, url] of c.urls.entries()) {
      const path = i === 0 ? 'hot path' : 'SDK path';
      // Right after the stop (before the gateway's health check notices) and after it.
      for (let n = 0; n < 2; n++) {
        unavailable(await getTask(url, parked[i]!), `${path}: tasks/get, Redis stopped (${n})`);
        unavailable(await callTool(url, 'countdown', { seconds: 1 }), `${path}: task creation, Redis stopped (${n})`);
        unavailable(await cancelTask(url, parked[i]!), `${path}: tasks/cancel, Redis stopped (${n})`);
        const ready = await waitFor(
          async () => {
            const r = await fetch(url.replace(/\/mcp$/, '/readyz'));
            return r.status === 503 ? await r.text() : undefined;
          },
          5000,
          100,
          'readiness off',
        );
        assert.doesNotMatch(ready, REDIS_TEXT, `/readyz: ${ready}`);
      }
    }
    // The detail is in the logs.
    const logged = c.gateways.flatMap((g) => g.logs).map((l) => JSON.stringify(l));
    assert.ok(
      logged.some((l) => /OOM/.test(l)),
      'the OOM refusal is logged',
    );
  });
});
