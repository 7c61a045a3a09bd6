/**
 * The processes of one benchmark run (issue 8 §5): a throwaway `redis-server` on a random port
 * (`--save '' --appendonly no`), real gateway and worker processes (the compiled
 * `apps/<kind>/dist/main.js`, as in production), and three helper processes forked from the
 * orchestrator: the load generator (bench/load.ts), the ceiling server (bench/ceiling.ts) and
 * BullMQ's own worker (bench/bullmq-baseline.ts).
 *
 * Gateways:
 *  - `hot`: the default configuration (HOT_PATH unset = on), authentication by API key, started
 *    with `--expose-gc` and the memory probe (bench/probe.mjs, BENCH_PROBE_PORT); with
 *    BENCH_CPU_PROF=1 also `--cpu-prof` (the profile lands in bench/results/prof/ at its exit;
 *    the ceiling's in bench/results/prof/ceiling/, written when it is disconnected at the end);
 *  - `sdk`: the same with HOT_PATH=false (every request through the per-request SDK server; a
 *    build without that switch ignores it).
 * The worker starts after the ceiling has copied a real task record (its template); the
 * benchmark stops it before the figures that need nobody consuming the queue.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { freePort, startProcess, startRedis, type Proc, type ThrowawayRedis } from '../test/support/cluster.js';
import { callTool } from '../test/support/mcp.js';
import { ROOT } from '../scripts/build.mjs';
import type { LoadResult, LoadSpec } from './load.js';
import { own } from './children.js';

/** Key prefix of the measured service on the throwaway Redis. */
export const PREFIX = 'bench';
/** The helpers' own files are TypeScript; the workspaces they import resolve to dist/ (compiled). */
const TSX = ['--import', 'tsx'];

/** A forked helper process that speaks IPC. */
export interface Child {
  proc: ChildProcess;
  stop(): Promise<void>;
}

export interface BenchProcesses {
  redis: ThrowawayRedis;
  /** A client on the throwaway Redis (INFO, MEMORY USAGE, MONITOR, reads). */
  client: Redis;
  /** Bearer token of the principal `key:bench`. */
  apiKey: string;
  env: Record<string, string>;
  sideEffectDir: string;
  hot: Proc;
  sdk: Proc;
  worker: Proc | undefined;
  /** `http://127.0.0.1:<port>/mem` of the hot gateway's memory probe. */
  probeUrl: string;
  /** Base URL of the ceiling server (`/get`, `/create`). */
  ceilingUrl: string;
  ceilingPid: number;
  /** Runs one autocannon measurement in the load process. */
  load(spec: LoadSpec): Promise<LoadResult>;
  /** BullMQ prefix the baseline worker consumes (queue `baseline`). */
  baselinePrefix: string;
  /** Called with each job the baseline worker started: `{ i, at }` (unix ms). */
  onBaseline: (m: { i: number; at: number }) => void;
  /** Called with each job the baseline worker completed (its `i`). */
  onBaselineDone: (i: number) => void;
  profDir: string | undefined;
  stopWorker(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Forks `bench/<file>` (TypeScript, through tsx) and waits for its first IPC message. With
 * `profDir`, it runs with `--cpu-prof` and is stopped by disconnecting it (it exits by itself
 * and writes its profile; killed after 5 s if it does not).
 */
async function forkChild(
  file: string,
  env: Record<string, string>,
  profDir?: string,
): Promise<{ child: Child; first: any }> {
  const proc = fork(join(ROOT, 'bench', file), [], {
    execArgv: profDir ? [...TSX, '--cpu-prof', '--cpu-prof-dir', profDir] : TSX,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  own(proc);
  const first = await new Promise<any>((resolve, reject) => {
    proc.once('message', resolve);
    proc.once('exit', (code) => reject(new Error(`bench/${file} exited (${code}) before it was ready`)));
  });
  const child: Child = {
    proc,
    async stop() {
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      const exited = new Promise((r) => proc.once('exit', r));
      if (profDir && proc.connected) {
        // A profiled child writes its profile when it exits by itself (on disconnect).
        proc.disconnect();
        const timer = setTimeout(() => proc.kill('SIGKILL'), 5000);
        await exited;
        clearTimeout(timer);
        return;
      }
      proc.kill('SIGKILL');
      await exited;
    },
  };
  return { child, first };
}

/** Like Promise.all, but waits for every start to settle before throwing (so nothing is left running). */
async function settled<T extends readonly unknown[]>(ps: { [K in keyof T]: Promise<T[K]> }): Promise<T> {
  const rs = await Promise.allSettled(ps);
  const failed = rs.find((r) => r.status === 'rejected');
  if (failed) throw (failed as PromiseRejectedResult).reason;
  return rs.map((r) => (r as PromiseFulfilledResult<unknown>).value) as unknown as T;
}

/** Starts every process of the run; on any failure stops what did start and throws. */
export async function startBench(): Promise<BenchProcesses> {
  const redis = await startRedis();
  own(redis.proc);
  const client = new Redis(redis.url, { maxRetriesPerRequest: 1, connectionName: 'bench-own' });
  const apiKey = `bench-${randomBytes(16).toString('hex')}`;
  const sideEffectDir = mkdtempSync(join(tmpdir(), 'mcp-bench-'));
  const env: Record<string, string> = {
    REDIS_URL: redis.url,
    REDIS_KEY_PREFIX: PREFIX,
    MCP_TOOLSETS: 'demo,testing',
    AUTH_API_KEYS: `bench:${apiKey}`,
    REQUEST_STATE_KEYS: `bench:${randomBytes(24).toString('hex')}`,
    // The limits stay on (counted in Redis on every request, as in production), high enough
    // never to refuse the benchmark's load.
    RATE_LIMIT_REQUESTS_PER_MIN: '1000000000',
    RATE_LIMIT_TASK_CREATIONS_PER_MIN: '1000000000',
    MAX_OUTSTANDING_TASKS: '1000000',
    MAX_RUNNING_STEPS_PER_PRINCIPAL: '1000000',
    TESTING_SIDE_EFFECT_DIR: sideEffectDir,
    LOG_LEVEL: 'info',
    SHUTDOWN_DRAIN_DELAY_MS: '0',
    SHUTDOWN_GRACE_MS: '2000',
  };
  const profDir = process.env.BENCH_CPU_PROF ? join(ROOT, 'bench', 'results', 'prof') : undefined;
  if (profDir) mkdirSync(profDir, { recursive: true });
  const probePort = await freePort();
  const started: { stop(): Promise<unknown> }[] = [];
  const stopAll = async () => {
    await Promise.allSettled(started.reverse().map((p) => p.stop()));
    client.disconnect();
    await redis.stop();
    rmSync(sideEffectDir, { recursive: true, force: true });
  };
  try {
    const keep = { keepLogs: 200, onSpawn: own };
    const track = <T extends { stop(): Promise<unknown> }>(p: Promise<T>) => p.then((x) => (started.push(x), x));
    const [hot, sdk, loader] = await settled([
      track(
        startProcess(
          'gateway',
          { ...env, BENCH_PROBE_PORT: String(probePort) },
          {
            ...keep,
            nodeArgs: [
              '--expose-gc',
              '--import',
              join(ROOT, 'bench', 'probe.mjs'),
              ...(profDir ? ['--cpu-prof', '--cpu-prof-dir', profDir] : []),
            ],
          },
        ),
      ),
      track(startProcess('gateway', { ...env, HOT_PATH: 'false' }, keep)),
      forkChild('load.ts', {}).then((x) => (started.push(x.child), x)),
    ]);

    // The ceiling writes the same record as the service: copy one, before any worker runs it.
    const made = await callTool(hot.url!, 'countdown', { seconds: 1 }, { token: apiKey });
    const templateId = made.body.result?.taskId as string | undefined;
    if (!templateId)
      throw new Error(`bench: no task handle from the gateway: ${JSON.stringify(made.body).slice(0, 300)}`);
    const record = await client.hgetall(`${PREFIX}:{t:${templateId}}:task`);
    const baselinePrefix = `${PREFIX}:{baseline}`;
    const [ceiling, worker, baseline] = await settled([
      forkChild(
        'ceiling.ts',
        {
          REDIS_URL: redis.url,
          CEILING_PREFIX: PREFIX,
          CEILING_RECORD: JSON.stringify(record),
        },
        profDir && join(profDir, 'ceiling'),
      ).then((x) => (started.push(x.child), x)),
      track(startProcess('worker', env, keep)),
      forkChild('bullmq-baseline.ts', { REDIS_URL: redis.url, BASELINE_PREFIX: baselinePrefix }).then(
        (x) => (started.push(x.child), x),
      ),
    ]);
    const pending = new Map<number, { resolve(r: LoadResult): void; reject(e: Error): void }>();
    let nextId = 1;
    loader.child.proc.on('message', (m: { id: number; result?: LoadResult; error?: string }) => {
      const p = pending.get(m.id);
      pending.delete(m.id);
      if (m.result) p?.resolve(m.result);
      else p?.reject(new Error(`load: ${m.error}`));
    });

    const b: BenchProcesses = {
      redis,
      client,
      apiKey,
      env,
      sideEffectDir,
      hot,
      sdk,
      worker,
      probeUrl: `http://127.0.0.1:${probePort}/mem`,
      ceilingUrl: `http://127.0.0.1:${ceiling.first.ready}`,
      ceilingPid: ceiling.child.proc.pid!,
      load(spec) {
        const id = nextId++;
        return new Promise((resolve, reject) => {
          pending.set(id, { resolve, reject });
          loader.child.proc.send({ id, spec });
        });
      },
      baselinePrefix,
      onBaseline: () => undefined,
      onBaselineDone: () => undefined,
      profDir,
      async stopWorker() {
        await b.worker?.kill();
        b.worker = undefined;
      },
      stop: stopAll,
    };
    baseline.child.proc.on('message', (m: { i: number; at: number } | { done: number }) =>
      'done' in m ? b.onBaselineDone(m.done) : b.onBaseline(m),
    );
    return b;
  } catch (e) {
    await stopAll();
    throw e;
  }
}
