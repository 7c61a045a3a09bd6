// @needs redis-server
/**
 * How the task store runs its Lua scripts (packages/task-store/src/scripts.ts): as plain
 * `EVALSHA` commands, with `EVAL` once when Redis answers `NOSCRIPT` — a fresh Redis, one whose
 * script cache was flushed, one restarted (data and scripts gone) — and no script defined on the
 * connection (ioredis would copy each onto every pipeline it builds). On a throwaway Redis: the
 * test flushes its script cache.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { TaskStore, type CreateTaskInput } from '@mcp-tasks/task-store';
import { startRedis, waitFor, type ThrowawayRedis } from '../support/cluster.js';

const PREFIX = 'scripts';

const input = (): CreateTaskInput => ({
  owner: 'alice',
  tool: 'echo',
  args: { text: 'hi' },
  mode: 'task',
  ttlMs: 60_000,
  pollIntervalMs: 1000,
});

/** `calls` of `EVAL` and `EVALSHA` so far (INFO commandstats). */
async function evalCalls(r: Redis): Promise<{ eval: number; evalsha: number }> {
  const info = await r.info('commandstats');
  const calls = (cmd: string) => Number(new RegExp(`^cmdstat_${cmd}:calls=(\\d+)`, 'm').exec(info)?.[1] ?? 0);
  return { eval: calls('eval'), evalsha: calls('evalsha') };
}

describe('task scripts: EVALSHA, and EVAL once when Redis does not know the script', () => {
  let server: ThrowawayRedis;
  let redis: Redis;
  let admin: Redis;
  let store: TaskStore;
  before(async () => {
    server = await startRedis();
    redis = new Redis(server.url, { maxRetriesPerRequest: 1 });
    admin = new Redis(server.url, { maxRetriesPerRequest: 1 });
    store = new TaskStore(redis, PREFIX);
  });
  after(async () => {
    redis?.disconnect();
    admin?.disconnect();
    await server?.stop();
  });

  it('the first call on a fresh Redis falls back to EVAL, later ones are one EVALSHA each; after SCRIPT FLUSH one EVAL again', async () => {
    const before = await evalCalls(admin);
    const first = await store.create(input());
    assert.equal((await store.get(first.taskId))?.status, 'working');
    const afterFirst = await evalCalls(admin);
    assert.equal(afterFirst.eval - before.eval, 1, 'NOSCRIPT → one EVAL');
    assert.equal(afterFirst.evalsha - before.evalsha, 1, 'the EVALSHA that Redis refused');

    for (let i = 0; i < 3; i++) await store.create(input());
    const warm = await evalCalls(admin);
    assert.deepEqual(warm, { eval: afterFirst.eval, evalsha: afterFirst.evalsha + 3 }, 'known script: EVALSHA only');

    await admin.script('FLUSH');
    const again = await store.create(input());
    assert.equal((await store.get(again.taskId))?.status, 'working');
    const flushed = await evalCalls(admin);
    assert.deepEqual(flushed, { eval: warm.eval + 1, evalsha: warm.evalsha + 1 });
  });

  it('a restarted Redis (data and scripts gone): the next script call works once the connection is back', async () => {
    await server.restart();
    await waitFor(
      async () => redis.status === 'ready' && admin.status === 'ready',
      10_000,
      50,
      'both connections back',
    );
    const rec = await store.create(input());
    assert.equal((await store.get(rec.taskId))?.status, 'working');
  });

  it('no script is defined on the connection: ioredis has nothing to copy onto its pipelines', () => {
    const defined = (redis as unknown as { scriptsSet: Record<string, unknown> }).scriptsSet;
    assert.deepEqual(Object.keys(defined), []);
    assert.ok(!Object.keys(redis.pipeline()).some((k) => k.startsWith('mcpTask_')));
  });
});
