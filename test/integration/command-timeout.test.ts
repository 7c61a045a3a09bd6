// @needs redis-server
/**
 * Integration test of the request client's command timeout (REQUEST_COMMAND_TIMEOUT_MS, D10)
 * against a real throwaway `redis-server`, the client as the gateway builds it (`createRedis`,
 * role `request`).
 *
 * A busy process is not a hung Redis: when the event loop is blocked for longer than the
 * timeout, Redis's answer is already waiting in the socket, yet Node runs expired timers before
 * it reads sockets, so a plain timer failed the command ("Command timed out") though Redis had
 * answered within a millisecond: every command in flight across such a stall failed, and a task
 * creation among them got 503 "Task store unavailable" (the likely source of the 503s seen in
 * case B-16a with the suite run twice at once, the gateway's event loop 2-5 s late). A hung
 * Redis (SIGSTOP: connection up, nothing answered) must still fail its commands after the timeout.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { createRedis, REQUEST_COMMAND_TIMEOUT_MS } from '@mcp-tasks/jobs';
import { startRedis, type ThrowawayRedis } from '../support/cluster.js';

/** Blocks the event loop for `ms` (a stand-in for a process starved of CPU). */
function blockLoop(ms: number): void {
  const end = Date.now() + ms;
  while (Date.now() < end);
}

describe('request client command timeout (D10): measured against Redis, not against a stalled event loop', () => {
  let r: ThrowawayRedis;
  let redis: Redis;
  before(async () => {
    r = await startRedis();
    redis = createRedis({ mode: 'single', url: r.url, tls: false }, 'request', 'command-timeout-test') as Redis;
    await redis.connect();
    await redis.set('ct:key', 'value');
  });
  after(async () => {
    r?.proc.kill('SIGCONT');
    redis?.disconnect();
    await r?.stop();
  });

  it('a reply that arrived while the event loop was blocked past the timeout is the answer, not "Command timed out"', async () => {
    for (const command of [() => redis.get('ct:key'), () => redis.hgetall('ct:none')]) {
      const pending = command().then(
        (v) => ({ ok: true as const, v }),
        (e: Error) => ({ ok: false as const, message: e.message }),
      );
      // The command is written on the next turn (auto-pipelining); block the turn after it.
      await new Promise((res) => setImmediate(res));
      blockLoop(REQUEST_COMMAND_TIMEOUT_MS + 500);
      const out = await pending;
      assert.ok(out.ok, `the command failed: ${out.ok ? '' : out.message}`);
    }
    assert.equal(await redis.get('ct:key'), 'value');
  });

  it('SIGSTOP (Redis hung): a command still fails with "Command timed out" after the timeout', async () => {
    r.proc.kill('SIGSTOP');
    try {
      const t0 = Date.now();
      await assert.rejects(redis.get('ct:key'), /Command timed out/);
      const took = Date.now() - t0;
      assert.ok(took >= REQUEST_COMMAND_TIMEOUT_MS - 50, `failed after ${took} ms`);
    } finally {
      r.proc.kill('SIGCONT');
    }
    assert.equal(await redis.get('ct:key'), 'value');
  });
});
