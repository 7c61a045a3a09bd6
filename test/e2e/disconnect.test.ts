// @needs redis
/**
 * C-01/C-02 (spec §2.5, §8): closing the SSE response of a synchronous call cancels it, the
 * tool's AbortSignal fires at once on the worker and its side effect never happens; a task
 * handle (JSON answer to a client that declares the Tasks extension) is not cancelled by the
 * client closing its connection afterwards (spec §2.5: tasks are not cancelled by disconnects).
 *
 * `side_effect(marker, delaySeconds)` (testing tool set) writes `<dir>/<marker>.started` when it
 * starts, `<marker>.aborted` (unix ms) when its AbortSignal fires and `<marker>` after the delay.
 * Also measures disconnect → AbortSignal over 20 runs (console.log: median / p99).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import { sleep, startCluster, waitFor, type Cluster } from '../support/cluster.js';
import { pollTask } from '../support/mcp.js';
import { sseCall, type SseCall } from '../support/sse.js';

/** Log lines that would mean a write on a finished / closed response. */
const WRITE_ERRORS =
  /headers already sent|write after end|ERR_STREAM_WRITE_AFTER_END|ERR_HTTP_HEADERS_SENT|ERR_STREAM_DESTROYED/i;

const call = (url: string, name: string, args: Record<string, unknown>, o: Parameters<typeof sseCall>[3] = {}) =>
  sseCall(url, 'tools/call', { name, arguments: args }, o);

const pct = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;

describe(
  'C-01: a closed request stream cancels the call; a delivered task handle does not',
  { concurrency: true },
  () => {
    let c: Cluster;
    let dir: string;
    let queue: Queue;
    before(async () => {
      dir = mkdtempSync(join(tmpdir(), 'mcp-side-effect-'));
      c = await startCluster({ gateways: 2, workers: 2, env: { TESTING_SIDE_EFFECT_DIR: dir } });
      const u = new URL(c.redisUrl);
      queue = new Queue('tools', {
        connection: { host: u.hostname, port: Number(u.port || 6379), maxRetriesPerRequest: null },
        prefix: `${c.prefix}:{jobs}`,
      });
    });
    after(async () => {
      await queue?.close();
      const logs = [...c.gateways, ...c.workers]
        .flatMap((p) => p.logs)
        .filter((l) => WRITE_ERRORS.test(JSON.stringify(l)));
      await c?.stop();
      rmSync(dir, { recursive: true, force: true });
      assert.deepEqual(logs, [], 'no process logged a write on a closed response');
    });

    const file = (name: string) => join(dir, name);
    const readMs = (name: string) => Number(readFileSync(file(name), 'utf8'));

    /** The task record of the side_effect call with this marker (sync calls never show their id). */
    async function taskOf(marker: string): Promise<(Record<string, string> & { taskId: string }) | undefined> {
      for (const k of (await c.keys()).filter((k) => k.endsWith(':task'))) {
        const h = await c.redis.hgetall(k);
        if (h.tool === 'side_effect' && h.args && JSON.parse(h.args).marker === marker)
          return { ...h, taskId: /\{t:([^}]+)\}/.exec(k)![1]! } as Record<string, string> & { taskId: string };
      }
      return undefined;
    }

    /**
     * Starts side_effect(marker, delay) synchronously, closes the stream `closeAfterMs` after its
     * first byte (not before the tool started), and returns the close time and the abort time.
     */
    async function closeMidway(url: string, marker: string, delaySeconds: number, closeAfterMs: number) {
      const s: SseCall = call(url, 'side_effect', { marker, delaySeconds }, { tasks: false });
      const head = await s.response;
      assert.equal(head.status, 200);
      assert.match(String(head.headers['content-type']), /^text\/event-stream/);
      const first = await s.waitFrame(() => true, 5000);
      // Written by another process: the file can exist a moment before its content does.
      const written = (name: string) => existsSync(file(name)) && readFileSync(file(name), 'utf8') !== '';
      await waitFor(() => written(`${marker}.started`), 5000, 10, `${marker}.started`);
      await sleep(Math.max(0, first.at + closeAfterMs - Date.now()));
      const closedAt = Date.now();
      s.close();
      const d = await s.done;
      assert.equal(d.how, 'closed');
      await waitFor(() => written(`${marker}.aborted`), 5000, 5, `${marker}.aborted (the tool's AbortSignal)`);
      return { s, closedAt, abortedAt: readMs(`${marker}.aborted`), startedAt: readMs(`${marker}.started`) };
    }

    it('C-01/C-02: side_effect(20 s) closed 2 s after the first byte → AbortSignal < 1 s later, no side effect (checked at 22 s), task cancelled, no active BullMQ job, no write errors', async () => {
      const marker = 'c01-main';
      const { s, closedAt, abortedAt, startedAt } = await closeMidway(c.urls[0]!, marker, 20, 2000);
      const latency = abortedAt - closedAt;
      console.log(`C-01: close → AbortSignal ${latency} ms`);
      assert.ok(latency >= 0 && latency < 1000, `AbortSignal ${latency} ms after the close`);
      assert.ok(!s.final(), 'no result on the closed stream');

      const task = (await taskOf(marker))!;
      assert.ok(task, 'task record found');
      assert.equal(task.mode, 'sync');
      const final = await waitFor(
        async () => {
          const h = await c.redis.hgetall(`${c.prefix}:{t:${task.taskId}}:task`);
          return h.status !== 'working' ? h : undefined;
        },
        3000,
        20,
        'the task to leave working',
      );
      assert.equal(final.status, 'cancelled', JSON.stringify(final));
      assert.ok(!final.result);
      assert.ok(
        c.gateways[0]!.logs.some((l) => l.msg === 'sync.disconnected' && l.taskId === task.taskId),
        'the holding gateway saw the disconnect',
      );

      const jobId = `t.${task.taskId}.1`;
      await waitFor(async () => (await queue.getJobState(jobId)) !== 'active', 3000, 50, 'the job to leave active');
      assert.ok(
        !(await c.redis.lrange(`${c.prefix}:{jobs}:tools:active`, 0, -1)).includes(jobId),
        'not in the active list',
      );
      assert.ok(!(await queue.getJobs(['active'])).some((j) => j.id === jobId));

      // The side effect never happens: wait past its due time (start + 20 s) with a margin.
      await sleep(Math.max(0, startedAt + 22_000 - Date.now()));
      assert.ok(!existsSync(file(marker)), 'the side effect was never written');
      assert.equal(await c.redis.hget(`${c.prefix}:{t:${task.taskId}}:task`, 'status'), 'cancelled', 'still cancelled');
      assert.ok(!c.workers.some((w) => w.logs.some((l) => l.msg === 'step.completed' && l.taskId === task.taskId)));
    });

    it('§2.5: a client that declares tasks gets a JSON handle; closing its connection after receiving it does NOT cancel the task (it completes, the side effect happens)', async () => {
      const marker = 'c01-json';
      const s = call(c.urls[1]!, 'side_effect', { marker, delaySeconds: 3 });
      // Close the moment the first body bytes arrive.
      await waitFor(() => s.raw().length > 0, 5000, 1, 'the handle');
      s.close();
      await s.done;
      await sleep(50);
      const body = JSON.parse(s.raw());
      assert.equal(body.result?.resultType, 'task', s.raw());
      const taskId = body.result.taskId as string;
      const done = await pollTask(
        () => c.urls[0]!,
        taskId,
        (t) => t.status !== 'working',
        10_000,
        200,
      );
      assert.equal(done.status, 'completed', JSON.stringify(done));
      assert.equal(done.result?.content?.[0]?.text, `side effect ${marker} written`);
      assert.ok(existsSync(file(marker)), 'the side effect happened');
      assert.ok(!existsSync(file(`${marker}.aborted`)), 'its AbortSignal never fired');
      assert.ok(
        !c.gateways[1]!.logs.some((l) => l.msg === 'task.handle_undelivered' && l.taskId === taskId),
        'the handle counted as delivered',
      );
    });

    it('C-02: disconnect → AbortSignal over 20 runs (close at random 0.5-2 s), every one < 1 s, none writes its side effect', async () => {
      const lat: number[] = [];
      const starts: number[] = [];
      for (let batch = 0; batch < 4; batch++) {
        const runs = await Promise.all(
          Array.from({ length: 5 }, (_, i) =>
            closeMidway(c.urls[(batch + i) % 2]!, `c02-${batch}-${i}`, 20, 500 + Math.random() * 1500),
          ),
        );
        for (const r of runs) {
          lat.push(r.abortedAt - r.closedAt);
          starts.push(r.startedAt);
        }
      }
      const sorted = [...lat].sort((a, b) => a - b);
      console.log(
        `C-02: disconnect → AbortSignal over ${sorted.length} runs: median ${pct(sorted, 50)} ms, p99 ${pct(sorted, 99)} ms, min ${sorted[0]} ms (all: ${lat.join(', ')})`,
      );
      assert.ok(
        sorted.every((v) => v >= 0),
        `abort after the close: ${sorted.join(', ')}`,
      );
      assert.ok(pct(sorted, 99) < 1000, `p99 < 1 s: ${sorted.join(', ')}`);
      // Every task is cancelled and no side effect is ever written.
      for (let batch = 0; batch < 4; batch++) {
        for (let i = 0; i < 5; i++) {
          const t = await waitFor(
            async () => {
              const x = await taskOf(`c02-${batch}-${i}`);
              return x && x.status !== 'working' ? x : undefined;
            },
            3000,
            50,
            `c02-${batch}-${i} terminal`,
          );
          assert.equal(t.status, 'cancelled');
        }
      }
      await sleep(Math.max(0, Math.max(...starts) + 21_000 - Date.now()));
      for (let batch = 0; batch < 4; batch++)
        for (let i = 0; i < 5; i++)
          assert.ok(!existsSync(file(`c02-${batch}-${i}`)), `no side effect c02-${batch}-${i}`);
      assert.deepEqual(
        (await queue.getJobs(['active'])).map((j) => j.id),
        [],
        'no job left active',
      );
    });
  },
);
