/**
 * The gateway's drain is bounded whatever hangs (apps/gateway/src/shutdown.ts): with an app whose
 * `close` never resolves, services that never close and a Redis client whose QUIT is never
 * answered, the process still exits 0 within SHUTDOWN_DRAIN_DELAY_MS + SHUTDOWN_GRACE_MS +
 * SHUTDOWN_MARGIN_MS, after the hand-off and the abort, with the Redis client disconnected and
 * without the backstop (`gateway.exit_forced`). With nothing hanging it exits right after the
 * drain. The e2e counterpart with a real Redis stopped or killed is
 * test/e2e/gateway-shutdown-redis-down.test.ts.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { gatewayShutdown, SHUTDOWN_MARGIN_MS, type ShutdownDeps } from '../../apps/gateway/src/shutdown.js';

const never = () => new Promise<never>(() => undefined);
/** The drain's timers are unref'd (a server's sockets keep the process up); here nothing else does. */
async function alive(p: Promise<void>): Promise<void> {
  const keep = setInterval(() => undefined, 1000);
  try {
    await p;
  } finally {
    clearInterval(keep);
  }
}

function harness(hang: boolean) {
  const events: string[] = [];
  let exited: { code: number; at: number } | undefined;
  let resolveExit: () => void = () => undefined;
  const done = new Promise<void>((r) => (resolveExit = r));
  const log = {
    info: (_o: object, m: string) => events.push(m),
    warn: (_o: object, m: string) => events.push(m),
    error: (_o: object, m: string) => events.push(m),
    // A hung log transport: the exit must not wait for it.
    flush: (cb: () => void) => (hang ? undefined : cb()),
  };
  const redis = {
    quit: () => (hang ? never() : Promise.resolve('OK')),
    disconnect: () => events.push('redis.disconnect'),
  };
  const app = {
    startDrain: () => events.push('startDrain'),
    closeListens: () => events.push('closeListens'),
    close: () => (hang ? never() : Promise.resolve()),
    handOffSync: () => events.push('handOffSync'),
    closeMcp: () => (events.push('closeMcp'), hang ? never() : Promise.resolve()),
    stopAccepting: () => events.push('stopAccepting'),
    quietFor: () => (hang ? never() : Promise.resolve()),
    server: { closeIdleConnections: () => undefined },
  };
  const deps = {
    app,
    log,
    drainDelayMs: 20,
    shutdownGraceMs: 50,
    stopLoops: () => events.push('stopLoops'),
    closeServices: () => [hang ? never() : Promise.resolve()],
    redis: [redis],
    exit: (code: number) => {
      if (exited) return;
      exited = { code, at: Date.now() };
      resolveExit();
    },
  } as unknown as ShutdownDeps;
  return { deps, events, done, result: () => exited };
}

describe('gateway drain bound (shutdown.ts)', () => {
  it('everything hangs (app close, MCP exchanges, services, Redis QUIT, log flush): exit 0 within drain + grace + SHUTDOWN_MARGIN_MS, Redis disconnected, no backstop', async () => {
    const h = harness(true);
    const t0 = Date.now();
    void gatewayShutdown(h.deps)('SIGTERM');
    await alive(h.done);
    const r = h.result()!;
    const bound = 20 + 50 + SHUTDOWN_MARGIN_MS;
    assert.equal(r.code, 0, h.events.join(', '));
    assert.ok(r.at - t0 <= bound, `exited after ${r.at - t0} ms, bound ${bound} ms`);
    assert.ok(r.at - t0 >= 20 + 50, 'not before drain + grace');
    for (const step of ['startDrain', 'closeListens', 'handOffSync', 'closeMcp', 'stopLoops', 'redis.disconnect'])
      assert.ok(h.events.includes(step), `${step} ran: ${h.events.join(', ')}`);
    assert.ok(h.events.indexOf('handOffSync') < h.events.indexOf('closeMcp'), 'hand-off before the abort');
    assert.ok(!h.events.some((e) => e.startsWith('gateway.exit_forced')), 'the backstop did not fire');
  });

  it('nothing hangs: exit 0 right after the drain, no hand-off needed', async () => {
    const h = harness(false);
    const t0 = Date.now();
    void gatewayShutdown(h.deps)('SIGTERM');
    await alive(h.done);
    const r = h.result()!;
    assert.equal(r.code, 0);
    assert.ok(r.at - t0 < 20 + 50 + 1000, `exited after ${r.at - t0} ms`);
    assert.ok(!h.events.includes('handOffSync'));
    assert.ok(!h.events.includes('redis.disconnect'), 'QUIT answered: no forced disconnect');
  });
});
