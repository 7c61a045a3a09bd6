#!/usr/bin/env node
/**
 * Compiles every workspace to `dist/` (`tsc -b`, incremental: about 2 s when nothing changed)
 * so that the processes `npm start`, `npm run gateway|worker`, `npm test` and `npm run bench`
 * start run current JavaScript (issue 8 §4). Without TypeScript installed (a production-only
 * install, `npm ci --omit=dev`) nothing is compiled and the existing `dist/` is used as it is.
 *
 *   node scripts/build.mjs          exit 0 when dist/ is current, 1 (tsc's output on stderr) if not
 *   import { build } from './build.mjs'; build()   the same, throws instead of exiting
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

/** The compiled entry point of an app: `apps/<kind>/dist/main.js` (absolute path). */
export const appEntry = (kind) => join(ROOT, 'apps', kind, 'dist', 'main.js');

/**
 * Runs `tsc -b` at the repository root. Throws an Error whose message carries tsc's output when
 * the build fails, or when TypeScript is absent and `dist/` was never built.
 */
export function build() {
  let tsc;
  try {
    tsc = join(dirname(createRequire(import.meta.url).resolve('typescript/package.json')), 'bin', 'tsc');
  } catch {
    if (existsSync(appEntry('gateway')) && existsSync(appEntry('worker'))) return;
    throw new Error(
      'build: TypeScript is not installed and dist/ is missing: run `npm ci` (with dev dependencies), then `npm run build`',
    );
  }
  // The first build takes a while (tens of seconds on a busy machine): say so, on stderr.
  if (!existsSync(appEntry('gateway')) || !existsSync(appEntry('worker')))
    process.stderr.write(
      'build: compiling the TypeScript sources to dist/ (first run; later runs take a few seconds)…\n',
    );
  const r = spawnSync(process.execPath, [tsc, '-b'], { cwd: ROOT, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`build: tsc -b failed (exit ${r.status ?? r.signal})\n${r.stdout}${r.stderr}`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  try {
    build();
  } catch (e) {
    console.error(e.message);
    process.exit(1);
  }
}
