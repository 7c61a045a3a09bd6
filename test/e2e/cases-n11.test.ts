// @needs redis
/**
 * Case N-11 (issue 9 §6): a replica whose clock is 2 minutes off never expires a task early and
 * never accepts an expired continuation beyond the stated tolerance (1 s, packages/jobs
 * clock.ts): every timestamp and expiry comes from Redis time (`RedisClock`), not the process
 * clock.
 *
 * One gateway runs with its wall clock 2 minutes behind (`--import test/support/clock-skew.mjs`,
 * CLOCK_SKEW_MS=-120000): behind is the harmful direction, where its own clock would write an
 * expiry (PEXPIREAT createdAt + ttlMs) 2 minutes too early and accept continuations for 2
 * minutes after they expired. A normal gateway reads what the skewed one wrote, and each checks
 * the continuations the other minted (REQUEST_STATE_TTL_S 3 s).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ROOT, sleep, startCluster, startProcess, type Cluster, type Proc } from '../support/cluster.js';
import { callTool, getTask, pollTask, type RpcResponse } from '../support/mcp.js';

const SKEW_MS = -120_000;
const TTL_MS = 60_000;
const STATE_TTL_S = 3;
/** The stated tolerance of Redis time (packages/jobs clock.ts TOLERANCE_MS). */
const TOLERANCE_MS = 1000;

describe('Case N-11: a replica whose clock is 2 minutes off', () => {
  let c: Cluster;
  let skewed: Proc;
  let dir: string;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mcp-n11-'));
    c = await startCluster({
      gateways: 1,
      workers: 1,
      env: { TASK_TTL_MS: String(TTL_MS), REQUEST_STATE_TTL_S: String(STATE_TTL_S), TESTING_SIDE_EFFECT_DIR: dir },
    });
    skewed = await startProcess(
      'gateway',
      { ...c.env, CLOCK_SKEW_MS: String(SKEW_MS) },
      { nodeArgs: ['--import', pathToFileURL(join(ROOT, 'test/support/clock-skew.mjs')).href] },
    );
    c.gateways.push(skewed);
  });
  after(async () => {
    await c?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const redisNow = async () => {
    const [s, us] = await c.redis.time();
    return Number(s) * 1000 + Number(us) / 1000;
  };

  it('N-11: the skewed replica really runs 2 minutes behind, and measures it against Redis', async () => {
    const ready = skewed.logs.find((l) => l.msg === 'gateway.ready')!;
    // pino's `time` is the process clock: the preload took effect.
    const at = typeof ready.time === 'number' ? ready.time : Date.parse(String(ready.time));
    const behind = Date.now() - at;
    assert.ok(Math.abs(behind + SKEW_MS) < 30_000, `the replica's clock is ${behind} ms behind`);
    assert.ok(
      Math.abs(Number(ready.redisClockSkewMs) + SKEW_MS) < TOLERANCE_MS,
      `Redis clock minus the replica's: ${ready.redisClockSkewMs} ms`,
    );
  });

  it('N-11: a task created through the skewed replica carries Redis time and expires ttlMs after it, not 2 minutes early', async () => {
    const before = await redisNow();
    const r = await callTool(skewed.url!, 'countdown', { seconds: 1 });
    const after = await redisNow();
    const taskId = r.body.result?.taskId as string;
    assert.ok(taskId, JSON.stringify(r.body));
    const key = `${c.prefix}:{t:${taskId}}:task`;
    // With the replica's own clock the expiry would be 2 minutes in the past: the key gone at once.
    const pttl = await c.redis.pttl(key);
    assert.ok(
      pttl > TTL_MS - (after - before) - 2 * TOLERANCE_MS && pttl <= TTL_MS,
      `PTTL ${pttl} ms of ttlMs ${TTL_MS}`,
    );
    // Read through the normal replica: there, with the times Redis has.
    const seen = await getTask(c.urls[0]!, taskId);
    const t = seen.body.result!;
    assert.equal(t.ttlMs, TTL_MS);
    const createdAt = Date.parse(t.createdAt);
    assert.ok(
      createdAt >= before - TOLERANCE_MS && createdAt <= after + TOLERANCE_MS,
      `createdAt ${t.createdAt} within the tolerance of Redis time (${new Date(before).toISOString()} … ${new Date(after).toISOString()})`,
    );
    const done = await pollTask(
      () => c.urls[0]!,
      taskId,
      (x) => x.status === 'completed',
      20_000,
      100,
    );
    assert.ok(Date.parse(done.lastUpdatedAt) >= createdAt, 'lastUpdatedAt is not before createdAt');
    assert.ok(
      (await c.redis.pttl(key)) > TTL_MS - 10_000,
      'still ttlMs from createdAt after the worker wrote the result',
    );
  });

  const ask = async (url: string, marker: string) => {
    const r = await callTool(url, 'confirm_once', { marker }, { tasks: false });
    assert.equal(r.body.result?.resultType, 'input_required', JSON.stringify(r.body));
    return r.body.result!.requestState as string;
  };
  const answer = (url: string, marker: string, requestState: string) =>
    callTool(
      url,
      'confirm_once',
      { marker },
      { tasks: false },
      { requestState, inputResponses: { confirm: { action: 'accept', content: { ok: true } } } },
    );
  const ran = (r: RpcResponse, marker: string, what: string) =>
    assert.equal(r.body.result?.content?.[0]?.text, `ran: ${marker}`, `${what}: ${JSON.stringify(r.body)}`);
  const refused = (r: RpcResponse, what: string) =>
    assert.equal(r.body.error?.code, -32602, `${what}: ${JSON.stringify(r.body)}`);

  it('N-11: a valid continuation is accepted across the skew both ways; one expired beyond the tolerance is refused by both', async () => {
    // Valid: minted on one, answered at once on the other (its own clock would call a state the
    // skewed replica minted expired 2 minutes ago).
    ran(
      await answer(c.urls[0]!, 'a', await ask(skewed.url!, 'a')),
      'a',
      'minted on the skewed replica, answered on the normal one',
    );
    ran(
      await answer(skewed.url!, 'b', await ask(c.urls[0]!, 'b')),
      'b',
      'minted on the normal replica, answered on the skewed one',
    );
    // Expired: minted, then answered after its lifetime plus the tolerance (and a margin).
    const fromNormal = await ask(c.urls[0]!, 'c');
    const fromSkewed = await ask(skewed.url!, 'd');
    await sleep(STATE_TTL_S * 1000 + TOLERANCE_MS + 1000);
    // Its own clock would see this one as 2 minutes from expiring.
    refused(await answer(skewed.url!, 'c', fromNormal), 'expired, answered on the skewed replica');
    refused(await answer(c.urls[0]!, 'd', fromSkewed), 'expired, answered on the normal replica');
  });
});
