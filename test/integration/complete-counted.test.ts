// @needs redis
/**
 * Integration tests of `ResultBudget.complete` (`completeCounted-8.lua`): a step's completion
 * with its result counted against the principal's budget, its outstanding slot released, its
 * checkpoint deleted and (without webhooks) its reconciler index entry dropped, in one script
 * (single Redis and Sentinel only; the worker never uses it under Cluster), against the real
 * shared Redis. Asserted: the same record, result key and budget as `complete` after
 * `reserveResultBytes`; a stale run's write (old fence) and a result over the budget write
 * nothing to the task, its slot, its checkpoint or the budget.
 *
 * Every key starts with this file's random prefix; only those keys are deleted at the end.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { Checkpoints, newTaskId, ResultBudget, TaskStore } from '@mcp-tasks/task-store';
import { deleteKeysUnder } from '../support/redis-keys.js';

const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const PREFIX = `unit-${randomBytes(8).toString('hex')}`;
const HOUR = 3_600_000;
const RECONCILE = { afterMs: 10_000, maxTtlMs: HOUR };

let redis: Redis;
let store: TaskStore;
let checkpoints: Checkpoints;

const principal = () => `key:alice-${randomBytes(4).toString('hex')}`;

/** A task of `owner` created with its slot and index entry, claimed, with a checkpoint: its fence. */
async function running(owner: string, taskId: string): Promise<string> {
  const input = { owner, tool: 'slow_echo', args: {}, mode: 'task' as const, ttlMs: HOUR, pollIntervalMs: 1000 };
  assert.equal((await store.createReserved(input, taskId, 10, RECONCILE)).ok, true);
  const claim = await store.claimStep(taskId, 1, 'token');
  assert.equal(claim.code, 'ok');
  const fence = (claim as { fence: string }).fence;
  assert.equal((await checkpoints.save(taskId, 1, fence, '{"at":1}')).code, 'ok');
  return fence;
}

const slotOf = async (owner: string, taskId: string) => redis.zscore(store.outstandingKeys(owner).outstanding, taskId);

before(async () => {
  redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
  store = new TaskStore(redis, PREFIX);
  checkpoints = new Checkpoints(store);
});

after(async () => {
  await deleteKeysUnder(redis, PREFIX);
  await redis.quit();
});

describe('ResultBudget.complete: completion, result budget, slot, checkpoint and index in one script', () => {
  it('completes, counts the bytes, releases the slot, deletes the checkpoint and drops the index entry', async () => {
    const owner = principal();
    const budget = new ResultBudget(store, 1000);
    const taskId = newTaskId();
    const fence = await running(owner, taskId);
    const json = '{"content":[{"type":"text","text":"done"}]}';
    const o = { checkpointKey: checkpoints.key(taskId), dropFromIndex: true };
    const r = await budget.complete(owner, taskId, fence, { json, bytes: json.length, statusMessage: 'Done' }, o);
    assert.deepEqual(r, { code: 'ok' });
    const rec = await store.get(taskId);
    assert.equal(rec?.status, 'completed');
    assert.equal(rec?.statusMessage, 'Done');
    assert.equal(await redis.get(store.resultKey(taskId)), json);
    const [recordTtl, resultTtl] = [await redis.pttl(store.key(taskId)), await redis.pttl(store.resultKey(taskId))];
    assert.ok(Math.abs(recordTtl - resultTtl) < 50, `result expires with the record (${recordTtl} / ${resultTtl})`);
    assert.equal(await budget.stored(owner), json.length);
    assert.equal(await slotOf(owner, taskId), null);
    assert.equal(await redis.exists(checkpoints.key(taskId)), 0);
    assert.equal(await redis.zscore(store.reconcileKey, taskId), null);
    // Every key it wrote expires.
    for (const k of Object.values(budget.keys(owner))) assert.ok((await redis.pttl(k)) > 0, k);
  });

  it('with webhooks (dropFromIndex false) the index entry stays for the reconciler', async () => {
    const owner = principal();
    const taskId = newTaskId();
    const fence = await running(owner, taskId);
    const o = { checkpointKey: checkpoints.key(taskId), dropFromIndex: false };
    const r = await new ResultBudget(store, 1000).complete(
      owner,
      taskId,
      fence,
      { json: '{}', bytes: 2, statusMessage: '' },
      o,
    );
    assert.equal(r.code, 'ok');
    assert.notEqual(await redis.zscore(store.reconcileKey, taskId), null);
  });

  it('a stale run (old fence) and a result over the budget write nothing', async () => {
    const owner = principal();
    const budget = new ResultBudget(store, 10);
    const taskId = newTaskId();
    const stale = await running(owner, taskId);
    const again = await store.claimStep(taskId, 1, 'token-2');
    assert.equal(again.code, 'ok');
    const fence = (again as { fence: string }).fence;
    const before = await redis.hgetall(store.key(taskId));
    const o = { checkpointKey: checkpoints.key(taskId), dropFromIndex: true };
    const fenced = await budget.complete(owner, taskId, stale, { json: '{}', bytes: 2, statusMessage: 'Done' }, o);
    assert.equal(fenced.code, 'fenced');
    const big = '{"text":"far too large"}';
    const over = await budget.complete(
      owner,
      taskId,
      fence,
      { json: big, bytes: big.length, statusMessage: 'Done' },
      o,
    );
    assert.equal(over.code, 'over_budget');
    assert.deepEqual(await redis.hgetall(store.key(taskId)), before);
    assert.equal(await redis.exists(store.resultKey(taskId)), 0);
    assert.notEqual(await slotOf(owner, taskId), null);
    assert.equal(await redis.exists(checkpoints.key(taskId)), 1);
    assert.notEqual(await redis.zscore(store.reconcileKey, taskId), null);
    assert.equal(await budget.stored(owner), 0);
    assert.equal(await redis.exists(budget.keys(owner).members), 0);
  });
});
