// @needs redis
/**
 * The reconciler's orphan check after a Redis outage (issue 9 §6, apps/worker/src/reconcile.ts
 * with redis-continuity.ts): a synchronous call whose hold lapsed only because nobody could
 * renew it while Redis was away is left alone until Redis has been back for a whole
 * SYNC_HOLDER_TIMEOUT_MS; after that, a hold still not renewed is an orphan and is cancelled
 * (C-01). Real Redis (the shared one, own prefix), no processes.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { createLogger } from '@mcp-tasks/observability';
import { TaskStore } from '@mcp-tasks/task-store';
import { JobQueues } from '@mcp-tasks/jobs';
import { reconcileOnce } from '../../apps/worker/src/reconcile.js';
import { deleteKeysUnder } from '../support/redis-keys.js';

const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const PREFIX = `unit-${randomBytes(8).toString('hex')}`;
const HOLD_MS = 3000;

describe('reconciler orphan check and Redis continuity (issue 9 §6)', () => {
  let redis: Redis;
  let store: TaskStore;
  let queues: JobQueues;
  before(() => {
    redis = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
    store = new TaskStore(redis, PREFIX);
    queues = new JobQueues(redis, PREFIX, 120_000);
  });
  after(async () => {
    await queues.close();
    await deleteKeysUnder(redis, PREFIX);
    redis.disconnect();
  });

  /** A held synchronous call, running, whose holder last renewed at `heldAt`. */
  async function heldCall(heldAt: number): Promise<string> {
    const rec = await store.create(
      {
        owner: 'key:alice',
        tool: 'slow_echo',
        args: { seconds: 60 },
        mode: 'sync',
        ttlMs: 120_000,
        pollIntervalMs: 1000,
      },
      undefined,
      heldAt,
    );
    assert.equal(await store.renewHolder(rec.taskId, 1, heldAt), 1);
    assert.equal((await store.claimStep(rec.taskId, 1, 'tok', heldAt)).code, 'ok');
    await store.scheduleReconcile(rec.taskId, 0, 120_000, heldAt);
    return rec.taskId;
  }
  const deps = (unbrokenForMs: number) => ({
    store,
    queues,
    log: createLogger('test', 'silent'),
    afterMs: 60_000,
    inputTimeoutMs: 60_000,
    syncHolderTimeoutMs: HOLD_MS,
    maxTtlMs: 120_000,
    continuity: { unbrokenForMs: () => unbrokenForMs },
  });

  it('a lapsed hold is not cancelled while Redis has been back less than one hold period, and is once it has', async () => {
    const now = Date.now();
    // The holder last renewed 12 s ago: Redis was away for that long.
    const taskId = await heldCall(now - 12_000);
    const soon = await reconcileOnce(deps(500), now);
    assert.equal(soon.cancelled, 0, 'Redis back for 0.5 s: the hold gets its grace');
    assert.equal((await store.get(taskId))!.status, 'working');
    // Its holder never came back: after one hold period of Redis, it is an orphan.
    const later = await reconcileOnce(deps(HOLD_MS + 1), now + HOLD_MS);
    assert.equal(later.cancelled, 1);
    const rec = await store.get(taskId);
    assert.ok(rec!.cancelRequested || rec!.status === 'cancelled', JSON.stringify(rec));
  });

  it('a holder that renews within the grace keeps its call', async () => {
    const now = Date.now();
    const taskId = await heldCall(now - 12_000);
    await reconcileOnce(deps(200), now);
    assert.equal((await store.get(taskId))!.cancelRequested, false, 'in the grace');
    await store.renewHolder(taskId, 0, now + 300); // the gateway, reconnected
    await reconcileOnce(deps(HOLD_MS + 1), now + HOLD_MS);
    const rec = (await store.get(taskId))!;
    assert.equal(rec.cancelRequested, false, 'renewed: not an orphan');
    assert.equal(rec.status, 'working');
  });
});
