// @needs redis redis-server
/**
 * Case N-09 (results part) and issue 10 §4: a stored result is bounded by MAX_RESULT_BYTES
 * (default 1 MiB of serialized JSON) and stored once, in the task record: never also as the
 * BullMQ job's return value or in BullMQ's events stream. A result holding a Node `Buffer` is
 * refused with a clear error (JSON would store it as a list of numbers, bullmq #2397).
 *
 * Real processes (1 gateway, unchanged, and 1 worker) on a throwaway
 * `redis-server --maxmemory 64mb --maxmemory-policy noeviction`, so a result stored where it
 * should not be shows up as OOM errors, not as silent growth. The `testing` tool `big_result`
 * returns a result of the requested size with a tiny argument.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { startCluster, startRedis, waitFor, type Cluster, type ThrowawayRedis } from '../support/cluster.js';
import { callTool, getTask, isTerminal, pollTask } from '../support/mcp.js';

const LIMIT = 1_048_576; // MAX_RESULT_BYTES default
const MB = 1024 * 1024;

let r: ThrowawayRedis;
let c: Cluster;
let redis: Redis;

const jobKey = (taskId: string) => `${c.prefix}:{jobs}:tools:t.${taskId}.1`;
const eventsKey = () => `${c.prefix}:{jobs}:tools:events`;
const taskKey = (taskId: string) => `${c.prefix}:{t:${taskId}}:task`;

/** Starts `big_result` as a task through the gateway and waits for its end; returns the final tasks/get. */
async function runTask(args: Record<string, unknown>): Promise<{ taskId: string; final: Record<string, any> }> {
  const res = await callTool(c.urls[0]!, 'big_result', args);
  assert.equal(res.body.result?.resultType, 'task', JSON.stringify(res.body).slice(0, 300));
  const taskId = res.body.result!.taskId as string;
  const final = await pollTask(
    () => c.urls[0]!,
    taskId,
    (t) => isTerminal(t.status),
    60_000,
    100,
  );
  return { taskId, final };
}

/** The longest field value of any entry of the queue's events stream (bytes). */
async function longestEventField(): Promise<number> {
  const rows = (await redis.xrange(eventsKey(), '-', '+')) as [string, string[]][];
  return Math.max(0, ...rows.flatMap(([, fields]) => fields.map((f) => Buffer.byteLength(f))));
}

/**
 * The task's BullMQ job hash once BullMQ has finished the job (`finishedOn` set by
 * moveToFinished). The worker writes the terminal task record first, so tasks/get can report
 * the end before the job hash has its returnvalue (seen with npm test run twice at once).
 */
async function finishedJob(taskId: string): Promise<Record<string, string>> {
  return waitFor(
    async () => {
      const job = await redis.hgetall(jobKey(taskId));
      return job.finishedOn ? job : undefined;
    },
    15_000,
    50,
    `job ${jobKey(taskId)} finished`,
  );
}

before(async () => {
  r = await startRedis(['--maxmemory', '64mb', '--maxmemory-policy', 'noeviction']);
  // The worker's job locks as shipped (15 s, stalled check every 5 s), not the test profile's
  // 4 s / 2 s (there to make stall tests quick): "no lock error" is a claim about the shipped
  // settings. 20 concurrent 5 MB results mean building, serializing and measuring 100 MB of
  // JSON on the worker's one thread; with the whole suite run twice at once, a 4 s lock lapsed
  // before moveToFinished ("Missing lock"), which says nothing about large results.
  c = await startCluster({
    redisUrl: r.url,
    gateways: 1,
    workers: 1,
    env: { WORKER_LOCK_DURATION_MS: '15000', WORKER_STALLED_INTERVAL_MS: '5000' },
  });
  redis = new Redis(r.url, { maxRetriesPerRequest: 1 });
});

after(async () => {
  redis?.disconnect();
  await c?.stop();
  await r?.stop();
});

describe('N-09: a stored result is bounded by MAX_RESULT_BYTES and stored once', () => {
  it('5 MB and 20 MB results end the task failed with -32603 naming the size and the limit; nothing of them is stored anywhere', async () => {
    for (const bytes of [5 * MB, 20 * MB]) {
      const { taskId, final } = await runTask({ bytes });
      assert.equal(final.status, 'failed');
      assert.equal(final.error.code, -32603);
      const m = /^Result too large: tool big_result returned (\d+) bytes of JSON; the limit is (\d+) bytes$/.exec(
        final.error.message,
      );
      assert.ok(m, final.error.message);
      assert.ok(
        Number(m[1]) > bytes && Number(m[1]) < bytes + 200,
        `reported size ${m[1]} for a ${bytes}-character text`,
      );
      assert.equal(Number(m[2]), LIMIT);
      assert.deepEqual(final.error.data, { reason: 'result_too_large', bytes: Number(m[1]), limitBytes: LIMIT });
      assert.ok(final.statusMessage.length <= 200);
      assert.equal(await redis.hexists(taskKey(taskId), 'result'), 0, 'no result in the record');
      assert.ok(Number(await redis.memory('USAGE', taskKey(taskId))) < 16 * 1024, 'the record stays small');
      assert.equal((await finishedJob(taskId)).returnvalue, '"failed"', 'the job returns a status word');
    }
    assert.ok((await longestEventField()) < 1024, 'no event carries a result');
  });

  it("a result just under the limit completes and is stored once: in the task's result key, not in the record, the job hash or the events stream", async () => {
    const bytes = LIMIT - 200;
    const { taskId, final } = await runTask({ bytes });
    assert.equal(final.status, 'completed', JSON.stringify(final.error ?? {}));
    assert.equal(final.result.content[0].text.length, bytes, 'tasks/get returns the whole result');
    const stored = await redis.get(taskKey(taskId).replace(/:task$/, ':result'));
    assert.ok(stored && Buffer.byteLength(stored) <= LIMIT && Buffer.byteLength(stored) > bytes);
    assert.equal(await redis.hexists(taskKey(taskId), 'result'), 0, 'not in the record');
    assert.equal(await redis.call('OBJECT', 'ENCODING', taskKey(taskId)), 'listpack', 'the finished record is small');
    const job = await finishedJob(taskId);
    assert.equal(job.returnvalue, '"completed"');
    assert.ok(
      Object.values(job).every((v) => Buffer.byteLength(v) < 1024),
      'no field of the job hash carries the result',
    );
    assert.ok((await longestEventField()) < 1024, 'no event carries the result');
  });

  it('a Buffer result (5 MB, and 1 kB) is refused with a clear error instead of being stored as a list of numbers', async () => {
    for (const bytes of [5 * MB, 1000]) {
      const { taskId, final } = await runTask({ bytes, kind: 'buffer' });
      assert.equal(final.status, 'failed');
      assert.equal(final.error.code, -32603);
      assert.match(
        final.error.message,
        /^Tool big_result returned binary data \(a Buffer in field "text"\); results must be JSON text: send binary content as base64/,
      );
      assert.deepEqual(final.error.data, { reason: 'binary_result' });
      assert.equal(await redis.hexists(taskKey(taskId), 'result'), 0);
    }
  });

  it('a synchronous call gets the same JSON-RPC error (-32603, size and limit)', async () => {
    const res = await callTool(c.urls[0]!, 'big_result', { bytes: 2 * MB }, { tasks: false });
    assert.equal(res.body.error?.code, -32603, JSON.stringify(res.body).slice(0, 300));
    assert.match(
      res.body.error!.message,
      /^Result too large: tool big_result returned \d+ bytes of JSON; the limit is 1048576 bytes$/,
    );
  });

  it('20 concurrent 5 MB results leave Redis far from its 64 MB limit, with no OOM or lock error on the worker', async () => {
    const ids = await Promise.all(
      Array.from({ length: 20 }, async () => {
        const res = await callTool(c.urls[0]!, 'big_result', { bytes: 5 * MB });
        return res.body.result!.taskId as string;
      }),
    );
    for (const id of ids) {
      const t = await pollTask(
        () => c.urls[0]!,
        id,
        (x) => isTerminal(x.status),
        120_000,
        200,
      );
      assert.equal(t.status, 'failed');
    }
    const info = await redis.info('memory');
    const peak = Number(/used_memory_peak:(\d+)/.exec(info)![1]);
    assert.ok(peak < 32 * MB, `used_memory_peak ${(peak / MB).toFixed(1)} MB`);
    const worker = c.workers[0]!;
    const bad = worker.logs.filter((l) => /OOM|lockRenewalFailed|lock-lost|Missing lock/i.test(JSON.stringify(l)));
    assert.deepEqual(bad, [], 'no OOM or lock trouble on the worker');
    // Every task is still readable (nothing was evicted or half written).
    for (const id of ids) assert.equal((await getTask(c.urls[0]!, id)).body.result?.status, 'failed');
  });
});
