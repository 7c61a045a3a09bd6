/**
 * Gateway memory (issue 8 §5), read through the memory probe preloaded into the `hot` gateway
 * (bench/probe.mjs):
 *  - RSS and heap while 10,000 different tasks are polled (each request the next task id, every
 *    task polled once);
 *  - case N-13 (shared/cases/cases.md): mixed requests (`tools/list`, `tools/call` of an inline
 *    tool, `tools/call` creating a task, `tasks/get`) in batches of 5,000 (run.ts: 12 batches);
 *    after each, `SETTLE_MS` for its last requests to finish, a forced full GC and a `heapUsed`
 *    sample; the least-squares slope of heapUsed after the warm-up batches, in bytes per request.
 */
import { sleep } from '../test/support/cluster.js';
import type { BenchProcesses } from './processes.js';
import type { LoadResult } from './load.js';
import { benchRequest, createCountdown, tasksGet } from './requests.js';
import { round, slope } from './stats.js';

interface MemoryUsage {
  rss: number;
  heapUsed: number;
  heapTotal: number;
  /** Bytes used per V8 heap space (old_space, code_space, large_object_space, …). */
  spaces?: Record<string, number>;
}

async function probe(b: BenchProcesses, gc: boolean): Promise<MemoryUsage> {
  const res = await fetch(`${b.probeUrl}${gc ? '?gc=1' : ''}`);
  if (!res.ok) throw new Error(`memory probe: HTTP ${res.status}`);
  return (await res.json()) as MemoryUsage;
}

const mb = (bytes: number) => round(bytes / 1048576, 1);

export interface PolledFigure {
  tasks: number;
  load: LoadResult;
  /** MB, before the load (after a full GC) and the highest sample during it. */
  rssBefore: number;
  rssMax: number;
  heapUsedBefore: number;
  heapUsedMax: number;
  /** heapUsed after the load and a full GC (MB). */
  heapUsedAfterGc: number;
}

/** Polls each of `taskIds` `times` times (round-robin, 50 connections), sampling RSS and heap every 250 ms. */
export async function memoryWhilePolled(b: BenchProcesses, taskIds: string[], times: number): Promise<PolledFigure> {
  const before = await probe(b, true);
  const samples: MemoryUsage[] = [];
  let running = true;
  const sampler = (async () => {
    while (running) {
      samples.push(await probe(b, false));
      await sleep(250);
    }
  })();
  const load = await b.load({
    url: b.hot.url!,
    connections: 50,
    amount: taskIds.length * times,
    requests: [tasksGet(b.apiKey, taskIds[0]!)],
    taskIds,
  });
  running = false;
  await sampler;
  const after = await probe(b, true);
  return {
    tasks: taskIds.length,
    load,
    rssBefore: mb(before.rss),
    rssMax: mb(Math.max(...samples.map((s) => s.rss))),
    heapUsedBefore: mb(before.heapUsed),
    heapUsedMax: mb(Math.max(...samples.map((s) => s.heapUsed))),
    heapUsedAfterGc: mb(after.heapUsed),
  };
}

export interface HeapSlopeFigure {
  requests: number;
  /** heapUsed after each batch and a full GC (MB). */
  heapUsedMb: number[];
  rssMb: number[];
  /** Requests of the warm-up batches, left out of the fit. */
  warmupRequests: number;
  /** Fitted heap growth after the warm-up batches, bytes per request. */
  bytesPerRequest: number;
  /** The same over the run after warm-up (MB). */
  growthMb: number;
  failed: number;
}

/**
 * How long a batch's last requests get to finish before the GC and the sample (ms). Sampled at
 * once, heapUsed after GC jumped by 8-14 MB between batches (old space 30.7 <-> 44.8 MB, with
 * V8's bytecode flushing off too): what the batch still had in flight (sockets closing, answers
 * and log lines being written). After 1.5 s the samples stay within about 1.5 MB.
 */
const SETTLE_MS = 1500;

/**
 * Case N-13 on the `hot` gateway: `batches` × `perBatch` mixed requests at 20 connections; the
 * slope is fitted after the first `warmup` batches (a gateway that served nothing before fills
 * its bounded caches and JIT state over the first ~10,000 requests: about +10 MB, then flat).
 */
export async function heapSlope(
  b: BenchProcesses,
  taskId: string,
  batches: number,
  perBatch: number,
  warmup = 1,
): Promise<HeapSlopeFigure> {
  const k = b.apiKey;
  const requests = [
    benchRequest(k, 'tools/list', {}),
    benchRequest(k, 'tools/call', { name: 'add', arguments: { a: 1, b: 2 } }, 'add'),
    createCountdown(k),
    tasksGet(k, taskId),
  ];
  const heap: number[] = [];
  const rss: number[] = [];
  let failed = 0;
  for (let i = 0; i < batches; i++) {
    const r = await b.load({ url: b.hot.url!, connections: 20, amount: perBatch, requests });
    failed += r.errors + r.non2xx + r.mismatches;
    await sleep(SETTLE_MS);
    const m = await probe(b, true);
    heap.push(m.heapUsed);
    rss.push(m.rss);
    const sp = m.spaces ?? {};
    console.error(
      `  N-13 batch ${i + 1}/${batches}: ${r.rps} req/s, heapUsed after GC ${mb(m.heapUsed)} MB (old ${mb(sp.old_space ?? 0)}, code ${mb(sp.code_space ?? 0)}, large objects ${mb(sp.large_object_space ?? 0)}), RSS ${mb(m.rss)} MB`,
    );
  }
  const xs = heap.slice(warmup).map((_, i) => (i + warmup + 1) * perBatch);
  const perRequest = slope(xs, heap.slice(warmup));
  return {
    requests: batches * perBatch,
    warmupRequests: warmup * perBatch,
    heapUsedMb: heap.map(mb),
    rssMb: rss.map(mb),
    bytesPerRequest: round(perRequest, 2),
    growthMb: mb(perRequest * (batches - warmup) * perBatch),
    failed,
  };
}
