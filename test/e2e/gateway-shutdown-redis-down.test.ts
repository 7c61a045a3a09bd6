// @needs redis redis-server
/**
 * A gateway sent SIGTERM while its Redis is unreachable exits within SHUTDOWN_DRAIN_DELAY_MS +
 * SHUTDOWN_GRACE_MS + SHUTDOWN_MARGIN_MS (apps/gateway/src/shutdown.ts), whatever Redis does:
 * stopped (SIGSTOP: connections stay open, commands hang) or gone (SIGKILL: connections refused).
 * Before the fix the same gateway was still alive 40 s after the signal (3 s grace), and its
 * synchronous call's stream was cut without an answer.
 *
 * What the clients get: the task listen stream ends with its final result (as with Redis up);
 * the synchronous call, which cannot be handed off (the detach needs Redis), ends with `-32603`
 * saying so and to call the tool again, instead of a stream cut without an answer. Once Redis is
 * back, that call's task, which nobody holds, is cancelled by the reconciler (the call was told
 * it did not continue).
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { SHUTDOWN_MARGIN_MS } from '../../apps/gateway/src/shutdown.js';
import { sleep, startCluster, startRedis, waitFor, type Cluster, type ThrowawayRedis } from '../support/cluster.js';
import { callTool, getTask, rpc, type RpcResponse } from '../support/mcp.js';

const DRAIN_MS = 300;
const GRACE_MS = 3000;
const BOUND_MS = DRAIN_MS + GRACE_MS + SHUTDOWN_MARGIN_MS;

describe('gateway SIGTERM while its Redis is unreachable', () => {
  const open: { c: Cluster; redis: ThrowawayRedis }[] = [];
  after(async () => {
    for (const { c, redis } of open) {
      if (redis.proc.exitCode === null) redis.proc.kill('SIGCONT');
      await c.stop();
      await redis.stop();
    }
  });

  for (const how of ['SIGSTOP', 'SIGKILL'] as const) {
    it(`Redis ${how === 'SIGSTOP' ? 'stopped (hung)' : 'killed (refused)'}: exits 0 within drain + grace + ${SHUTDOWN_MARGIN_MS} ms; the listen stream gets its final result, the synchronous call a -32603 that says it could not continue`, async () => {
      const redis = await startRedis();
      const c = await startCluster({
        redisUrl: redis.url,
        gateways: 1,
        workers: 1,
        env: { SHUTDOWN_DRAIN_DELAY_MS: String(DRAIN_MS), SHUTDOWN_GRACE_MS: String(GRACE_MS) },
      });
      open.push({ c, redis });
      c.redis.on('error', () => undefined);
      const g = c.gateways[0]!;
      const sync = callTool(g.url!, 'slow_echo', { seconds: 60 }, { tasks: false, meta: { progressToken: 'p' } });
      const syncId = (await g.waitLog((l) => l.msg === 'task.created' && l.mode === 'sync')).taskId as string;
      const made = await callTool(g.url!, 'slow_echo', { seconds: 60 });
      const taskId = made.body.result!.taskId as string;
      const listen: Promise<RpcResponse> = rpc(g.url!, 'subscriptions/listen', {
        notifications: { taskIds: [taskId] },
      });
      await g.waitLog((l) => l.msg === 'listen.opened');
      // The synchronous call is held and relaying progress.
      await waitFor(() => c.workers[0]!.logs.some((l) => l.msg === 'step.started' && l.taskId === syncId), 10_000);

      redis.proc.kill(how);
      await sleep(300);
      const t0 = Date.now();
      const code = await Promise.race([g.stop('SIGTERM'), sleep(BOUND_MS + 5000).then(() => 'still running')]);
      const tookMs = Date.now() - t0;
      assert.equal(code, 0, `exit code (after ${tookMs} ms)`);
      assert.ok(tookMs <= BOUND_MS, `exited after ${tookMs} ms, bound ${BOUND_MS} ms`);
      assert.ok(!g.logs.some((l) => l.msg?.toString().startsWith('gateway.exit_forced')), 'no phase hung');

      const l = await listen;
      assert.equal(l.status, 200);
      assert.equal(l.body.result?.resultType, 'complete', JSON.stringify(l.body));
      const s = await sync;
      assert.equal(s.status, 200);
      assert.equal(s.body.error?.code, -32603, JSON.stringify(s.body));
      assert.match(
        s.body.error!.message,
        /shutting down .* could not continue in the background\. Call the tool again\./,
      );
      assert.ok(!JSON.stringify(s.body).includes('ECONNREFUSED') && !JSON.stringify(s.body).includes('timed out'));

      if (how === 'SIGSTOP') {
        // Redis back with its data: nobody holds the call any more, so its task is cancelled.
        redis.proc.kill('SIGCONT');
        const g2 = await c.addGateway();
        const rec = await waitFor(
          async () => {
            const r = await c.redis.hget(`${c.prefix}:{t:${syncId}}:task`, 'status');
            return r === 'cancelled' ? r : undefined;
          },
          20_000,
          100,
          'the orphaned synchronous call to be cancelled',
        );
        assert.equal(rec, 'cancelled');
        // The task handle the other client holds is intact and still running.
        const t = await getTask(g2.url!, taskId);
        assert.equal(t.body.result?.status, 'working', JSON.stringify(t.body));
      }
    });
  }
});
