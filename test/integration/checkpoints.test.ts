// @needs redis
/**
 * Checkpoints (D14, R-01) and the lost-worker move against the real shared Redis, under
 * this file's own random prefix (only those keys are deleted at the end).
 *  - a checkpoint is written only with the current fence of the claimed step; a stale run's
 *    checkpoint (the step claimed again elsewhere, case B-07) is refused like its late result,
 *    and leaves the newer one in place;
 *  - it is handed to the next run of the same step only, expires with the task, and a value
 *    over CHECKPOINT_MAX_BYTES never reaches Redis;
 *  - `moveLostSteps` moves a real BullMQ step job whose lock names a worker that wrote liveness
 *    keys and stopped (its `alive` key gone) back to the queue, and the task says its worker
 *    was lost; a job of a live worker, or of a worker that never wrote liveness keys, stays.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { Queue, Worker, type Job } from 'bullmq';
import { Checkpoints, TaskStore, stepJobId, type CreateTaskInput } from '@mcp-tasks/task-store';
import { CheckpointError, checkpointJson } from '@mcp-tasks/tools';
import { deleteKeysUnder } from '../support/redis-keys.js';
import { moveLostSteps, WORKER_LOST_MESSAGE } from '../../apps/worker/src/lost-workers.js';
import { aliveKey, aliveKnownKey } from '../../apps/worker/src/liveness.js';
import pino from 'pino';

const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const PREFIX = `unit-${randomBytes(8).toString('hex')}`;
let redis: Redis;
let store: TaskStore;
let cps: Checkpoints;

const input = (over: Partial<CreateTaskInput> = {}): CreateTaskInput => ({
  owner: 'alice',
  tool: 'checkpoint_count',
  args: { seconds: 5 },
  mode: 'task',
  ttlMs: 60_000,
  pollIntervalMs: 1000,
  statusMessage: 'Queued',
  clientCapabilities: {},
  ...over,
});

async function claim(taskId: string, step = 1, token = 'tok'): Promise<{ fence: string; attempt: number }> {
  const c = await store.claimStep(taskId, step, token);
  assert.equal(c.code, 'ok', JSON.stringify(c));
  return c as { fence: string; attempt: number };
}

before(async () => {
  redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
  store = new TaskStore(redis, PREFIX);
  cps = new Checkpoints(store);
});
after(async () => {
  await deleteKeysUnder(redis, PREFIX);
  redis.disconnect();
});

describe('checkpoints (D14, R-01)', () => {
  it('R-01: a stale run (the step claimed again by another worker) has its checkpoint refused; the new run keeps its own', async () => {
    const rec = await store.create(input());
    const first = await claim(rec.taskId, 1, 'w1:0');
    assert.deepEqual(await cps.save(rec.taskId, 1, first.fence, '{"counted":3}'), { code: 'ok' });
    // The step is taken over (W1 stalled): a new claim, a new fence; the re-run gets the checkpoint.
    const second = await claim(rec.taskId, 1, 'w2:0');
    assert.equal(second.attempt, 2);
    assert.deepEqual(await cps.read(rec.taskId, 1), { counted: 3 });
    assert.deepEqual(await cps.save(rec.taskId, 1, second.fence, '{"counted":4}'), { code: 'ok' });
    // W1 wakes up and writes: refused like its late result would be (T-13).
    assert.deepEqual(await cps.save(rec.taskId, 1, first.fence, '{"counted":9}'), {
      code: 'fenced',
      status: 'working',
    });
    assert.deepEqual(await store.complete(rec.taskId, first.fence, '{"content":[]}', 'Done'), {
      code: 'fenced',
      status: 'working',
    });
    assert.deepEqual(await cps.read(rec.taskId, 1), { counted: 4 });
    // A terminal task takes no checkpoint either.
    assert.equal((await store.complete(rec.taskId, second.fence, '{"content":[]}', 'Done')).code, 'ok');
    assert.equal((await cps.save(rec.taskId, 1, second.fence, '{"counted":5}')).code, 'terminal');
  });

  it('R-01: a checkpoint is handed to the same step only and expires with the task', async () => {
    const rec = await store.create(input({ ttlMs: 30_000 }));
    const { fence } = await claim(rec.taskId);
    await cps.save(rec.taskId, 1, fence, '{"a":1}');
    assert.equal(await cps.read(rec.taskId, 2), undefined, 'another step does not get it');
    const ttl = await redis.pttl(cps.key(rec.taskId));
    const recTtl = await redis.pttl(store.key(rec.taskId));
    assert.ok(ttl > 0 && Math.abs(ttl - recTtl) < 1000, `checkpoint expires with the record (${ttl} vs ${recTtl} ms)`);
    await cps.remove(rec.taskId);
    assert.equal(await cps.read(rec.taskId, 1), undefined);
  });

  it('R-01: a value over CHECKPOINT_MAX_BYTES or not JSON is refused before anything is written', () => {
    assert.equal(checkpointJson({ a: 'x'.repeat(10) }, 64), '{"a":"xxxxxxxxxx"}');
    assert.throws(() => checkpointJson({ a: 'x'.repeat(100) }, 64), CheckpointError);
    assert.throws(() => checkpointJson(undefined, 64), CheckpointError);
    assert.throws(() => checkpointJson({ n: 1n }, 64), CheckpointError);
  });
});

describe('a lost worker (R-03)', () => {
  it("R-03: a step job locked by a worker whose liveness key is gone goes back to the queue; the task says its worker was lost; a live worker's job and a job of a worker without liveness keys stay", async () => {
    const prefix = `${PREFIX}:{jobs}`;
    const queue = new Queue('tools', { connection: redis, prefix });
    const recs = await Promise.all([1, 2, 3].map(() => store.create(input())));
    for (const r of recs) await queue.add('step', { taskId: r.taskId, step: 1 }, { jobId: stepJobId(r.taskId, 1) });
    // Three fetches by three "workers" (tokens `<workerId>:0`), without processing them.
    const conn = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
    const fetcher = new Worker('tools', null, { connection: conn, prefix, lockDuration: 30_000, autorun: false });
    const held: { job: Job; token: string }[] = [];
    for (const owner of ['dead', 'alive', 'old']) {
      const token = `${owner}-${PREFIX}:0`;
      const job = (await fetcher.getNextJob(token, { block: false })) as Job;
      assert.ok(job, 'a job was fetched');
      await store.claimStep(job.data.taskId, 1, token);
      held.push({ job, token });
    }
    await redis.set(aliveKnownKey(PREFIX, `dead-${PREFIX}`), '1', 'PX', 30_000); // wrote liveness, now gone
    await redis.set(aliveKnownKey(PREFIX, `alive-${PREFIX}`), '1', 'PX', 30_000);
    await redis.set(aliveKey(PREFIX, `alive-${PREFIX}`), '1', 'PX', 30_000);
    // WORKER_MAX_STALLED_COUNT=0: a dead worker's step is never run again; BullMQ's stall check
    // fails it once its lock lapses, so this check leaves it where it is.
    const never = await moveLostSteps({
      redis,
      keyPrefix: PREFIX,
      shards: [queue],
      checkpoints: cps,
      continuity: { unbrokenForMs: () => Infinity, away: false, stop() {} },
      lostAfterMs: 2500,
      maxStalledCount: 0,
      log: pino({ level: 'silent' }),
    });
    assert.equal(never, 0, 'nothing moved with WORKER_MAX_STALLED_COUNT=0');
    assert.equal(await held[0]!.job.getState(), 'active');
    const moved: string[] = [];
    const n = await moveLostSteps({
      redis,
      keyPrefix: PREFIX,
      shards: [queue],
      checkpoints: cps,
      continuity: { unbrokenForMs: () => Infinity, away: false, stop() {} },
      lostAfterMs: 2500,
      maxStalledCount: 1,
      log: pino({ level: 'silent' }),
      onMoved: (id) => moved.push(id),
    });
    assert.equal(n, 1);
    assert.deepEqual(moved, [held[0]!.job.id]);
    assert.equal(await held[0]!.job.getState(), 'delayed', 'due at once: the next fetch promotes it');
    assert.equal(await redis.exists(`${prefix}:tools:${held[0]!.job.id}:lock`), 0);
    assert.equal(await redis.hget(`${prefix}:tools:${held[0]!.job.id}`, 'stc'), '1', 'counted as a stall');
    assert.equal((await store.get(held[0]!.job.data.taskId))?.statusMessage, WORKER_LOST_MESSAGE);
    assert.equal(await held[1]!.job.getState(), 'active');
    assert.equal(await held[2]!.job.getState(), 'active');
    // Right after a Redis outage (continuity broken) nothing moves, whatever the keys say.
    await redis.del(aliveKey(PREFIX, `alive-${PREFIX}`));
    const during = await moveLostSteps({
      redis,
      keyPrefix: PREFIX,
      shards: [queue],
      checkpoints: cps,
      continuity: { unbrokenForMs: () => 1000, away: false, stop() {} },
      lostAfterMs: 2500,
      maxStalledCount: 1,
      log: pino({ level: 'silent' }),
    });
    assert.equal(during, 0);
    await fetcher.close();
    await queue.close();
    conn.disconnect();
  });
});
