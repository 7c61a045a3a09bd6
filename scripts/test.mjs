#!/usr/bin/env node
/**
 * `npm test`: compiles every workspace first (`tsc -b`, incremental: about 2 s when nothing
 * changed), because the gateway and worker processes the tests start run the compiled
 * `apps/<app>/dist/main.js` (issue 8 §4); then runs every `test/**\/*.test.ts` with Node's test
 * runner (the test files themselves through tsx), against real Redis and real processes.
 * Needs a Redis at TEST_REDIS_URL (default redis://127.0.0.1:6379; tests only touch their own
 * key prefixes) and `redis-server` on PATH for the fault tests. Pass file paths or a substring filter to run a subset:
 *   npm test -- test/e2e/flow.test.ts      npm test -- conformance
 *
 * Prerequisites are checked first, before anything runs (issue 11 §6): `redis-server`, `nginx`
 * (NGINX_BIN, /usr/sbin/nginx or PATH) and `tmux`, one line per missing piece with its install
 * commands, exit 1. Without TEST_REDIS_URL, the Redis answering on 127.0.0.1:LOCAL_REDIS_PORT
 * (6379) is used; when nothing answers there, a throwaway `redis-server` on a free port serves
 * the run (no persistence) and is stopped after it.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { findNginx, findOnPath, INSTALL, probeRedis, startRedisServer } from './local-redis.mjs';

import { build, ROOT as root } from './build.mjs';

// --- Prerequisites: one line per missing piece, before anything runs --------------------------
const missing = [];
if (!findOnPath('redis-server')) missing.push(`redis-server is not installed (tests start throwaway Redis servers); install it: ${INSTALL['redis-server']}`);
const nginx = findNginx();
if (!nginx) missing.push(`nginx is not installed${process.env.NGINX_BIN ? ` at NGINX_BIN=${process.env.NGINX_BIN}` : ''} (test/e2e/cases-b10 runs behind a real nginx); install it: ${INSTALL.nginx}`);
if (!findOnPath('tmux')) missing.push(`tmux is not installed (test/e2e/claude-code-interactive drives a terminal); install it: ${INSTALL.tmux}`);
let testRedis;
if (process.env.TEST_REDIS_URL) {
  const u = new URL(process.env.TEST_REDIS_URL);
  const found = await probeRedis(u.hostname.replace(/^\[|\]$/g, ''), Number(u.port || 6379));
  if (found !== 'redis' && found !== 'auth') missing.push(`no Redis answers at TEST_REDIS_URL=${u.host}: start it, or unset TEST_REDIS_URL`);
} else if (!missing.length) {
  const port = Number(process.env.LOCAL_REDIS_PORT || 6379);
  const found = await probeRedis('127.0.0.1', port);
  if (found === 'redis') process.env.TEST_REDIS_URL = `redis://127.0.0.1:${port}`;
  else if (found !== 'none') missing.push(`127.0.0.1:${port} answers but not as a Redis without a password: set TEST_REDIS_URL`);
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
    console.log(`npm test: no Redis answers on 127.0.0.1:${port}, so the tests use a throwaway redis-server on 127.0.0.1:${free} (stopped after the run)`);
  }
}
if (missing.length) {
  for (const line of missing) console.error(`npm test: ${line}`);
  process.exit(1);
}
// Ctrl-C reaches the test runner too; this process waits for it, then stops the throwaway Redis.
process.on('SIGINT', () => undefined);
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
try {
  build();
} catch (e) {
  console.error(e.message);
  process.exit(1);
}
const r = spawnSync(
  process.execPath,
  ['--conditions=mcp-tasks-src', '--import', 'tsx', '--test', '--test-reporter=spec', `--test-concurrency=${process.env.TEST_CONCURRENCY ?? 2}`, ...files],
  { cwd: root, stdio: 'inherit' },
);
if (testRedis) {
  await testRedis.stop();
  rmSync(testRedis.dir, { recursive: true, force: true });
}
process.exit(r.status ?? 1);
