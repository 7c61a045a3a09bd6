/**
 * `npm run bench` (issue 8 §5, §6): one command that starts a throwaway Redis, real gateway and
 * worker processes (compiled JavaScript) and the helper processes (bench/processes.ts), then
 * measures every figure side by side with its ceiling in the same run, and prints a table
 * (figure | ours | ceiling | ratio | target | pass) and writes it as JSON.
 *
 * Order: with the worker running — commands per task (first, while Redis holds almost nothing
 * else), dispatch, cancel-to-terminal, progress relay, result after the completion, Redis bytes
 * per finished task; then the worker is stopped (nobody consumes the queue) — tasks/get (ours, ceiling, SDK path), creation (ours, ceiling), RSS and heap while
 * 10,000 tasks are polled, case N-13; last, with two workers of their own, the recovery figures
 * (a worker SIGKILLed or SIGTERMed under a running step, bench/recovery.ts).
 *
 * `--help` and `--version` answer without starting anything (scripts/entry-args.mjs); every
 * child dies with the benchmark, however it ends (bench/children.ts).
 *
 * Options (environment):
 *   BENCH_OUT      where the JSON goes (default bench/results/latest.json; also `--out <path>`)
 *   BENCH_ROUNDS   rounds per throughput figure (default 3; the median is reported)
 *   BENCH_ROUND_S  seconds per round (default 5)
 *   BENCH_ONLY     comma list of groups to run: dispatch,cancel,discover,progress,result,redis,get,create,memory,n13,recovery
 *   BENCH_RECOVERY_SAMPLES  kills and drains each for the recovery figures (default 10)
 *   BENCH_SDK_PATH 0 = the tasks/get figure leaves out the SDK path (HOT_PATH=false) target: with
 *                  BENCH_ONLY=get,create a run is the two target figures and their ceilings (~1 min)
 *   BENCH_CPU_PROF 1 = the hot gateway and the ceiling run with --cpu-prof; the gateway's top
 *                  self-time functions are printed at the end (with BENCH_ONLY=get: a profile of
 *                  the tasks/get load) and, with BENCH_ONLY=get or create, where a request costs
 *                  the gateway more than the ceiling, function by function, in µs per request
 *   BENCH_SLOWLOG  1 = with the redis group: Redis's SLOWLOG records every command, and the JSON
 *                  gets each script's calls, commands and µs (redis-stats.ts `slowlogProfile`)
 * Exit code 1 only when a figure could not be measured; a missed target is a FAIL row.
 */
import { mkdirSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { ROOT } from '../scripts/build.mjs';
import { entryArgs } from '../scripts/entry-args.mjs';
import { callTool, rpc } from '../test/support/mcp.js';
import { startBench, PREFIX, type BenchProcesses } from './processes.js';
import { alternate, type Summary } from './throughput.js';
import {
  cancelToTerminal,
  dispatch,
  progressRelay,
  resultAfterCompletion,
  type CancelFigure,
  type DispatchFigure,
} from './latency.js';
import { bytesPerTask, roundTrips, type RedisCost, type RoundTrips } from './redis-cost.js';
import { bullmqLifecycle, type LifecycleCeiling } from './lifecycle-ceiling.js';
import { heapSlope, memoryWhilePolled, type HeapSlopeFigure, type PolledFigure } from './memory.js';
import { createCountdown, sendOnce, tasksGet } from './requests.js';
import { machine, ratio, table, type Row } from './report.js';
import { formatDifference, formatSummary, perRequestDifference, profileSummary } from './cpu-profile.js';
import { percentiles, type Percentiles } from './stats.js';
import { recovery, type RecoveryFigure } from './recovery.js';
import { killChildrenOnExit } from './children.js';

const HELP = `Usage: npm run bench [-- --out PATH | --help | --version]

Starts a throwaway redis-server, two gateways, a worker and the helper processes (all stopped
at its end, or when it is interrupted), measures every figure beside its ceiling, prints a
table and writes it as JSON (docs/performance.md). Takes minutes; BENCH_ONLY runs a part.

Environment:
  BENCH_OUT      where the JSON goes (bench/results/latest.json); --out wins
  BENCH_ROUNDS   rounds per throughput figure (3; the median is reported)
  BENCH_ROUND_S  seconds per round (5)
  BENCH_ONLY     comma list of groups: dispatch,cancel,discover,progress,result,redis,get,
                 create,memory,n13,recovery (all)
  BENCH_RECOVERY_SAMPLES  kills and drains each for the recovery figures (10)
  BENCH_SDK_PATH 0 = leave the SDK path (HOT_PATH=false) out of the tasks/get figure
  BENCH_CPU_PROF 1 = profile the hot gateway (and the ceiling) and print its top functions
                 (with BENCH_ONLY=get or create: µs per request against the ceiling's)
  BENCH_SLOWLOG  1 = with redis: a profile of Redis's work by script (its CPU rows read high)

Options:
  --out PATH         where the JSON goes
  -h, --help         print this help and exit
  -v, --version      print the version and exit`;

const { values: args } = entryArgs({ name: 'bench', usage: HELP, options: { out: { type: 'string' } } });
killChildrenOnExit();

const outPath = resolve(
  (args.out as string | undefined) ?? process.env.BENCH_OUT ?? join(ROOT, 'bench', 'results', 'latest.json'),
);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const ROUND_S = Number(process.env.BENCH_ROUND_S ?? 5);
const RECOVERY_SAMPLES = Number(process.env.BENCH_RECOVERY_SAMPLES ?? 10);
const only = process.env.BENCH_ONLY ? new Set(process.env.BENCH_ONLY.split(',').map((s) => s.trim())) : undefined;
const wants = (g: string) => !only || only.has(g);
const sdkPath = process.env.BENCH_SDK_PATH !== '0';

const startedAt = new Date();
const t0 = Date.now();
const host = machine();
const log = (msg: string) => console.error(`[bench ${((Date.now() - t0) / 1000).toFixed(1)} s] ${msg}`);
const rows: Row[] = [];
const raw: Record<string, unknown> = {};
const errors: string[] = [];

/** Runs one group; a crash becomes a FAIL row instead of ending the run. */
async function group<T>(name: string, fn: () => Promise<T>, key = name): Promise<T | undefined> {
  if (!wants(name)) return undefined;
  log(key);
  try {
    const r = await fn();
    raw[key] = r;
    return r;
  } catch (e) {
    errors.push(`${name}: ${(e as Error).stack ?? e}`);
    rows.push({ figure: `${name}: not measured (${(e as Error).message.slice(0, 120)})`, ours: '—', pass: false });
    return undefined;
  }
}

const pct = (p: Percentiles) => `${p.p50} / ${p.p99}`;

log(
  `starting Redis, gateways (hot path, SDK path), worker, ceiling, BullMQ baseline, load generator on ${host.cores} cores`,
);
const b: BenchProcesses = await startBench();
try {
  const hot = b.hot.url!;
  for (let i = 0; i < 20; i++) {
    await callTool(hot, 'add', { a: 1, b: i }, { token: b.apiKey });
    await callTool(b.sdk.url!, 'add', { a: 1, b: i }, { token: b.apiKey });
  }

  // --- with the worker running -------------------------------------------------------------
  // First, while Redis holds almost nothing else: what one task costs, command by command.
  const trips = await group<RoundTrips>('redis', () => roundTrips(b, 20), 'roundTrips');
  const disp = await group<DispatchFigure>('dispatch', () => dispatch(b, ROUNDS, 50));
  if (disp) {
    rows.push({
      figure: 'dispatch: handle → tool running, p50 (ms)',
      ours: disp.ours.p50,
      ceiling: disp.bullmq.p50,
      ratio: ratio(disp.ours.p50, disp.bullmq.p50),
      target: '≤ 2× BullMQ add→process',
      pass: disp.ours.p50 <= 2 * disp.bullmq.p50,
    });
    rows.push({
      figure: 'dispatch p99 (ms)',
      ours: disp.ours.p99,
      ceiling: disp.bullmq.p99,
      ratio: ratio(disp.ours.p99, disp.bullmq.p99),
    });
  }
  const cancel = await group<CancelFigure>('cancel', () => cancelToTerminal(b, 40));
  if (cancel)
    rows.push({
      figure: 'cancel-to-terminal p50 / p99 (ms), job and cancel on different processes',
      ours: pct(cancel.toTerminal),
      target: 'p99 ≤ 250 ms',
      pass: cancel.toTerminal.p99 <= 250,
    });
  // The era probe a dual-era client (Claude Code v2, Copilot CLI) sends first: it falls back to
  // 2025 when the answer is slow (Copilot CLI gave up after ~0.58 s), so it must stay fast.
  const discover = await group<Percentiles>('discover', async () => {
    const ms: number[] = [];
    for (let i = 0; i < 200; i++) {
      const t0 = performance.now();
      await rpc(hot, 'server/discover', {}, { tasks: false });
      ms.push(performance.now() - t0);
    }
    return percentiles(ms);
  });
  if (discover)
    rows.push({
      figure: 'server/discover answered, p50 / p99 (ms)',
      ours: pct(discover),
      target: 'p99 < 500 ms',
      pass: discover.p99 < 500,
    });
  const progress = await group<Percentiles>('progress', () => progressRelay(b, 20, 20, 0.25));
  if (progress)
    rows.push({
      figure: 'progress relay tool → client p50 / p99 (ms)',
      ours: pct(progress),
      target: 'p99 ≤ 50 ms',
      pass: progress.p99 <= 50,
    });
  const result = await group<Percentiles>('result', () => resultAfterCompletion(b, 40));
  if (result)
    rows.push({
      figure: 'synchronous result after the completion (last progress just before it) p50 / p99 (ms)',
      ours: pct(result),
      target: 'p99 ≤ 100 ms',
      pass: result.p99 <= 100,
    });
  // Bare BullMQ's lifecycle (the ceiling), before and after ours, alternating; the mean of the two.
  const bull1 = await group<LifecycleCeiling>('redis', () => bullmqLifecycle(b, 1000, 20), 'bullmqLifecycleBefore');
  const cost = await group<RedisCost>('redis', () => bytesPerTask(b, 1000, 20), 'bytesPerTask');
  const bull2 = await group<LifecycleCeiling>('redis', () => bullmqLifecycle(b, 1000, 20), 'bullmqLifecycleAfter');
  if (cost) {
    rows.push({
      figure: `Redis bytes per finished task (${cost.resultBytes} B result; used_memory delta / ${cost.tasks}, BullMQ included)`,
      ours: cost.bytesPerTask,
      target: `≤ 2048 + ${cost.resultBytes}`,
      pass: cost.overheadBytes <= 2048,
    });
    rows.push({
      figure: `BullMQ's retained finished step jobs (fixed, not per task): count / MB`,
      ours: `${cost.retainedJobs.count} / ${(cost.retainedJobs.bytes / 1e6).toFixed(2)}`,
    });
    const bull = bull1 && bull2 ? [bull1, bull2] : [bull1 ?? bull2].filter((x) => x !== undefined);
    const mean = (f: (x: LifecycleCeiling) => number) =>
      bull.length ? Math.round((bull.reduce((a, x) => a + f(x), 0) / bull.length) * 10) / 10 : undefined;
    const bullCmds = mean((x) => x.commandsPerJob);
    const bullUs = mean((x) => x.redisUsPerJob);
    rows.push({
      figure:
        'Redis commands executed per task lifecycle (created, run, completed, reconciled; inside scripts included) — ceiling: bare BullMQ add → no-op → completed, same retention',
      ours: cost.commandsPerTaskTotal,
      ...(bullCmds !== undefined ? { ceiling: bullCmds, ratio: ratio(cost.commandsPerTaskTotal, bullCmds) } : {}),
    });
    rows.push({
      figure: 'Redis CPU per task lifecycle (µs; INFO cpu, idle removed) — ceiling: bare BullMQ, same retention',
      ours: cost.redisUsPerTask,
      ...(bullUs !== undefined
        ? {
            ceiling: bullUs,
            ratio: ratio(cost.redisUsPerTask, bullUs),
            target: '≤ 1.5× BullMQ',
            pass: cost.redisUsPerTask <= 1.5 * bullUs,
          }
        : {}),
    });
    rows.push({
      figure: "of which the reconciler's visits: commands / Redis CPU µs per task (target: < 10 % of the lifecycle)",
      ours: `${cost.reconciler.commandsPerTask} / ${cost.reconciler.redisUsPerTask}`,
      ratio: ratio(cost.reconciler.redisUsPerTask, cost.redisUsPerTask),
      target: '< 0.10',
      pass: cost.reconciler.redisUsPerTask < 0.1 * cost.redisUsPerTask,
    });
  }
  if (trips) {
    rows.push(
      {
        figure:
          'Redis commands sent per task, reconciler included: gateway / worker (a script call is one; + run inside scripts)',
        ours: `${trips.perTask.gateway} / ${trips.perTask.worker} (+${trips.perTask.insideScripts})`,
      },
      {
        figure: 'Redis commands sent per tasks/get of a working task / of a finished one (+ run inside scripts)',
        ours: `${trips.perPollWorking.gateway} / ${trips.perPoll.gateway} (+${trips.perPoll.insideScripts})`,
      },
    );
  }
  await b.stopWorker();

  // --- nobody consumes the queue -----------------------------------------------------------
  const made = await callTool(hot, 'countdown', { seconds: 1 }, { token: b.apiKey });
  const pollId = made.body.result!.taskId as string;
  const get = await group<Record<string, Summary>>('get', async () => {
    const req = tasksGet(b.apiKey, pollId);
    const check = async (url: string, what: string) => {
      const body = await sendOnce(url, req);
      if (body.result?.status !== 'working')
        throw new Error(`${what}: unexpected tasks/get answer ${JSON.stringify(body).slice(0, 300)}`);
    };
    await check(hot, 'hot path');
    if (sdkPath) await check(b.sdk.url!, 'SDK path');
    await check(`${b.ceilingUrl}/get`, 'ceiling');
    return alternate(
      b,
      [
        { label: 'ceiling', url: `${b.ceilingUrl}/get`, request: req, pid: b.ceilingPid },
        { label: 'hot', url: hot, request: req, pid: b.hot.proc.pid },
        ...(sdkPath ? [{ label: 'sdk', url: b.sdk.url!, request: req, pid: b.sdk.proc.pid }] : []),
      ],
      { connections: 50, durationS: ROUND_S, rounds: ROUNDS },
    );
  });
  if (get) {
    const { ceiling: c, hot: h, sdk: s } = get as { ceiling: Summary; hot: Summary; sdk?: Summary };
    const bad = (x: Summary) => (x.failed ? ` (${x.failed} failed requests)` : '');
    rows.push({
      figure: `tasks/get throughput, 50 connections, API key (req/s)${bad(h)}${bad(c)}`,
      ours: h.rps,
      ceiling: c.rps,
      ratio: ratio(h.rps, c.rps),
      target: '≥ 0.65',
      pass: !h.failed && !c.failed && h.rps >= 0.65 * c.rps,
    });
    rows.push({
      figure: 'tasks/get p99 (ms)',
      ours: h.p99,
      ceiling: c.p99,
      ratio: ratio(h.p99, c.p99),
      target: '≤ 1.5× ceiling',
      pass: h.p99 <= 1.5 * c.p99,
    });
    rows.push({ figure: 'tasks/get p50 (ms)', ours: h.p50, ceiling: c.p50, ratio: ratio(h.p50, c.p50) });
    if (s) {
      rows.push({
        figure: `tasks/get through the SDK path (HOT_PATH=false) (req/s)${bad(s)}`,
        ours: s.rps,
        ceiling: c.rps,
        ratio: ratio(s.rps, c.rps),
      });
      rows.push({
        figure: 'tasks/get SDK path p50 / p99 (ms)',
        ours: `${s.p50} / ${s.p99}`,
        ceiling: `${c.p50} / ${c.p99}`,
      });
    }
    if (h.perCpuSecond)
      rows.push({
        figure: 'tasks/get per CPU-second of the serving process (SDK path in brackets)',
        ours: `${h.perCpuSecond} (${s?.perCpuSecond ?? '—'})`,
        ceiling: c.perCpuSecond,
        ratio: c.perCpuSecond ? ratio(h.perCpuSecond, c.perCpuSecond) : undefined,
      });
    if (h.redisUsPerRequest !== undefined)
      rows.push({ figure: 'Redis CPU per tasks/get (µs)', ours: h.redisUsPerRequest, ceiling: c.redisUsPerRequest });
  }
  const create = await group<Record<string, Summary>>('create', async () => {
    const req = createCountdown(b.apiKey);
    for (const [url, what] of [
      [hot, 'gateway'],
      [`${b.ceilingUrl}/create`, 'ceiling'],
    ] as const) {
      const body = await sendOnce(url, req);
      if (body.result?.resultType !== 'task')
        throw new Error(`${what}: no task handle: ${JSON.stringify(body).slice(0, 300)}`);
    }
    return alternate(
      b,
      [
        { label: 'ceiling', url: `${b.ceilingUrl}/create`, request: req, pid: b.ceilingPid },
        { label: 'hot', url: hot, request: req, pid: b.hot.proc.pid },
      ],
      { connections: 20, durationS: ROUND_S, rounds: ROUNDS },
    );
  });
  if (create) {
    const { ceiling: c, hot: h } = create as { ceiling: Summary; hot: Summary };
    const bad = h.failed + c.failed ? ` (${h.failed + c.failed} failed requests)` : '';
    rows.push({
      figure: `task creation (tools/call → handle), 20 connections (req/s)${bad}`,
      ours: h.rps,
      ceiling: c.rps,
      ratio: ratio(h.rps, c.rps),
      target: '≥ 0.50',
      pass: !h.failed && !c.failed && h.rps >= 0.5 * c.rps,
    });
    rows.push({
      figure: 'task creation p50 / p99 (ms)',
      ours: `${h.p50} / ${h.p99}`,
      ceiling: `${c.p50} / ${c.p99}`,
      ratio: ratio(h.p50, c.p50),
    });
    if (h.perCpuSecond)
      rows.push({
        figure: 'task creations per CPU-second of the serving process',
        ours: h.perCpuSecond,
        ceiling: c.perCpuSecond,
        ratio: c.perCpuSecond ? ratio(h.perCpuSecond, c.perCpuSecond) : undefined,
      });
    if (h.redisUsPerRequest !== undefined)
      rows.push({
        figure: 'Redis CPU per task creation (µs)',
        ours: h.redisUsPerRequest,
        ceiling: c.redisUsPerRequest,
      });
  }
  const polled = await group<PolledFigure>('memory', async () => {
    const ids = await taskIds(b, 10_000);
    return memoryWhilePolled(b, ids, 1);
  });
  if (polled) {
    rows.push({
      figure: `gateway RSS / heapUsed while ${polled.tasks} tasks are polled (MB, max)${polled.load.errors + polled.load.non2xx + polled.load.mismatches ? ' (failed requests)' : ''}`,
      ours: `${polled.rssMax} / ${polled.heapUsedMax}`,
    });
  }
  const n13 = await group<HeapSlopeFigure>('n13', () => heapSlope(b, pollId, 12, 5000, 3));
  if (n13) {
    rows.push({
      figure: `N-13: heapUsed slope over ${n13.requests - n13.warmupRequests} mixed requests after ${n13.warmupRequests} of warm-up, GC every 5,000 (B/request; growth)${n13.failed ? ` (${n13.failed} failed)` : ''}`,
      ours: `${n13.bytesPerRequest} (${n13.growthMb} MB)`,
      target: 'flat: < 1 MB growth',
      pass: !n13.failed && n13.growthMb < 1,
    });
  }
  const rec = await group<RecoveryFigure>('recovery', () => recovery(b, RECOVERY_SAMPLES));
  if (rec) {
    rows.push({
      figure: `worker SIGKILL → step resumed elsewhere p50 / p99 (ms, ${rec.sigkill.n} kills)`,
      ours: pct(rec.sigkill),
      target: 'p99 ≤ 5,000 ms',
      pass: rec.sigkill.p99 <= 5000,
    });
    rows.push({
      figure: `SIGTERM → resumed p50 / p99 (ms, ${rec.sigterm.n} drains)`,
      ours: pct(rec.sigterm),
      target: 'p99 ≤ 2,000 ms',
      pass: rec.sigterm.p99 <= 2000,
    });
  }
} finally {
  await b.stop();
}

const durationS = Math.round((Date.now() - t0) / 1000);
const out = {
  startedAt: startedAt.toISOString(),
  durationS,
  machine: host,
  rounds: ROUNDS,
  roundSeconds: ROUND_S,
  rows,
  raw,
  errors,
};
mkdirSync(dirname(outPath), { recursive: true });
writeFileSync(outPath, `${JSON.stringify(out, null, 2)}\n`);
console.log(`\n${table(rows)}\n`);
console.log(
  `machine: ${host.cores} cores, ${host.cpu}, Node ${host.node}, Redis ${host.redis}, load average at start ${host.loadAverage1m}; ${durationS} s; JSON: ${outPath}`,
);
if (b.profDir) {
  const profiles = readdirSync(b.profDir)
    .filter((f) => f.endsWith('.cpuprofile'))
    .sort();
  const last = profiles[profiles.length - 1];
  if (last) {
    const summary = profileSummary(join(b.profDir, last), 30);
    (out as Record<string, unknown>).cpuProfile = { file: join(b.profDir, last), ...summary };
    console.log(`\nhot gateway CPU profile (${join(b.profDir, last)}):\n${formatSummary(summary)}`);
    // With one throughput figure only (BENCH_ONLY=get or create), the ceiling served that alone
    // while profiled: where a request costs ours more, per request.
    const figure = ['get', 'create'].filter((k) => raw[k]);
    const ceilingProfile = largestProfile(join(b.profDir, 'ceiling'));
    if (figure.length === 1 && ceilingProfile) {
      const s = raw[figure[0]!] as { hot: Summary; ceiling: Summary };
      const d = perRequestDifference(
        { file: join(b.profDir, last), requests: s.hot.served },
        { file: ceilingProfile, requests: s.ceiling.served },
        30,
      );
      (out as Record<string, unknown>).cpuProfileDifference = { figure: figure[0], ceilingFile: ceilingProfile, ...d };
      console.log(`\n${figure[0]}: ours against the ceiling (${ceilingProfile}):\n${formatDifference(d)}`);
    }
    writeFileSync(outPath, `${JSON.stringify(out, null, 2)}\n`);
  }
}
for (const e of errors) console.error(e);
process.exit(errors.length ? 1 : 0);

/** The largest `.cpuprofile` in `dir` (the main thread's; a loader thread writes a small one too), if any. */
function largestProfile(dir: string): string | undefined {
  try {
    return readdirSync(dir)
      .filter((f) => f.endsWith('.cpuprofile'))
      .map((f) => join(dir, f))
      .sort((a, b) => statSync(b).size - statSync(a).size)[0];
  } catch {
    return undefined;
  }
}

/** Up to `n` ids of `task`-mode records of the benchmark's principal (the creation figure made them), topped up by creating more. */
async function taskIds(bp: BenchProcesses, n: number): Promise<string[]> {
  const ids: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await bp.client.scan(cursor, 'MATCH', `${PREFIX}:{t:*}:task`, 'COUNT', 1000);
    cursor = next;
    const modes = await Promise.all(keys.map((k) => bp.client.hget(k, 'mode')));
    keys.forEach((k, i) => {
      if (modes[i] === 'task') ids.push(/\{t:([^}]+)\}/.exec(k)![1]!);
    });
  } while (cursor !== '0' && ids.length < n);
  if (ids.length < n) {
    await bp.load({
      url: bp.hot.url!,
      connections: 20,
      amount: n - ids.length,
      requests: [createCountdown(bp.apiKey)],
    });
    return taskIds(bp, n);
  }
  return ids.slice(0, n);
}
