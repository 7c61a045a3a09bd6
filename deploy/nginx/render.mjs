/**
 * Renders deploy/nginx/mcp.conf.template for an nginx started outside a container
 * (`npm run stack`, the topology tests), exactly as the nginx image does for docker compose:
 * `${NAME}` placeholders replaced, nothing else touched. Also writes the main nginx.conf that
 * includes it, with every file nginx writes (pid, logs, temp files) inside one directory.
 *
 * No npm dependency: scripts/stack.mjs runs it with plain node.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Absolute path of the shared template. */
export const TEMPLATE_PATH = join(dirname(fileURLToPath(import.meta.url)), 'mcp.conf.template');

/** The placeholders the template uses (docker-compose.yml sets the same names). */
export const PLACEHOLDERS = Object.freeze(['NGINX_LISTEN', 'MCP_GATEWAYS', 'NGINX_ACCESS_LOG', 'MAX_BODY_BYTES']);

/** MAX_BODY_BYTES when it is not set (packages/config's default; a unit test keeps them equal). */
export const DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024;

/** What each gateway's `server` line carries (see the upstream block of the template). */
export const SERVER_PARAMETERS = 'max_fails=1 fail_timeout=10s';

/**
 * MAX_BODY_BYTES for the template: `value` (a string from the environment, or a number), else the
 * default. An empty string is the default (as for the gateway). Throws on anything else than an
 * integer >= 1024, as the gateway would refuse to start with it.
 */
export function maxBodyBytesOf(value) {
  if (value === undefined || String(value).trim() === '') return DEFAULT_MAX_BODY_BYTES;
  const n = Number(String(value).trim());
  if (!Number.isInteger(n) || n < 1024) throw new Error(`MAX_BODY_BYTES: must be an integer >= 1024, got ${value}`);
  return n;
}

const EXAMPLE_BEGIN = /^\s*# >>> example: a pool of its own for tasks\/get/;
const EXAMPLE_END = /^\s*# <<< example/;

/**
 * Turns on the template's commented "pool of its own for tasks/get" example: uncomments both
 * example blocks and puts `pollGateways` as the pool's servers. Throws if the template has no
 * such example (so a test of the example never passes on a template that lost it).
 */
function enablePollPool(text, pollGateways) {
  const out = [];
  let inside = false;
  let blocks = 0;
  let serversWritten = false;
  for (const line of text.split('\n')) {
    if (EXAMPLE_BEGIN.test(line)) {
      inside = true;
      blocks++;
      out.push(line);
      continue;
    }
    if (inside && EXAMPLE_END.test(line)) {
      inside = false;
      out.push(line);
      continue;
    }
    if (!inside) {
      out.push(line);
      continue;
    }
    const m = /^(\s*)# ?(.*)$/.exec(line);
    const code = m ? `${m[1]}${m[2]}` : line;
    // Prose lines of the example (sentences) stay comments; directives are uncommented.
    if (!/^\s*(upstream |server |keepalive|}|"tasks\/get")/.test(code)) {
      out.push(line);
      continue;
    }
    if (/^\s*server /.test(code)) {
      if (!serversWritten) {
        const indent = /^(\s*)/.exec(code)[1];
        for (const s of pollGateways) out.push(`${indent}server ${s} ${SERVER_PARAMETERS};`);
        serversWritten = true;
      }
      continue;
    }
    out.push(code);
  }
  if (blocks !== 2 || !serversWritten)
    throw new Error(`${TEMPLATE_PATH}: the tasks/get pool example is missing or changed shape`);
  return out.join('\n');
}

/**
 * The http-context configuration for local gateways.
 * @param {object} o
 * @param {string|number} o.listen      `listen` value: a port or address:port (e.g. `127.0.0.1:8080`)
 * @param {string[]} o.gateways         gateway addresses `host:port` (round robin, in this order)
 * @param {string} o.accessLog          access log path (format `mcp`, see the template)
 * @param {string[]} [o.pollGateways]   turn on the Mcp-Method example: tasks/get goes to these
 * @param {string|number} [o.maxBodyBytes] the gateways' MAX_BODY_BYTES (default: $MAX_BODY_BYTES, else 4 MiB)
 * @returns {string}
 */
export function renderMcpConf({
  listen,
  gateways,
  accessLog,
  pollGateways,
  maxBodyBytes = process.env.MAX_BODY_BYTES,
}) {
  if (!gateways?.length) throw new Error('renderMcpConf: no gateways');
  let text = readFileSync(TEMPLATE_PATH, 'utf8');
  if (pollGateways?.length) text = enablePollPool(text, pollGateways);
  const values = {
    NGINX_LISTEN: String(listen),
    MCP_GATEWAYS: gateways.map((g) => `server ${g} ${SERVER_PARAMETERS};`).join(' '),
    NGINX_ACCESS_LOG: accessLog,
    MAX_BODY_BYTES: String(maxBodyBytesOf(maxBodyBytes)),
  };
  return text.replace(/\$\{([A-Z_][A-Z0-9_]*)\}/g, (all, name) => (name in values ? values[name] : all));
}

/**
 * Writes `<dir>/mcp.conf` (the rendered template) and `<dir>/nginx.conf` (the main file that
 * includes it) for an nginx run in the foreground by a non-root user (or root, then as root).
 * Logs: `<dir>/error.log` (level info) and `<dir>/access.log`.
 * @param {object} o  as renderMcpConf, plus `dir` (created if missing); `accessLog` defaults to `<dir>/access.log`
 * @returns {{ conf: string, mcpConf: string, confPath: string }}
 */
export function writeLocalNginxConf({
  dir,
  listen,
  gateways,
  pollGateways,
  maxBodyBytes,
  accessLog = join(dir, 'access.log'),
}) {
  for (const d of ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) mkdirSync(join(dir, d), { recursive: true });
  const mcpConf = renderMcpConf({ listen, gateways, accessLog, pollGateways, maxBodyBytes });
  const mcpPath = join(dir, 'mcp.conf');
  writeFileSync(mcpPath, mcpConf);
  const user = process.getuid?.() === 0 ? 'user root root;' : '';
  const conf = `# written by deploy/nginx/render.mjs: the main file around ${mcpPath} (from deploy/nginx/mcp.conf.template)
daemon off;
master_process on;
worker_processes 1;
${user}
pid ${join(dir, 'nginx.pid')};
error_log ${join(dir, 'error.log')} info;

events {
  worker_connections 1024;
}

http {
  client_body_temp_path ${join(dir, 'client_body')};
  proxy_temp_path ${join(dir, 'proxy')};
  fastcgi_temp_path ${join(dir, 'fastcgi')};
  uwsgi_temp_path ${join(dir, 'uwsgi')};
  scgi_temp_path ${join(dir, 'scgi')};
  include ${mcpPath};
}
`;
  const confPath = join(dir, 'nginx.conf');
  writeFileSync(confPath, conf);
  return { conf, mcpConf, confPath };
}
