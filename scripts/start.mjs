#!/usr/bin/env node
/**
 * `npm start`: one gateway and one worker against REDIS_URL (the quick start, design §5).
 * Compiles first (`tsc -b`, incremental; skipped in a production-only install), then runs the
 * compiled `apps/<app>/dist/main.js`, as the Docker image does (issue 8 §4).
 * Both children get this process's environment; Ctrl-C / SIGTERM / SIGHUP (the terminal closed)
 * stops both gracefully, then its own Redis if it runs one. A SIGKILL of this process leaves its
 * children running (no process is told of a SIGKILL): stop them with it, e.g. `kill -- -<pgid>`.
 * If either exits by itself, one line (`start.child_exited`) names it and its exit code or
 * signal, the other is stopped and `npm start` exits with its code.
 *
 * Redis (issue 11 §6: `npm ci && npm start` on a fresh machine):
 *  - REDIS_URL set: that Redis, nothing else is looked at;
 *  - else a Redis answering on 127.0.0.1:LOCAL_REDIS_PORT (default 6379) is used;
 *  - else, when `redis-server` is on PATH, it runs its own as a child on that port: append-only
 *    file on, data in LOCAL_REDIS_DIR (default `.data/redis` in the repository), stopped after
 *    the gateway and the worker; its first log line says so;
 *  - else it prints one line with the install commands and exits 1.
 * `--help` and `--version` answer without starting anything.
 */
import { spawn } from 'node:child_process';
import { isAbsolute, join, relative } from 'node:path';
import { pino } from 'pino';
import { findOnPath, INSTALL, probeRedis, startRedisServer } from './local-redis.mjs';
import { entryArgs } from './entry-args.mjs';

import { appEntry, build, ROOT } from './build.mjs';

const root = ROOT;

const HELP = `Usage: npm start [-- --help | --version]

Runs one gateway (http://HOST:PORT/mcp, 127.0.0.1:3000) and one worker, on the Redis of
REDIS_URL. Without REDIS_URL it uses the Redis on 127.0.0.1:6379, or, when nothing answers
there and redis-server is installed, runs its own (append-only file on, data in .data/redis)
and stops it with the service. Ctrl-C, SIGTERM or SIGHUP (the terminal closed) stops
everything gracefully.
For several gateways or workers, run them yourself: npm run gateway, npm run worker.

Configuration comes from environment variables only; .env.example lists every one with its
default (more in npm run gateway -- --help). The main ones:
  REDIS_URL          Redis for task records and queues (unset: see above); REDIS_CLUSTER_NODES
                     or REDIS_SENTINELS + REDIS_SENTINEL_NAME instead: used as given
  REDIS_KEY_PREFIX   prefix of every key written (mcp); give each deployment its own
  HOST, PORT         where the gateway listens (127.0.0.1, 3000)
  MCP_TOOLSETS       built-in tool sets: demo, conformance, testing, or none (demo)
  MCP_TOOL_MODULES   your own tool modules, comma list of paths or package names
                     (docs/writing-tools.md)
  LOCAL_REDIS_PORT   port of the local Redis used or started without REDIS_URL (6379)
  LOCAL_REDIS_DIR    data directory of the Redis npm start runs (.data/redis)

Options:
  -h, --help         print this help and exit
  -v, --version      print the version and exit`;

entryArgs({ name: 'start', usage: HELP, hint: 'the configuration comes from the environment; try --help' });

try {
  build();
} catch (e) {
  console.error(e.message);
  process.exit(1);
}

/** The same JSON lines as the gateway and the worker (pino, `svc` names the process). */
const log = pino({
  level: process.env.LOG_LEVEL || 'info',
  base: { svc: 'start', pid: process.pid },
  timestamp: pino.stdTimeFunctions.isoTime,
});
const fail = (line) => {
  process.stderr.write(`start: ${line}\n`);
  process.exit(1);
};

/** The Redis `npm start` runs, if it runs one. */
let ownRedis;

// A Redis Cluster or Sentinel (REDIS_CLUSTER_NODES, REDIS_SENTINELS) is used as configured: no local Redis.
if (
  !process.env.REDIS_URL?.trim() &&
  !process.env.REDIS_CLUSTER_NODES?.trim() &&
  !process.env.REDIS_SENTINELS?.trim()
) {
  const port = Number(process.env.LOCAL_REDIS_PORT?.trim() || 6379);
  if (!Number.isInteger(port) || port < 1 || port > 65535)
    fail(
      `invalid configuration: LOCAL_REDIS_PORT: expected a port number, got ${JSON.stringify(process.env.LOCAL_REDIS_PORT)}`,
    );
  const local = `redis://127.0.0.1:${port}`;
  const found = await probeRedis('127.0.0.1', port);
  if (found === 'redis') {
    log.info(
      { redis: local },
      `start.redis_found: using the Redis that answers on 127.0.0.1:${port} (REDIS_URL is not set)`,
    );
  } else if (found === 'auth') {
    fail(`the Redis on 127.0.0.1:${port} wants a password: set REDIS_URL=redis://:<password>@127.0.0.1:${port}`);
  } else if (found === 'other') {
    fail(
      `something that is not a Redis answers on 127.0.0.1:${port}: set REDIS_URL to your Redis, or LOCAL_REDIS_PORT to a free port for npm start's own`,
    );
  } else {
    const bin = findOnPath('redis-server');
    if (!bin) {
      fail(
        `no Redis answers on 127.0.0.1:${port} and redis-server is not installed; install it (${INSTALL['redis-server']}) or set REDIS_URL to a reachable Redis`,
      );
    }
    const dirSetting = process.env.LOCAL_REDIS_DIR?.trim() || join('.data', 'redis');
    const dir = isAbsolute(dirSetting) ? dirSetting : join(root, dirSetting);
    try {
      ownRedis = await startRedisServer({ bin, port, dir, aof: true });
    } catch (e) {
      fail(`could not start its own Redis on 127.0.0.1:${port}: ${e.message}`);
    }
    const shown = relative(root, dir).startsWith('..') ? dir : relative(root, dir);
    log.info(
      { redis: local, dataDir: dir, redisPid: ownRedis.proc.pid },
      `start.redis_started: no Redis answered on 127.0.0.1:${port}, so npm start runs its own redis-server there (append-only file on, data in ${shown}); it stops with the service`,
    );
  }
  process.env.REDIS_URL = local;
}

/** Stops npm start's own Redis (if any) after the gateway and the worker, then exits. */
let finishing = false;
const finish = async (code) => {
  if (finishing) return;
  finishing = true;
  if (ownRedis) {
    await ownRedis.stop();
    log.info({ redis: ownRedis.url }, 'start.redis_stopped');
  }
  process.exit(code);
};

const run = (app) =>
  spawn(process.execPath, [appEntry(app)], {
    cwd: ROOT,
    stdio: 'inherit',
    env: process.env,
  });

const NAMES = ['gateway', 'worker'];
const children = NAMES.map(run);
let exiting = false;
let exitCode = 0;
const allExited = () => children.every((x) => x.exitCode !== null || x.signalCode !== null);
const stopAll = (sig) => {
  for (const c of children) if (c.exitCode === null) c.kill(sig);
};
children.forEach((c, i) => {
  c.on('exit', (code, signal) => {
    if (exiting) {
      if (allExited()) void finish(exitCode);
      return;
    }
    // One child ended by itself: say which and how, stop the other, then exit with its code.
    const other = NAMES[1 - i];
    log.error(
      { child: NAMES[i], pid: c.pid, code, signal },
      `start.child_exited: the ${NAMES[i]} exited (${signal ? `signal ${signal}` : `code ${code}`}) by itself, so npm start stops the ${other} and exits`,
    );
    exiting = true;
    exitCode = code ?? 1;
    stopAll('SIGTERM');
    setTimeout(() => void finish(exitCode), 15_000).unref();
    if (allExited()) void finish(exitCode);
  });
});
// SIGHUP: the terminal closed (its whole process group gets it); the same graceful stop.
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(sig, () => {
    exiting = true;
    stopAll('SIGTERM');
  });
}
