#!/usr/bin/env node
/**
 * `npm run stack`: the docker-compose.yml topology without Docker. Starts N gateways and M
 * workers from this checkout and a local nginx in front of the gateways, configured from the
 * same template as the compose file (deploy/nginx/mcp.conf.template), against REDIS_URL.
 * Prints the MCP URL; Ctrl-C (or SIGTERM) stops everything the way an orchestrator would:
 * gateways and workers get SIGTERM and drain, then nginx stops.
 *
 *   npm run stack                         http://127.0.0.1:3000/mcp, 2 gateways, 2 workers
 *   npm run stack -- --port 8080 --gateways 3 --workers 4
 *   npm run stack -- --source             run the TypeScript sources (tsx) even if dist/ exists
 *   npm run stack -- --dist               run the compiled JS (`npm run build` first)
 *   npm run stack -- --help | --version   answer and start nothing
 *
 * Without --source / --dist it runs the compiled JS (apps/*\/dist, as the image does) when
 * every workspace is built and no source file is newer than its build, else the sources.
 *
 * Every child gets this process's environment (REDIS_URL, REDIS_KEY_PREFIX, AUTH_*, ...);
 * gateways bind 127.0.0.1 on a port of their own (only nginx talks to them; TRUST_PROXY=loopback
 * unless set, so the client address nginx passes is believed); worker i serves
 * /metrics, /healthz, /readyz on WORKER_HTTP_PORT + i - 1 (9464, 9465, …; `0` = any free port). A child that
 * exits on its own is restarted after 1 s, on the same port (as `restart: unless-stopped`
 * does): SIGTERM one gateway or worker to watch a drain. A child that cannot start (exits
 * before it is ready) stops the stack with exit code 1. The nginx binary: $NGINX_BIN,
 * /usr/sbin/nginx, or `nginx` on PATH (Debian: apt-get install nginx-light).
 *
 * Output: each child's lines prefixed with its name (`gateway-1 | ...`); the stack's own lines
 * with `stack | `, among them one JSON line `{"msg":"stack.ready","url":...}` (used by
 * test/e2e/topology.test.ts).
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeLocalNginxConf } from '../deploy/nginx/render.mjs';
import { findNginx } from './local-redis.mjs';
import { entryArgs } from './entry-args.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const WORKSPACES = [
  ...['apps/gateway', 'apps/worker'],
  ...readdirSync(join(root, 'packages')).map((p) => `packages/${p}`),
];
/** A child that exits within this long of its start, three times in a row, stops the stack. */
const CRASH_WINDOW_MS = 10_000;
/** Gateways and workers drain within about 20 s with the default settings (docs/deploying.md, "Drain and termination"). */
const STOP_TIMEOUT_MS = 30_000;

const HELP = `Usage: npm run stack [-- --port 3000 --host 127.0.0.1 --gateways 2 --workers 2 --source | --dist]

The docker-compose.yml topology without Docker: N gateways and M workers from this checkout and
a local nginx in front of them (deploy/nginx/mcp.conf.template), on the Redis of REDIS_URL
(redis://127.0.0.1:6379). Prints the MCP URL; Ctrl-C or SIGTERM drains and stops everything.
Every child gets this environment (REDIS_URL, REDIS_KEY_PREFIX, AUTH_*, …; .env.example lists
them). The nginx binary: $NGINX_BIN, /usr/sbin/nginx or nginx on PATH.

Options:
  --port PORT        where nginx listens (3000)
  --host HOST        nginx's address (127.0.0.1)
  --gateways N       gateways behind nginx (2)
  --workers M        workers (2)
  --source           run the TypeScript sources (tsx) even if dist/ exists
  --dist             run the compiled JavaScript (npm run build first)
  -h, --help         print this help and exit
  -v, --version      print the version and exit`;

const { values: opts } = entryArgs({
  name: 'stack',
  usage: HELP,
  options: {
    port: { type: 'string', default: '3000' },
    host: { type: 'string', default: '127.0.0.1' },
    gateways: { type: 'string', default: '2' },
    workers: { type: 'string', default: '2' },
    source: { type: 'boolean', default: false },
    dist: { type: 'boolean', default: false },
  },
});
const int = (name, min) => {
  const n = Number(opts[name]);
  if (!Number.isInteger(n) || n < min) {
    console.error(`stack | --${name} must be an integer >= ${min}`);
    process.exit(2);
  }
  return n;
};
const port = int('port', 1);
const nGateways = int('gateways', 1);
const nWorkers = int('workers', 1);

const say = (line) => process.stdout.write(`stack | ${line}\n`);

/** Newest mtime (ms) of the files under `dir` (0 if it does not exist). */
function newest(dir) {
  if (!existsSync(dir)) return 0;
  let t = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    t = Math.max(t, e.isDirectory() ? newest(p) : statSync(p).mtimeMs);
  }
  return t;
}

/** `dist` when every workspace is built and up to date, else `source` (with the reason). */
function chooseMode() {
  if (opts.source && opts.dist) {
    console.error('stack | --source and --dist exclude each other');
    process.exit(2);
  }
  if (opts.source) return { mode: 'source', why: '--source' };
  const missing = WORKSPACES.filter((w) => !existsSync(join(root, w, 'dist')));
  const stale = WORKSPACES.filter(
    (w) => !missing.includes(w) && newest(join(root, w, 'src')) > newest(join(root, w, 'dist')),
  );
  if (opts.dist) {
    if (missing.length) {
      console.error(`stack | --dist: not built: ${missing.join(', ')}; run npm run build`);
      process.exit(2);
    }
    if (stale.length) say(`warning: sources newer than the build in ${stale.join(', ')}; run npm run build`);
    return { mode: 'dist', why: '--dist' };
  }
  if (missing.length) return { mode: 'source', why: `no build in ${missing.join(', ')}` };
  if (stale.length) return { mode: 'source', why: `sources newer than the build in ${stale.join(', ')}` };
  return { mode: 'dist', why: 'every workspace is built' };
}

/** node arguments that start `app` (`gateway` or `worker`), as `npm run <app>` or the image does. */
const appArgs = (mode, app) =>
  mode === 'dist'
    ? [join(root, 'apps', app, 'dist', 'main.js')]
    : ['--conditions=mcp-tasks-src', '--import', 'tsx', join(root, 'apps', app, 'src', 'main.ts')];

/** REDIS_URL without its password (or the Cluster / Sentinel addresses), for printing. */
function redactedRedisUrl() {
  if (process.env.REDIS_CLUSTER_NODES?.trim()) return `cluster ${process.env.REDIS_CLUSTER_NODES.trim()}`;
  if (process.env.REDIS_SENTINELS?.trim())
    return `sentinel ${process.env.REDIS_SENTINEL_NAME ?? '?'} via ${process.env.REDIS_SENTINELS.trim()}`;
  const raw = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
  try {
    const u = new URL(raw);
    if (u.password) u.password = '***';
    return u.href;
  } catch {
    return '(unparsable REDIS_URL)';
  }
}

/** Forwards a stream's lines to stdout with a prefix; calls `onLine` for each. */
function pipeLines(stream, prefix, onLine) {
  let buf = '';
  stream.setEncoding('utf8');
  stream.on('data', (chunk) => {
    buf += chunk;
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      process.stdout.write(`${prefix} | ${line}\n`);
      onLine(line);
    }
  });
  stream.on('end', () => {
    if (buf) process.stdout.write(`${prefix} | ${buf}\n`);
  });
}

const { mode, why } = chooseMode();
const nginxBin = findNginx();
if (!nginxBin) {
  console.error('stack | nginx is not installed: apt-get install -y nginx-light (or set NGINX_BIN)');
  process.exit(1);
}

/**
 * WORKER_HTTP_PORT of worker `index` (1-based): one port each on this host (in the compose file
 * each container has its own 9464). A number N (default 9464) gives N, N+1, …; `0` (any free
 * port) and `off` stay as they are. The port each worker took is in `stack.ready`.
 */
function workerHttpPort(index) {
  const v = process.env.WORKER_HTTP_PORT?.trim() || '9464';
  return /^[1-9]\d*$/.test(v) ? String(Number(v) + index - 1) : v;
}

let stopping = false;
/** Every gateway and worker: name, kind, port (gateways), index and /metrics URL `http` (workers), the running process. */
const children = [];

/**
 * Starts (or restarts) a gateway or worker; resolves with its port (gateways) once its ready
 * line is logged; rejects if it exits first.
 */
function launch(child) {
  const env = { ...process.env };
  // nginx, on this host, is the gateways' only client: its X-Forwarded-For names the real one.
  if (child.kind === 'gateway')
    Object.assign(env, {
      HOST: '127.0.0.1',
      PORT: String(child.port ?? 0),
      TRUST_PROXY: process.env.TRUST_PROXY?.trim() || 'loopback',
    });
  if (child.kind === 'worker') env.WORKER_HTTP_PORT = workerHttpPort(child.index);
  const proc = spawn(process.execPath, appArgs(mode, child.kind), {
    cwd: root,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.proc = proc;
  child.startedAt = Date.now();
  return new Promise((resolve, reject) => {
    let ready = false;
    const onLine = (line) => {
      if (ready || !line.startsWith('{')) return;
      let l;
      try {
        l = JSON.parse(line);
      } catch {
        return;
      }
      if (l.msg !== `${child.kind}.ready`) return;
      ready = true;
      child.everReady = true;
      if (child.kind === 'gateway') child.port = Number(new URL(l.url).port);
      if (child.kind === 'worker') child.http = l.http;
      child.crashes = 0;
      resolve(child.port);
    };
    pipeLines(proc.stdout, child.name, onLine);
    pipeLines(proc.stderr, child.name, onLine);
    proc.on('exit', (code, signal) => {
      if (!ready) reject(new Error(`${child.name} exited before it was ready (${signal ?? code})`));
      // A child that never started (configuration, Redis unreachable) stops the stack: main().
      if (stopping || !child.everReady) return;
      say(`${child.name} (pid ${proc.pid}) exited (${signal ?? code}); restarting in 1 s`);
      child.crashes = Date.now() - child.startedAt < CRASH_WINDOW_MS ? (child.crashes ?? 0) + 1 : 0;
      if (child.crashes >= 3) {
        say(`${child.name} keeps exiting; stopping the stack`);
        void stopAll(1);
        return;
      }
      setTimeout(() => {
        if (!stopping)
          launch(child).then(
            () => say(`${child.name} (pid ${child.proc.pid}) is back`),
            () => undefined,
          );
      }, 1000).unref();
    });
  });
}

let nginx;
let nginxDir;

const exited = (p) => !p || p.exitCode !== null || p.signalCode !== null;
const waitExit = (p, ms) =>
  exited(p)
    ? Promise.resolve(true)
    : new Promise((resolve) => {
        const t = setTimeout(() => resolve(false), ms);
        p.once('exit', () => {
          clearTimeout(t);
          resolve(true);
        });
      });

/**
 * Stops everything: SIGTERM to gateways and workers (they drain; streams end through nginx),
 * SIGKILL after STOP_TIMEOUT_MS, then nginx (graceful), then removes nginx's directory.
 */
async function stopAll(code) {
  if (stopping) return;
  stopping = true;
  say('stopping: SIGTERM to gateways and workers (they drain), then nginx');
  for (const c of children) if (!exited(c.proc)) c.proc.kill('SIGTERM');
  const done = await Promise.all(children.map((c) => waitExit(c.proc, STOP_TIMEOUT_MS)));
  children.forEach((c, i) => {
    if (!done[i]) {
      say(`${c.name} did not exit within ${STOP_TIMEOUT_MS} ms: SIGKILL`);
      c.proc.kill('SIGKILL');
    }
  });
  if (nginx && !exited(nginx)) {
    nginx.kill('SIGQUIT');
    if (!(await waitExit(nginx, 5000))) nginx.kill('SIGKILL');
  }
  if (nginxDir) rmSync(nginxDir, { recursive: true, force: true });
  say('stopped');
  process.exit(code);
}

// Never leave a child behind, whatever ends this process.
process.on('exit', () => {
  for (const c of children) if (!exited(c.proc)) c.proc.kill('SIGKILL');
  if (nginx && !exited(nginx)) nginx.kill('SIGKILL');
});

let interrupts = 0;
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    if (++interrupts > 1) {
      say('second signal: SIGKILL to everything');
      for (const c of children) if (!exited(c.proc)) c.proc.kill('SIGKILL');
      if (nginx && !exited(nginx)) nginx.kill('SIGKILL');
      if (nginxDir) rmSync(nginxDir, { recursive: true, force: true });
      process.exit(130);
    }
    void stopAll(0);
  });
}

async function main() {
  say(
    `starting ${nGateways} gateway(s) and ${nWorkers} worker(s) from ${mode === 'dist' ? 'the compiled JS (dist/)' : 'the TypeScript sources (tsx)'}: ${why}; Redis: ${redactedRedisUrl()}`,
  );
  for (let i = 1; i <= nGateways; i++) children.push({ name: `gateway-${i}`, kind: 'gateway' });
  for (let i = 1; i <= nWorkers; i++) children.push({ name: `worker-${i}`, kind: 'worker', index: i });
  try {
    await Promise.all(children.map((c) => launch(c)));
  } catch (e) {
    say(e.message);
    await stopAll(1);
    return;
  }
  const gateways = children.filter((c) => c.kind === 'gateway');
  nginxDir = mkdtempSync(join(tmpdir(), 'mcp-stack-nginx-'));
  const { confPath } = writeLocalNginxConf({
    dir: nginxDir,
    listen: `${opts.host}:${port}`,
    gateways: gateways.map((g) => `127.0.0.1:${g.port}`),
  });
  nginx = spawn(nginxBin, ['-p', nginxDir, '-c', confPath, '-e', join(nginxDir, 'startup-error.log')], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  pipeLines(nginx.stdout, 'nginx', () => undefined);
  pipeLines(nginx.stderr, 'nginx', () => undefined);
  nginx.on('exit', (c, s) => {
    if (stopping) return;
    say(`nginx exited (${s ?? c}); see ${join(nginxDir, 'startup-error.log')} and error.log`);
    void stopAll(1);
  });
  const host = opts.host.includes(':') ? `[${opts.host}]` : opts.host;
  const base = `http://${host}:${port}`;
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (stopping) return;
    try {
      if ((await fetch(`${base}/nginx-health`)).status === 204) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      say(`nginx did not answer on ${base} within 10 s`);
      await stopAll(1);
      return;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  const url = `${base}/mcp`;
  say(
    JSON.stringify({
      msg: 'stack.ready',
      url,
      mode,
      nginx: { pid: nginx.pid, dir: nginxDir, accessLog: join(nginxDir, 'access.log') },
      gateways: gateways.map((g) => ({ name: g.name, pid: g.proc.pid, port: g.port })),
      workers: children
        .filter((c) => c.kind === 'worker')
        .map((w) => ({ name: w.name, pid: w.proc.pid, http: w.http })),
    }),
  );
  say(
    `MCP endpoint: ${url}   (nginx → ${gateways.map((g) => `127.0.0.1:${g.port}`).join(', ')}; access log ${join(nginxDir, 'access.log')}). Ctrl-C stops everything.`,
  );
}

void main();
