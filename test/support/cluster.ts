/**
 * Test harness: real processes, real Redis (design §6). Starts gateway and worker processes
 * the way `npm run gateway` / `npm run worker` and the Docker image do: the compiled
 * `apps/<kind>/dist/main.js` (issue 8 §4; `npm test` runs `tsc -b` first so it is current), each with the test's own key prefix on the
 * shared Redis (never flushed) or on a throwaway `redis-server` on a random port.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { appEntry } from '../../scripts/build.mjs';
import { deleteKeysUnder, keysUnder } from './redis-keys.js';

export { appEntry };

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const SHARED_REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

/** A free TCP port on 127.0.0.1. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Polls `fn` until it returns a truthy value or `timeoutMs` passes. `what` names the condition in
 * the timeout's error; a function is called at the timeout, so it can show output gathered while
 * waiting (a template literal would be built before the wait, when nothing was printed yet).
 */
type Falsy = undefined | null | false | 0 | '';
export async function waitFor<T>(
  fn: () => Promise<T | Falsy> | T | Falsy,
  timeoutMs = 10_000,
  everyMs = 50,
  what: string | (() => string) = 'condition',
): Promise<T> {
  const end = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v as T;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end)
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${typeof what === 'function' ? what() : what}${last ? `: ${(last as Error).message}` : ''}`,
      );
    await sleep(everyMs);
  }
}

export interface ThrowawayRedis {
  url: string;
  port: number;
  proc: ChildProcess;
  stop(): Promise<void>;
  /**
   * Starts it again on the same port and directory, after stopping it if it runs: data is lost
   * unless `extraArgs` turned persistence on (`--appendonly yes`: the AOF is replayed).
   */
  restart(): Promise<void>;
}

/**
 * Waits (10 s at most) until a `redis-server` just spawned answers PING on 127.0.0.1:`port`.
 * @throws when it does not, or when `proc` exits first (with the end of its stdout when that
 *         is collected in `output()`).
 */
export async function waitForRedisPing(
  port: number,
  proc: ChildProcess,
  output: () => string = () => '',
): Promise<void> {
  const probe = new Redis(port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  probe.on('error', () => undefined); // refused until the server listens
  try {
    await waitFor(
      async () => {
        if (proc.exitCode !== null) throw new Error(`redis-server on ${port} exited: ${output()}`);
        try {
          await probe.connect();
          return (await probe.ping()) === 'PONG';
        } catch {
          probe.disconnect();
          return false;
        }
      },
      10_000,
      50,
      `redis-server on ${port}`,
    );
  } finally {
    probe.disconnect();
  }
}

/** Starts a throwaway `redis-server` on a random port (fault tests). */
export async function startRedis(extraArgs: string[] = []): Promise<ThrowawayRedis> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'mcp-redis-'));
  const launch = async () => {
    const proc = spawn(
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, ...extraArgs],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    await waitForRedisPing(port, proc);
    return proc;
  };
  const r: ThrowawayRedis = {
    url: `redis://127.0.0.1:${port}`,
    port,
    proc: await launch(),
    async stop() {
      // A killed server has a signalCode and no exitCode: it is stopped too (restart after stop).
      if (r.proc.exitCode === null && r.proc.signalCode === null) {
        r.proc.kill('SIGKILL');
        await new Promise((res) => r.proc.once('exit', res));
      }
    },
    async restart() {
      await r.stop();
      r.proc = await launch();
    },
  };
  return r;
}

export interface Proc {
  kind: 'gateway' | 'worker';
  proc: ChildProcess;
  /** Parsed pino lines (and raw non-JSON lines as `{raw}`). */
  logs: Record<string, unknown>[];
  url?: string;
  port?: number;
  /** A worker's operations server (`/metrics`, `/healthz`, `/readyz`), e.g. `http://127.0.0.1:41234`. */
  opsUrl?: string;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  kill(): Promise<void>;
  waitLog(match: (l: Record<string, unknown>) => boolean, timeoutMs?: number): Promise<Record<string, unknown>>;
}

export interface StartOptions {
  /** Node options before the entry point (e.g. `--expose-gc`, `--cpu-prof`). */
  nodeArgs?: string[];
  /** Keep only the last `keepLogs` parsed lines (a long benchmark run); default: all. */
  keepLogs?: number;
  /** Called with the child as soon as it is spawned (the benchmark kills its children when it dies). */
  onSpawn?: (proc: ChildProcess) => void;
}

/**
 * Spawns one app process (`gateway` or `worker`, the compiled `dist/main.js`) and waits for its
 * ready line.
 */
export async function startProcess(
  kind: 'gateway' | 'worker',
  env: Record<string, string>,
  opts: StartOptions = {},
): Promise<Proc> {
  const port = kind === 'gateway' ? await freePort() : undefined;
  const proc = spawn(process.execPath, [...(opts.nodeArgs ?? []), appEntry(kind)], {
    cwd: ROOT,
    // A worker's operations port: any free one (read back from its ready line), so workers never collide.
    env: {
      ...process.env,
      NODE_ENV: 'test',
      LOG_LEVEL: 'info',
      ...(kind === 'worker' ? { WORKER_HTTP_PORT: '0' } : {}),
      ...env,
      ...(port ? { PORT: String(port), HOST: '127.0.0.1' } : {}),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  opts.onSpawn?.(proc);
  const logs: Record<string, unknown>[] = [];
  const waiters = new Set<() => void>();
  const onLine = (line: string) => {
    if (!line.trim()) return;
    try {
      logs.push(JSON.parse(line));
    } catch {
      logs.push({ raw: line });
    }
    if (opts.keepLogs !== undefined && logs.length > opts.keepLogs * 2) logs.splice(0, logs.length - opts.keepLogs);
    for (const w of waiters) w();
  };
  for (const stream of [proc.stdout!, proc.stderr!]) {
    let buf = '';
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => {
      buf += chunk;
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        onLine(buf.slice(0, i));
        buf = buf.slice(i + 1);
      }
    });
  }
  const p: Proc = {
    kind,
    proc,
    logs,
    ...(port ? { url: `http://127.0.0.1:${port}/mcp`, port } : {}),
    waitLog(match, timeoutMs = 15_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const hit = logs.find(match);
          if (hit) {
            cleanup();
            resolve(hit);
          } else if (proc.exitCode !== null) {
            cleanup();
            reject(
              new Error(
                `${kind} exited (${proc.exitCode}) before the expected log line; last lines:\n${logs
                  .slice(-10)
                  .map((l) => JSON.stringify(l))
                  .join('\n')}`,
              ),
            );
          }
        };
        const timer = setTimeout(() => {
          cleanup();
          reject(
            new Error(
              `${kind}: expected log line not seen within ${timeoutMs} ms; last lines:\n${logs
                .slice(-10)
                .map((l) => JSON.stringify(l))
                .join('\n')}`,
            ),
          );
        }, timeoutMs);
        const cleanup = () => {
          clearTimeout(timer);
          waiters.delete(check);
          proc.off('exit', check);
        };
        waiters.add(check);
        proc.on('exit', check);
        check();
      });
    },
    async stop(signal = 'SIGTERM') {
      if (proc.exitCode !== null || proc.signalCode !== null) return proc.exitCode;
      const exited = new Promise<number | null>((res) => proc.once('exit', (code) => res(code)));
      proc.kill(signal);
      return exited;
    },
    async kill() {
      await p.stop('SIGKILL');
    },
  };
  let ready: Record<string, unknown>;
  try {
    // Start-up is mostly CPU: loading the compiled app and its dependencies costs about 1.4 s of
    // CPU (measured: `node apps/gateway/dist/main.js --version`, 1.32 s user + 0.12 s sys), and a
    // test starts several at once. On 2 cores with the suite run twice at once beside other work
    // (load average 27), that one `--version` took 22 s of wall time and gateways missed a 30 s
    // bound; 90 s is that load with a margin, and a process that cannot start at all still fails
    // at once (its exit is seen before the bound).
    ready = await p.waitLog((l) => l.msg === `${kind}.ready`, 90_000);
  } catch (e) {
    // A process that never became ready belongs to no cluster, so no stop() would reach it:
    // kill it here, or it outlives the test file (and keeps its runner from exiting).
    await p.kill();
    throw e;
  }
  if (kind === 'worker' && typeof ready.http === 'string' && ready.http.startsWith('http')) p.opsUrl = ready.http;
  return p;
}

export interface ClusterOptions {
  gateways?: number;
  workers?: number;
  env?: Record<string, string>;
  redisUrl?: string;
}

export interface Cluster {
  prefix: string;
  redisUrl: string;
  env: Record<string, string>;
  gateways: Proc[];
  workers: Proc[];
  /** Gateway URLs, in start order. */
  urls: string[];
  /** A client on the cluster's Redis for assertions (never FLUSH: the shared Redis serves others). */
  redis: Redis;
  addGateway(extraEnv?: Record<string, string>): Promise<Proc>;
  addWorker(extraEnv?: Record<string, string>): Promise<Proc>;
  /** All keys under this cluster's prefix, sorted. */
  keys(): Promise<string[]>;
  stop(): Promise<void>;
}

/** Default environment for tests: own prefix, fast reconcile and stall detection. */
export function testEnv(prefix: string, redisUrl: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    REDIS_URL: redisUrl,
    REDIS_KEY_PREFIX: prefix,
    MCP_TOOLSETS: 'demo,conformance,testing',
    REQUEST_STATE_KEYS: 'test:test-request-state-key-0123456789abcdef0123456789',
    TASK_POLL_INTERVAL_MS: '500',
    DEMO_RESEARCH_PHASE_MS: '1500',
    WORKER_LOCK_DURATION_MS: '4000',
    WORKER_STALLED_INTERVAL_MS: '2000',
    RECONCILE_INTERVAL_MS: '1000',
    RECONCILE_AFTER_MS: '3000',
    SHUTDOWN_GRACE_MS: '3000',
    SHUTDOWN_DRAIN_DELAY_MS: '300',
    SYNC_HOLDER_TIMEOUT_MS: '3000',
    // Tests that do not test the per-principal limits must never meet them.
    RATE_LIMIT_REQUESTS_PER_MIN: '1000000',
    RATE_LIMIT_TASK_CREATIONS_PER_MIN: '1000000',
    MAX_OUTSTANDING_TASKS: '1000000',
    MAX_RUNNING_STEPS_PER_PRINCIPAL: '1000000',
    MAX_RESULT_BYTES_PER_PRINCIPAL: String(64 * 1024 * 1024 * 1024),
    RATE_LIMIT_AUTH_FAILURES_PER_MIN: '1000000',
    ...extra,
  };
}

/** Starts `gateways` gateway and `workers` worker processes sharing one fresh key prefix. */
export async function startCluster(opts: ClusterOptions = {}): Promise<Cluster> {
  const prefix = `test-${randomBytes(5).toString('hex')}`;
  const redisUrl = opts.redisUrl ?? SHARED_REDIS_URL;
  const env = testEnv(prefix, redisUrl, opts.env);
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
  const c: Cluster = {
    prefix,
    redisUrl,
    env,
    gateways: [],
    workers: [],
    get urls() {
      return c.gateways.map((g) => g.url!);
    },
    redis,
    async addGateway(extra = {}) {
      // freePort() releases the port before the gateway binds it; another test file may take
      // it in between (EADDRINUSE): try again on a new port.
      for (let attempt = 1; ; attempt++) {
        try {
          const g = await startProcess('gateway', { ...env, ...extra });
          c.gateways.push(g);
          return g;
        } catch (e) {
          if (attempt >= 3 || !/EADDRINUSE/.test((e as Error).message)) throw e;
        }
      }
    },
    async addWorker(extra = {}) {
      const w = await startProcess('worker', { ...env, ...extra });
      c.workers.push(w);
      return w;
    },
    keys: () => keysUnder(redis, prefix),
    async stop() {
      await Promise.allSettled([...c.gateways, ...c.workers].map((p) => p.kill()));
      // Remove this test's keys from the shared Redis (only our prefix).
      await deleteKeysUnder(redis, prefix).catch(() => 0);
      redis.disconnect();
    },
  };
  const started = await Promise.allSettled([
    ...Array.from({ length: opts.gateways ?? 1 }, () => c.addGateway()),
    ...Array.from({ length: opts.workers ?? 1 }, () => c.addWorker()),
  ]);
  const failed = started.find((r) => r.status === 'rejected');
  if (failed) {
    await c.stop(); // never leave the processes that did start running
    throw (failed as PromiseRejectedResult).reason;
  }
  // Gateways and workers start side by side, and a gateway re-counts live workers every
  // WORKERS_REFRESH_MS (2 s): one that counted before the first heartbeat says "Waiting for a
  // worker: none is running" on working tasks until its next count. A test begins once every
  // gateway has seen the workers (its `workers.alive` line), as a client of a running
  // deployment would.
  if (c.workers.length > 0) {
    try {
      await waitFor(
        () => c.gateways.every((g) => g.logs.some((l) => l.msg === 'workers.alive')) || undefined,
        15_000,
        50,
        'every gateway to count the workers',
      );
    } catch (e) {
      await c.stop();
      throw e;
    }
  }
  return c;
}
