// @needs redis
/**
 * The tools-queue shards (TOOL_QUEUE_SHARDS, issue 9 §7) against the real shared Redis (own
 * random key prefix, only its keys are deleted): `JobQueues` puts a task's jobs on shard
 * `toolShard(taskId, n)`, one shard is exactly the unsharded layout, and a job enqueued before
 * the shard count changed is still found by `stepState` (the reconciler must not call it lost).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { JobQueues, toolShard, toolsPrefix } from '@mcp-tasks/jobs';
import { deleteKeysUnder } from '../support/redis-keys.js';

const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const PREFIX = `unit-${randomBytes(8).toString('hex')}`;
let redis: Redis;
const opened: JobQueues[] = [];
const queues = (shards: number) => {
  const q = new JobQueues(redis, PREFIX, 120_000, () => undefined, shards);
  opened.push(q);
  return q;
};

before(() => {
  redis = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
});
after(async () => {
  for (const q of opened) await q.close();
  await deleteKeysUnder(redis, PREFIX);
  redis.disconnect();
});

/** A task id whose shard of `shards` is `want`. */
function idOnShard(shards: number, want: number): string {
  for (;;) {
    const id = randomUUID();
    if (toolShard(id, shards) === want) return id;
  }
}

describe('JobQueues with TOOL_QUEUE_SHARDS', () => {
  it('one shard: the step job is at <prefix>:{jobs}:tools, as before sharding', async () => {
    const q = queues(1);
    const id = randomUUID();
    await q.enqueueStep(id, 1);
    assert.equal(await redis.exists(`${PREFIX}:{jobs}:tools:t.${id}.1`), 1);
    assert.equal(await q.stepState(id, 1), 'prioritized');
  });

  it("three shards: step job and input timeout on the task's shard only; removed from there", async () => {
    const q = queues(3);
    const id = idOnShard(3, 2);
    await q.enqueueStep(id, 1);
    await q.scheduleInputTimeout(id, 1, 60_000);
    for (let i = 0; i < 3; i++) {
      assert.equal(await redis.exists(`${toolsPrefix(PREFIX, i)}:tools:t.${id}.1`), i === 2 ? 1 : 0, `shard ${i}`);
      assert.equal(
        await redis.exists(`${toolsPrefix(PREFIX, i)}:tools:t.${id}.1.timeout`),
        i === 2 ? 1 : 0,
        `timeout, shard ${i}`,
      );
    }
    await q.cancelInputTimeout(id, 1);
    assert.equal(await redis.exists(`${toolsPrefix(PREFIX, 2)}:tools:t.${id}.1.timeout`), 0);
  });

  it('a job queued before TOOL_QUEUE_SHARDS went from 1 to 3 is still found (not "unknown")', async () => {
    const id = idOnShard(3, 1); // its shard is 1 now, but with one shard it was queued on shard 0
    await queues(1).enqueueStep(id, 1);
    const q3 = queues(3);
    assert.equal(await q3.toolsFor(id).getJobState(`t.${id}.1`), 'unknown', 'not on its new shard');
    assert.equal(await q3.stepState(id, 1), 'prioritized');
    assert.equal(await q3.stepState(randomUUID(), 1), 'unknown', 'a job on no shard is unknown');
  });
});
