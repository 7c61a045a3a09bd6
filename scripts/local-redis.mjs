/**
 * The local pieces `npm start` and `npm test` need on a fresh machine (issue 11 §6): finding a
 * binary, asking whether a Redis answers on a port, starting a `redis-server` child, and the
 * one-line install commands printed when something is missing. Plain Node (no TypeScript, no
 * dependencies): these scripts run before anything else is known to work.
 */
import { spawn } from 'node:child_process';
import { accessSync, constants, mkdirSync, readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { delimiter, join } from 'node:path';

/** Install commands for the common systems, by binary (one line each when printed). */
export const INSTALL = {
  'redis-server':
    'Debian/Ubuntu: sudo apt-get install -y redis-server · Fedora/RHEL: sudo dnf install -y redis · Alpine: apk add redis · Arch: sudo pacman -S redis · macOS: brew install redis',
  nginx:
    'Debian/Ubuntu: sudo apt-get install -y nginx-light · Fedora/RHEL: sudo dnf install -y nginx · Alpine: apk add nginx · Arch: sudo pacman -S nginx · macOS: brew install nginx (or set NGINX_BIN)',
  'python-clients':
    'node scripts/python-clients.mjs (python3 3.10+ with venv; the packages from PYTHON_CLIENTS_INDEX_URL or the local wheel mirror)',
  'typescript-sdk': 'npm ci --prefix tools/typescript-sdk --no-audit --no-fund',
  tmux: 'Debian/Ubuntu: sudo apt-get install -y tmux · Fedora/RHEL: sudo dnf install -y tmux · Alpine: apk add tmux · Arch: sudo pacman -S tmux · macOS: brew install tmux',
};

/** The first executable `name` in the directories of `path` (default $PATH), else undefined. */
export function findOnPath(name, path = process.env.PATH ?? '') {
  for (const dir of path.split(delimiter).filter(Boolean)) {
    const candidate = join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

/**
 * The nginx binary: $NGINX_BIN when set (and executable: a setting is never second-guessed),
 * else /usr/sbin/nginx, /usr/local/sbin/nginx, /usr/local/nginx/sbin/nginx, then `nginx` on
 * PATH; undefined when there is none. One answer for `npm test`'s prerequisite check,
 * `npm run stack` and the tests.
 */
export function findNginx() {
  if (process.env.NGINX_BIN) return isExecutable(process.env.NGINX_BIN) ? process.env.NGINX_BIN : undefined;
  for (const c of ['/usr/sbin/nginx', '/usr/local/sbin/nginx', '/usr/local/nginx/sbin/nginx'])
    if (isExecutable(c)) return c;
  return findOnPath('nginx');
}

/** Whether `file` is an executable file. */
export function isExecutable(file) {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * Asks `host:port` for `PING` over plain RESP.
 * @returns `'redis'` (it answered +PONG), `'auth'` (a Redis that wants a password), `'none'`
 *          (connection refused: nothing listens), or `'other'` (something else answered, or
 *          nothing within `timeoutMs`).
 */
export function probeRedis(host, port, timeoutMs = 1000) {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    let settled = false;
    let reply = '';
    const done = (what) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(what);
    };
    const timer = setTimeout(() => done('other'), timeoutMs);
    socket.on('connect', () => socket.write('PING\r\n'));
    socket.on('data', (d) => {
      reply += d.toString('latin1');
      if (!reply.includes('\r\n')) return;
      if (reply.startsWith('+PONG')) done('redis');
      else if (/^-(NOAUTH|WRONGPASS|ERR AUTH)/.test(reply)) done('auth');
      else done('other');
    });
    socket.on('error', (e) => done(e.code === 'ECONNREFUSED' ? 'none' : 'other'));
    socket.on('close', () => done(reply ? 'other' : 'none'));
  });
}

/**
 * Starts `redis-server` on 127.0.0.1:`port` as a child in its own process group (Ctrl-C in the
 * terminal does not reach it: it is stopped by `stop()` once the service has let go of it), and
 * waits until it answers PING.
 * @param o.dir    data directory (created); its log is `<dir>/redis.log`
 * @param o.aof    append-only file on (`appendfsync everysec`), RDB snapshots off
 * @returns `{ url, proc, stop() }`; `stop()` sends SIGTERM (Redis writes out the AOF) and
 *          waits for the exit, SIGKILL after `graceMs`
 * @throws Error with the last line of Redis's log when it exits or stays silent for 10 s
 */
export async function startRedisServer({ bin = 'redis-server', port, dir, aof }) {
  mkdirSync(dir, { recursive: true });
  const logfile = join(dir, 'redis.log');
  const args = [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--dir',
    dir,
    '--logfile',
    logfile,
    '--daemonize',
    'no',
    '--save',
    '',
    '--maxmemory-policy',
    'noeviction',
  ];
  args.push(...(aof ? ['--appendonly', 'yes', '--appendfsync', 'everysec'] : ['--appendonly', 'no']));
  const proc = spawn(bin, args, { stdio: 'ignore', detached: true });
  let exited = false;
  proc.on('exit', () => (exited = true));
  const lastLogLine = () => {
    try {
      return readFileSync(logfile, 'utf8').trim().split('\n').pop() ?? '';
    } catch {
      return '';
    }
  };
  const end = Date.now() + 10_000;
  for (;;) {
    if (exited || proc.exitCode !== null)
      throw new Error(`redis-server exited at start: ${lastLogLine() || 'no log'} (log: ${logfile})`);
    if ((await probeRedis('127.0.0.1', port, 500)) === 'redis') break;
    if (Date.now() > end) {
      proc.kill('SIGKILL');
      throw new Error(`redis-server did not answer on 127.0.0.1:${port} within 10 s (log: ${logfile})`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    url: `redis://127.0.0.1:${port}`,
    proc,
    logfile,
    async stop(graceMs = 10_000) {
      if (exited || proc.exitCode !== null || proc.signalCode !== null) return;
      const gone = new Promise((r) => proc.once('exit', r));
      proc.kill('SIGTERM');
      const timer = setTimeout(() => proc.kill('SIGKILL'), graceMs);
      await gone;
      clearTimeout(timer);
    },
  };
}
