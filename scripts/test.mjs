#!/usr/bin/env node
/**
 * `npm test`: compiles every workspace first (`tsc -b`, incremental: about 2 s when nothing
 * changed), because the gateway and worker processes the tests start run the compiled
 * `apps/<app>/dist/main.js` (issue 8 §4); then runs every `test/**\/*.test.ts` with Node's test
 * runner (the test files themselves through tsx), against real Redis and real processes.
 * The tests that need a Redis use TEST_REDIS_URL (default redis://127.0.0.1:6379; tests only
 * touch their own key prefixes). Pass file paths or a substring filter to run a subset:
 *   npm test -- test/e2e/flow.test.ts      npm test -- conformance
 *
 * Prerequisites are checked first, before anything runs (issue 11 §6), and only those the
 * selected files declare in their `// @needs` line (scripts/test-needs.mjs): `redis-server`,
 * `nginx` (NGINX_BIN, /usr/sbin/nginx or PATH), `tmux`, the Python clients' venv, the TypeScript SDK 1.32, a Redis; one line per missing piece with
 * the files that need it and its install commands, exit 1. A unit test needs none of them. For
 * files that need a Redis, without TEST_REDIS_URL, the Redis answering on
 * 127.0.0.1:LOCAL_REDIS_PORT (6379) is used; when nothing answers there, a throwaway
 * `redis-server` on a free port serves the run (no persistence) and is stopped after it.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { findNginx, findOnPath, INSTALL, probeRedis, startRedisServer } from './local-redis.mjs';
import { fewFiles, needsOfFiles, NEEDS } from './test-needs.mjs';
import { pythonClientsProblem } from './python-clients.mjs';
import { typescriptSdkProblem } from './typescript-sdk.mjs';

import { build, ROOT as root } from './build.mjs';

const walk = (dir) =>
  readdirSync(dir).flatMap((f) => {
    const p = join(dir, f);
    return statSync(p).isDirectory() ? walk(p) : p.endsWith('.test.ts') ? [relative(root, p)] : [];
  });
const args = process.argv.slice(2);
let files = walk(join(root, 'test')).sort();
if (args.length) files = files.filter((f) => args.some((a) => f === a || f.includes(a)));
if (!files.length) {
  console.error('no test files matched');
  process.exit(1);
}

// --- Prerequisites of the selected files: one line per missing piece, before anything runs ----
let needs;
try {
  needs = needsOfFiles(root, files);
} catch (e) {
  console.error(`npm test: ${e.message}`);
  process.exit(1);
}
/** "(needed by test/e2e/x.test.ts, …: a real nginx in front of the gateways)": who needs `need`, for what. */
const who = (need) => `(needed by ${fewFiles(needs.get(need))}: ${NEEDS[need]})`;
const missing = [];
const redisServer = findOnPath('redis-server');
if (needs.has('redis-server') && !redisServer)
  missing.push(`redis-server is not installed ${who('redis-server')}; install it: ${INSTALL['redis-server']}`);
if (needs.has('nginx') && !findNginx())
  missing.push(
    `nginx is not installed${process.env.NGINX_BIN ? ` at NGINX_BIN=${process.env.NGINX_BIN}` : ''} ${who('nginx')}; install it: ${INSTALL.nginx}`,
  );
if (needs.has('tmux') && !findOnPath('tmux'))
  missing.push(`tmux is not installed ${who('tmux')}; install it: ${INSTALL.tmux}`);
if (needs.has('python-clients')) {
  const problem = pythonClientsProblem();
  if (problem) missing.push(`${problem} ${who('python-clients')}; install it: ${INSTALL['python-clients']}`);
}
if (needs.has('typescript-sdk')) {
  const problem = typescriptSdkProblem();
  if (problem) missing.push(`${problem} ${who('typescript-sdk')}; install it: ${INSTALL['typescript-sdk']}`);
}
let testRedis;
if (!needs.has('redis')) {
  // Nothing selected talks to a Redis: none is asked for, none is started.
} else if (process.env.TEST_REDIS_URL) {
  const u = new URL(process.env.TEST_REDIS_URL);
  const found = await probeRedis(u.hostname.replace(/^\[|\]$/g, ''), Number(u.port || 6379));
  if (found !== 'redis' && found !== 'auth')
    missing.push(`no Redis answers at TEST_REDIS_URL=${u.host} ${who('redis')}: start it, or unset TEST_REDIS_URL`);
} else if (!missing.length) {
  const port = Number(process.env.LOCAL_REDIS_PORT || 6379);
  const found = await probeRedis('127.0.0.1', port);
  if (found === 'redis') process.env.TEST_REDIS_URL = `redis://127.0.0.1:${port}`;
  else if (found !== 'none')
    missing.push(`127.0.0.1:${port} answers but not as a Redis without a password: set TEST_REDIS_URL`);
  else if (!redisServer)
    missing.push(
      `no Redis answers on 127.0.0.1:${port} and redis-server is not installed to start one for the run ${who('redis')}; install it: ${INSTALL['redis-server']}, or set TEST_REDIS_URL`,
    );
  else {
    const free = await new Promise((resolve) => {
      const srv = createServer().listen(0, '127.0.0.1', () => {
        const { port: p } = srv.address();
        srv.close(() => resolve(p));
      });
    });
    const dir = mkdtempSync(join(tmpdir(), 'mcp-test-redis-'));
    testRedis = await startRedisServer({ port: free, dir, aof: false });
    testRedis.dir = dir;
    // However this process ends, the throwaway Redis ends too (the normal path waits for it below).
    process.on('exit', () => testRedis.proc.exitCode === null && testRedis.proc.kill('SIGTERM'));
    process.env.TEST_REDIS_URL = testRedis.url;
    console.log(
      `npm test: no Redis answers on 127.0.0.1:${port}, so the tests use a throwaway redis-server on 127.0.0.1:${free} (stopped after the run)`,
    );
  }
}
if (missing.length) {
  for (const line of missing) console.error(`npm test: ${line}`);
  process.exit(1);
}
// Ctrl-C reaches the test runner too; this process waits for it, then stops the throwaway Redis.
process.on('SIGINT', () => undefined);
try {
  build();
} catch (e) {
  console.error(e.message);
  process.exit(1);
}
const r = spawnSync(
  process.execPath,
  [
    '--conditions=mcp-tasks-src',
    '--import',
    'tsx',
    '--test',
    '--test-reporter=spec',
    `--test-concurrency=${process.env.TEST_CONCURRENCY ?? 2}`,
    ...files,
  ],
  { cwd: root, stdio: 'inherit' },
);
if (testRedis) {
  await testRedis.stop();
  rmSync(testRedis.dir, { recursive: true, force: true });
}
process.exit(r.status ?? 1);
