#!/usr/bin/env node
/**
 * `npm test`: compiles every workspace first (`tsc -b`, incremental: about 2 s when nothing
 * changed), because the gateway and worker processes the tests start run the compiled
 * `apps/<app>/dist/main.js` (issue 8 §4); then runs every `test/**\/*.test.ts` with Node's test
 * runner (the test files themselves through tsx), against real Redis and real processes.
 * Needs a Redis at TEST_REDIS_URL (default redis://127.0.0.1:6379; tests only touch their own
 * key prefixes) and `redis-server` on PATH for the fault tests. Pass file paths or a substring filter to run a subset:
 *   npm test -- test/e2e/flow.test.ts      npm test -- conformance
 */
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
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
process.exit(r.status ?? 1);
