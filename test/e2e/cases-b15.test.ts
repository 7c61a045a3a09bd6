// @needs redis redis-server
/**
 * Case B-15 (shared/cases/cases.md), each part on its own throwaway `redis-server`, real processes:
 *  (a) memory returns to its baseline after the TTL: a CI-sized run (1,000 `slow_echo` tasks
 *      returning 100 KB each, TASK_TTL_MS 60 s) records used_memory (and the part connection
 *      buffers hold, which is not retained data: see `memory`) and DBSIZE at baseline, at peak and
 *      after the TTL + grace; task records and result keys expire, BullMQ's finished
 *      jobs are removed by age (the reconciler's clean pass), the events stream is capped (the
 *      case's full size, 50,000 tasks, needs about 5.5 GB of Redis at its peak: not run here);
 *  (b) a Redis whose `maxmemory-policy` may evict keys (here `allkeys-lru`) can lose BullMQ locks
 *      and task records, so gateways and workers refuse readiness with a reason naming the policy
 *      (and log it at start), and become ready once the policy is `noeviction` (re-read at most
 *      every 5 s);
 *  (c) a full Redis (`noeviction`, writes refused with OOM): tools/call answers a fast JSON-RPC
 *      error (-32603, HTTP 503, no Redis text) and leaves no partial task; existing tasks stay
 *      readable.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { startCluster, startRedis, sleep, waitFor, type Cluster, type ThrowawayRedis } from '../support/cluster.js';
import { callTool, getTask, pollTask } from '../support/mcp.js';

const usedMemory = async (r: Redis) => Number(/^used_memory:(\d+)/m.exec(await r.info('memory'))![1]);

/**
 * `used_memory` and the part of it that connections hold (the sum of CLIENT LIST's `tot-mem`: each
 * connection's query and output buffers), read in one MULTI; `held` is the rest, what Redis keeps
 * whoever is connected. Case B-15 (a) compares `held`: connection buffers are not retained data and
 * swing by hundreds of KB on a 2.5 MB baseline (a new connection holds ~38 KB; a 100 KB result write
 * grows its connection's query buffer until Redis's cron shrinks it), and Redis 7.0's MEMORY STATS
 * counts them late in `clients.normal`, so they land in `dataset.bytes` meanwhile.
 */
async function memory(r: Redis): Promise<{ used: number; clients: number; held: number }> {
  const [[, info], [, list]] = (await r.multi().info('memory').client('LIST').exec()) as [
    [null, string],
    [null, string],
  ];
  const used = Number(/^used_memory:(\d+)/m.exec(info)![1]);
  const clients = [...list.matchAll(/ tot-mem=(\d+)/g)].reduce((sum, m) => sum + Number(m[1]), 0);
  return { used, clients, held: used - clients };
}
const mb = (b: number) => (b / 1e6).toFixed(2);

/** Every key of `r` matching `pattern` (SCAN). */
async function scanAll(r: Redis, pattern: string): Promise<string[]> {
  const out: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await r.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    out.push(...keys);
  } while (cursor !== '0');
  return out;
}

describe('case B-15 (b): readiness refuses an evicting Redis policy', () => {
  let r: ThrowawayRedis;
  let c: Cluster;
  before(async () => {
    r = await startRedis(['--maxmemory', '256mb', '--maxmemory-policy', 'allkeys-lru']);
    c = await startCluster({ gateways: 1, workers: 1, redisUrl: r.url });
  });
  after(async () => {
    await c?.stop();
    await r?.stop();
  });

  it('gateway and worker /readyz answer 503 naming allkeys-lru, then 200 after CONFIG SET noeviction', async () => {
    const gatewayReady = c.urls[0]!.replace(/\/mcp$/, '/readyz');
    const workerReady = `${c.workers[0]!.opsUrl}/readyz`;
    for (const url of [gatewayReady, workerReady]) {
      const res = await fetch(url);
      const body = (await res.json()) as { reason?: string };
      assert.equal(res.status, 503, url);
      assert.match(body.reason ?? '', /maxmemory-policy is allkeys-lru/);
      assert.match(body.reason ?? '', /noeviction/);
    }
    assert.ok(
      c.gateways[0]!.logs.some(
        (l) => String(l.msg).startsWith('redis.eviction_policy_unsafe') && l.policy === 'allkeys-lru',
      ),
    );
    const admin = new Redis(r.url);
    try {
      await admin.config('SET', 'maxmemory-policy', 'noeviction');
    } finally {
      admin.disconnect();
    }
    for (const url of [gatewayReady, workerReady]) {
      await waitFor(async () => (await fetch(url)).status === 200, 8000, 200, `${url} ready`);
    }
  });
});

describe('case B-15 (a): after the TTL, Redis memory is back within 10 % of its baseline (CI size: 1,000 tasks of 100 KB)', () => {
  const TASKS = 1000;
  // Long enough for 1,000 creations on a loaded machine to end well before the first task expires.
  const TTL_MS = 60_000;
  // slow_echo's result carries its text three times (content, structuredContent.summary and .text): ~100 KB.
  const TEXT = 'x'.repeat(33_400);
  let r: ThrowawayRedis;
  let c: Cluster;
  before(async () => {
    // Redis's own diagnostics are off here, so used_memory measures data. Both are bounded, yet
    // on a ~1.3 MB baseline they read as growth (measured: case B-15 (a) failed in CI by them):
    // - Redis 7 keeps a latency histogram (~25 KB) per command name from its first call until
    //   CONFIG RESETSTAT; each command first used after the baseline (a clean pass's
    //   ZREMRANGEBYSCORE, say) adds one: ~1.1 MB at the baseline, +250 KB by the end;
    // - the slowlog keeps up to 128 commands slower than 10 ms, ~1.5 KB each: 46-53 of them
    //   (~75 KB) after 1,000 100 KB writes with two test runs at once.
    r = await startRedis([
      '--maxmemory-policy',
      'noeviction',
      '--latency-tracking',
      'no',
      '--slowlog-log-slower-than',
      '-1',
    ]);
    c = await startCluster({
      gateways: 1,
      workers: 1,
      redisUrl: r.url,
      env: { TASK_TTL_MS: String(TTL_MS), WORKER_CONCURRENCY: '100' },
    });
  });
  after(async () => {
    await c?.stop();
    await r?.stop();
  });

  it(
    'used_memory and DBSIZE at baseline, peak and after ttlMs + grace; tasks/get on a purged id is -32602 "expired"',
    { timeout: 240_000 },
    async () => {
      const admin = c.redis;
      // Baseline: the processes' own keys (queue meta, the reconciler's schedule, heartbeats) are
      // written, and one task ran, so Redis has loaded every script a task runs (its Lua cache
      // grows on first use) and the queue's structures exist; that task's own keys (~2 KB) are
      // in the baseline and expire before the end.
      const url = c.urls[0]!;
      const warm = await callTool(url, 'slow_echo', { seconds: 0, quiet: true, text: 'warm-up' });
      await pollTask(
        () => url,
        warm.body.result!.taskId as string,
        (t) => t.status === 'completed',
      );
      await sleep(1500);
      const base = { ...(await memory(admin)), keys: await admin.dbsize() };
      const stats = async () => {
        const flat = (await admin.call('MEMORY', 'STATS')) as unknown[];
        const out: Record<string, number> = {};
        for (let i = 0; i + 1 < flat.length; i += 2)
          if (typeof flat[i + 1] === 'number') out[String(flat[i])] = flat[i + 1] as number;
        return out;
      };
      const baseStats = await stats();
      const baseKeys = new Set(await scanAll(admin, '*'));

      // Every task's end is announced on its channel (a hint, but the record is written first).
      const sub = new Redis(r.url);
      const finished = new Set<string>();
      sub.on('pmessage', (_p: string, channel: string, msg: string) => {
        if (msg === 'completed' || msg === 'failed') finished.add(channel.slice(`${c.prefix}:task:`.length));
      });
      await sub.psubscribe(`${c.prefix}:task:*`);
      const firstCreated = Date.now();
      const ids: string[] = [];
      let next = 0;
      await Promise.all(
        Array.from({ length: 20 }, async () => {
          while (next < TASKS) {
            next++;
            const res = await callTool(url, 'slow_echo', { seconds: 0, quiet: true, text: TEXT });
            assert.equal(res.body.result?.resultType, 'task', JSON.stringify(res.body).slice(0, 300));
            ids.push(res.body.result!.taskId as string);
          }
        }),
      );
      const lastCreated = Date.now();
      // Peak: every task finished (its 100 KB result stored), none expired yet.
      await waitFor(() => ids.every((id) => finished.has(id)), 60_000, 250, 'every task to finish').finally(() =>
        sub.disconnect(),
      );
      const peak = { ...(await memory(admin)), keys: await admin.dbsize() };
      assert.ok(
        Date.now() < firstCreated + TTL_MS,
        `the peak was read before any task could expire (creations took ${lastCreated - firstCreated} ms)`,
      );
      assert.equal(
        await admin.exists(...ids.map((id) => `${c.prefix}:{t:${id}}:result`)),
        TASKS,
        'every result is stored',
      );
      const resultBytes = await admin.strlen(`${c.prefix}:{t:${ids[0]}}:result`);
      assert.ok(resultBytes >= 100_000, `a result is ${resultBytes} B`);
      assert.ok(
        peak.held - base.held > TASKS * resultBytes,
        `peak holds the results: +${mb(peak.held - base.held)} MB`,
      );
      const sample = (await getTask(url, ids[0]!)).body.result!;
      assert.equal(sample.status, 'completed');
      assert.equal(sample.result.structuredContent.text.length, TEXT.length);

      // After the TTL + grace (reconciler pass every 1 s, BullMQ's age = the TTL).
      const grace = 10_000;
      await waitFor(
        async () => (await memory(admin)).held <= base.held * 1.1 && Date.now() > lastCreated + TTL_MS,
        TTL_MS + grace + 20_000,
        500,
        'memory back near its baseline',
      ).catch(async (e: Error) => {
        // Say what is left: the biggest keys.
        const left = await scanAll(admin, '*');
        const sized = await Promise.all(
          left.map(async (k) => [k, Number(await admin.call('MEMORY', 'USAGE', k, 'SAMPLES', '0'))] as const),
        );
        sized.sort((x, y) => y[1] - x[1]);
        const now = await stats();
        const grew = Object.entries(now)
          .map(([k, v]) => [k, v - (baseStats[k] ?? 0)] as const)
          .filter(([, d]) => Math.abs(d) > 4096);
        throw new Error(
          `${e.message}: MEMORY STATS deltas ${JSON.stringify(Object.fromEntries(grew))}; memory ${JSON.stringify(await memory(admin))} (baseline ${JSON.stringify(base)}), ${left.length} keys, biggest: ${sized
            .slice(0, 8)
            .map(([k, n]) => `${k} ${n} B`)
            .join(', ')}`,
        );
      });
      await sleep(Math.max(0, lastCreated + TTL_MS + grace - Date.now()));
      const end = { ...(await memory(admin)), keys: await admin.dbsize() };
      const drift = (end.held - base.held) / base.held;
      const endStats = await stats();
      const grew = Object.entries(endStats)
        .map(([k, v]) => [k, v - (baseStats[k] ?? 0)] as const)
        .filter(([, d]) => Math.abs(d) > 4096);
      const newKeys = (await scanAll(admin, '*')).filter((k) => !baseKeys.has(k));
      console.log(
        `case B-15 (a): MEMORY STATS deltas ${JSON.stringify(Object.fromEntries(grew))}; new keys ${newKeys.join(', ')}`,
      );
      console.log(
        `case B-15 (a): used_memory ${mb(base.used)} / ${mb(peak.used)} / ${mb(end.used)} MB, of which connections hold ${mb(base.clients)} / ${mb(peak.clients)} / ${mb(end.clients)} MB; the rest ${mb(base.held)} / ${mb(peak.held)} / ${mb(end.held)} MB (${(drift * 100).toFixed(1)} %), DBSIZE ${base.keys} / ${peak.keys} / ${end.keys}`,
      );
      assert.ok(
        drift <= 0.1,
        `used_memory net of connection buffers ${mb(end.held)} MB is within 10 % of the baseline ${mb(base.held)} MB`,
      );
      assert.ok(
        end.keys <= base.keys + 20,
        `DBSIZE ${end.keys} back near its baseline ${base.keys} (peak ${peak.keys})`,
      );
      assert.deepEqual(await scanAll(admin, `${c.prefix}:{t:*}`), [], 'no task key is left');
      assert.equal(
        await admin.zcard(`${c.prefix}:{jobs}:tools:completed`),
        0,
        'BullMQ removed the finished jobs by age',
      );
      assert.ok((await admin.xlen(`${c.prefix}:{jobs}:tools:events`)) < 400, 'the events stream is capped');

      const purged = await getTask(url, ids[ids.length - 1]!);
      assert.equal(purged.body.error?.code, -32602);
      assert.match(purged.body.error!.message, /expired/);
    },
  );
});

describe('case B-15 (c): a full Redis (noeviction) refuses tools/call fast, with no partial task; existing tasks stay readable', () => {
  let r: ThrowawayRedis;
  let c: Cluster;
  before(async () => {
    r = await startRedis(['--maxmemory', '64mb', '--maxmemory-policy', 'noeviction']);
    c = await startCluster({ gateways: 1, workers: 1, redisUrl: r.url });
  });
  after(async () => {
    await c?.stop();
    await r?.stop();
  });

  it('tools/call → -32603, HTTP 503 within milliseconds, no "OOM" in the answer, no task key or job written; tasks/get of an earlier task still answers', async () => {
    const url = c.urls[0]!;
    const admin = c.redis;
    const made = await callTool(url, 'slow_echo', { seconds: 0, quiet: true, text: 'before the fill' });
    const earlier = made.body.result!.taskId as string;
    assert.equal(
      (
        await pollTask(
          () => url,
          earlier,
          (t) => t.status === 'completed',
        )
      ).status,
      'completed',
    );

    // Fill: 4 MB of data (64 KB keys, so no big query buffer inflates used_memory), then
    // maxmemory 1 MB under what is used: a full Redis (with noeviction nothing can be freed,
    // so every write that may grow memory fails with OOM).
    const chunk = Buffer.alloc(64 * 1024, 120);
    for (let i = 0; i < 64; i++) await admin.set(`b15c:filler:${i}`, chunk);
    await sleep(200);
    await admin.config('SET', 'maxmemory', String((await usedMemory(admin)) - 1024 * 1024));
    await assert.rejects(admin.set('b15c:probe', '1'), /OOM/, 'writes now fail with OOM');
    const taskKeys = async () => (await scanAll(admin, `${c.prefix}:{t:*}`)).sort();
    const jobKeys = async () => (await scanAll(admin, `${c.prefix}:{jobs}:tools:t.*`)).sort();
    const before = {
      tasks: await taskKeys(),
      jobs: await jobKeys(),
      reconcile: await admin.zcard(`${c.prefix}:tasks:reconcile`),
    };

    const times: number[] = [];
    for (let i = 0; i < 5; i++) {
      const t0 = performance.now();
      const res = await callTool(url, 'slow_echo', { seconds: 0, quiet: true, text: `after the fill ${i}` });
      times.push(performance.now() - t0);
      assert.equal(res.status, 503, JSON.stringify(res.body));
      assert.equal(res.body.error?.code, -32603);
      assert.equal(res.body.error?.message, 'Task store unavailable; retry later');
      assert.doesNotMatch(
        JSON.stringify(res.body),
        /OOM|maxmemory|command not allowed/i,
        'no Redis error text in the answer',
      );
      assert.ok(res.headers.get('retry-after'), 'Retry-After');
    }
    await c.gateways[0]!.waitLog((l) => l.msg === 'task.reserve_failed' && /OOM/.test(String(l.err)));
    console.log(
      `case B-15 (c): tools/call on a full Redis answered in ${times.map((t) => t.toFixed(1)).join(', ')} ms`,
    );
    assert.ok(Math.min(...times) < 100, `fast: ${times.map((t) => t.toFixed(1)).join(', ')} ms`);

    assert.deepEqual(await taskKeys(), before.tasks, 'no task key written');
    assert.deepEqual(await jobKeys(), before.jobs, 'no job written');
    assert.equal(await admin.zcard(`${c.prefix}:tasks:reconcile`), before.reconcile, 'nothing indexed');

    const still = await getTask(url, earlier);
    assert.equal(still.status, 200);
    assert.equal(still.body.result?.status, 'completed', JSON.stringify(still.body));
    assert.equal(still.body.result?.result.structuredContent.text, 'before the fill');
  });
});
