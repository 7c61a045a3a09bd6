/**
 * A real nginx in front of gateways, in one of two configurations:
 *  - `b10` (case B-10, the default): an `upstream` of every gateway (round robin, pooled
 *    keep-alive connections), `proxy_read_timeout 60s`, `proxy_buffering` left at its default
 *    (`on`, so the gateway's `X-Accel-Buffering: no` must turn it off), HTTP/1.1 upstream;
 *  - `deploy`: the configuration shipped for docker compose and `npm run stack`
 *    (deploy/nginx/mcp.conf.template, rendered by deploy/nginx/render.mjs), optionally with its
 *    Mcp-Method example turned on (`pollUpstreams`: tasks/get to a pool of its own).
 * Everything nginx writes (pid, logs, temp files) lives in a fresh temp dir; nginx runs in the
 * foreground as a child of the test process. Both write the access log in the same
 * `|`-separated format.
 *
 * nginx must be installed (Debian: `apt-get install -y nginx-light`; `.ci/run` does it). When it
 * is missing, startNginx throws saying so: a test behind a proxy is never skipped silently.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, sleep } from './cluster.js';
import { writeLocalNginxConf } from '../../deploy/nginx/render.mjs';
import { findNginx } from '../../scripts/local-redis.mjs';

export { findNginx };

export const NGINX_INSTALL_HINT =
  'nginx is not installed: the case B-10 tests need a real nginx in front of the gateways. ' +
  'Install it with `DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nginx-light` ' +
  '(or the `nginx` package; .ci/run does this), or point NGINX_BIN at an nginx binary.';

export interface NginxOptions {
  /** Gateway base URLs (`http://127.0.0.1:<port>`, a path is ignored), round robin in this order. */
  upstreams: string[];
  /** Extra directives inside the proxied `location` (e.g. to try a mutation locally). */
  extraConf?: string;
  /** `proxy_read_timeout` (default `60s`, as in case B-10). `b10` only. */
  readTimeout?: string;
  /** `b10` (default) or `deploy` (the shipped deploy/nginx configuration). */
  config?: 'b10' | 'deploy';
  /** `deploy` only: turn on the template's Mcp-Method example, tasks/get to these gateway URLs. */
  pollUpstreams?: string[];
}

export interface NginxLogs {
  /** nginx's error log (level `info`). */
  error: string;
  /** Access log, `|`-separated: `$msec|$status|$upstream_addr|$upstream_status|$request_time|$bytes_sent|$http_mcp_method|$request`. */
  access: string;
  /** stdout + stderr of the master process. */
  output: string;
}

export interface Nginx {
  /** The MCP endpoint through nginx: `http://127.0.0.1:<port>/mcp`. */
  url: string;
  port: number;
  dir: string;
  proc: ChildProcess;
  /** The nginx.conf written. */
  conf: string;
  logs(): NginxLogs;
  /** Fast shutdown (SIGTERM to the master, which stops its workers), then removes the temp dir. */
  stop(): Promise<void>;
}

const hostPort = (u: string) => {
  const url = new URL(u);
  return `${url.hostname}:${url.port || '80'}`;
};

function configFor(dir: string, port: number, o: NginxOptions): string {
  const user = process.getuid?.() === 0 ? 'user root root;' : '';
  return `# written by test/support/nginx.ts (case B-10)
daemon off;
master_process on;
worker_processes 1;
${user}
pid ${dir}/nginx.pid;
error_log ${dir}/error.log info;

events {
  worker_connections 1024;
}

http {
  log_format b10 '$msec|$status|$upstream_addr|$upstream_status|$request_time|$bytes_sent|$http_mcp_method|$request';
  access_log ${dir}/access.log b10;
  client_body_temp_path ${dir}/client_body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;

  upstream mcp_gateways {
${o.upstreams.map((u) => `    server ${hostPort(u)};`).join('\n')}
    keepalive 16;
  }

  server {
    listen 127.0.0.1:${port};

    location = /__nginx_up {
      access_log off;
      return 204;
    }

    location / {
      proxy_pass http://mcp_gateways;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $host;
      proxy_read_timeout ${o.readTimeout ?? '60s'};
      # proxy_buffering stays at its default (on): the gateway's X-Accel-Buffering: no must turn
      # it off per response (case B-10). nginx hides X-Accel-* response headers from the client by
      # default; pass this one through so the client can check it was sent.
      proxy_pass_header X-Accel-Buffering;
${o.extraConf ?? ''}
    }
  }
}
`;
}

/** Starts nginx in front of `upstreams` on a free port; resolves once it answers. */
export async function startNginx(o: NginxOptions): Promise<Nginx> {
  const bin = findNginx();
  if (!bin) throw new Error(NGINX_INSTALL_HINT);
  if (!o.upstreams.length) throw new Error('startNginx: no upstreams');
  for (let attempt = 1; ; attempt++) {
    try {
      return await launch(bin, o);
    } catch (e) {
      // freePort() releases the port before nginx binds it; another test may take it.
      if (attempt >= 3 || !/Address already in use/.test((e as Error).message)) throw e;
    }
  }
}

async function launch(bin: string, o: NginxOptions): Promise<Nginx> {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-nginx-'));
  const port = await freePort();
  let conf: string;
  let confPath = join(dir, 'nginx.conf');
  let upPath = '/__nginx_up';
  if (o.config === 'deploy') {
    const written = writeLocalNginxConf({
      dir,
      listen: `127.0.0.1:${port}`,
      gateways: o.upstreams.map(hostPort),
      ...(o.pollUpstreams ? { pollGateways: o.pollUpstreams.map(hostPort) } : {}),
    });
    conf = `${written.conf}\n# ${join(dir, 'mcp.conf')}:\n${written.mcpConf}`;
    confPath = written.confPath;
    upPath = '/nginx-health';
  } else {
    for (const d of ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) mkdirSync(join(dir, d));
    conf = configFor(dir, port, o);
    writeFileSync(confPath, conf);
  }
  // -e: the error log used before the config is read (else /var/log/nginx/error.log).
  const proc = spawn(bin, ['-p', dir, '-c', confPath, '-e', join(dir, 'startup-error.log')], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  proc.stdout!.setEncoding('utf8').on('data', (d: string) => (output += d));
  proc.stderr!.setEncoding('utf8').on('data', (d: string) => (output += d));
  // If the test process exits without stop(), do not leave nginx running (the master stops
  // its workers on SIGTERM).
  const onExit = () => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
  };
  process.once('exit', onExit);
  const read = (f: string) => (existsSync(join(dir, f)) ? readFileSync(join(dir, f), 'utf8') : '');
  const logs = (): NginxLogs => ({
    error: read('error.log'),
    access: read('access.log'),
    output: output + read('startup-error.log'),
  });
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    process.off('exit', onExit);
    if (proc.exitCode === null && proc.signalCode === null) {
      const exited = new Promise((r) => proc.once('exit', r));
      proc.kill('SIGTERM');
      const timer = setTimeout(() => proc.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(dir, { recursive: true, force: true });
  };

  const end = Date.now() + 10_000;
  for (;;) {
    if (proc.exitCode !== null || proc.signalCode !== null) {
      const l = logs();
      rmSync(dir, { recursive: true, force: true });
      process.off('exit', onExit);
      throw new Error(`nginx (${bin}) exited at start (${proc.exitCode ?? proc.signalCode}):\n${l.output}\n${l.error}`);
    }
    try {
      const r = await fetch(`http://127.0.0.1:${port}${upPath}`);
      if (r.status === 204) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > end) {
      const l = logs();
      await stop();
      throw new Error(`nginx did not answer on 127.0.0.1:${port} within 10 s:\n${l.output}\n${l.error}`);
    }
    await sleep(50);
  }
  return { url: `http://127.0.0.1:${port}/mcp`, port, dir, proc, conf, logs, stop };
}

/** Lines of an nginx error log that mean a proxied stream was cut (upstream side). */
export function streamCutLines(errorLog: string): string[] {
  return (
    errorLog
      .split('\n')
      .filter((l) => /upstream prematurely closed|reset by peer|upstream timed out|broken pipe/i.test(l))
      // A client that closes its own stream (a test's deliberate close) is logged by nginx as
      // "client prematurely closed connection ... (104: Connection reset by peer)" when keep-alive
      // bytes were still unread in the client's socket: the kernel answers with a reset. That is
      // the client leaving, not the stream being cut.
      .filter((l) => !/client prematurely closed connection/i.test(l))
  );
}

/**
 * Access log lines (either configuration's format) that a client saw as a failure: status 499
 * or 5xx, or a gateway's 5xx on any try (`allowUpstream` exempts some upstream statuses, e.g.
 * a 502 for a try on a stopped gateway that nginx then passed to the next one).
 */
export function failedAccessLines(access: string, allowUpstream: RegExp = /^$/): string[] {
  return access
    .split('\n')
    .filter(Boolean)
    .filter((l) => {
      const [, status, , upstreamStatus] = l.split('|');
      if (/^(499|5\d\d)$/.test(status ?? '')) return true;
      return (upstreamStatus ?? '')
        .split(/[,:]\s*/)
        .some((s) => /^5\d\d$/.test(s.trim()) && !allowUpstream.test(s.trim()));
    });
}
