/**
 * What a test file needs besides Node, so that `npm test -- <files>` checks only what the
 * selected files need (a unit test needs nothing). Each test file that needs something says so
 * in one header line before its imports:
 *
 *   // @needs redis redis-server
 *
 * The needs (any order, spaces or commas between them):
 *   redis         a Redis for the tests: TEST_REDIS_URL, else the one on 127.0.0.1:LOCAL_REDIS_PORT
 *                 (6379), else a throwaway `redis-server` that `npm test` starts for the run;
 *   redis-server  the binary: the file starts throwaway Redis servers (fault tests, clusters);
 *   nginx         the binary (NGINX_BIN, /usr/sbin/nginx or PATH): the file runs behind a real nginx;
 *   tmux          the binary: the file drives a terminal;
 *   python-clients the Python MCP clients' venv (tools/python/.venv, scripts/python-clients.mjs);
 *   typescript-sdk the TypeScript SDK 1.32 in tools/typescript-sdk (scripts/typescript-sdk.mjs).
 * test/unit/test-needs.test.ts checks every test file's line against what the file starts.
 * Plain Node, no dependencies: it runs before anything is built.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** Every need a header may name, with what the files use it for (for the missing-prerequisite line). */
export const NEEDS = {
  redis: 'a Redis for their keys',
  'redis-server': 'throwaway Redis servers',
  nginx: 'a real nginx in front of the gateways',
  tmux: 'a terminal to drive',
  'python-clients': 'the Python MCP clients (mcp 2.3.0, fastmcp 4.0.10) in tools/python/.venv',
  'typescript-sdk': 'the TypeScript SDK 1.32 in tools/typescript-sdk',
};

const LINE = /^\/\/ @needs\b(.*)$/m;

/**
 * The needs a test file's text declares: its `// @needs …` line before the first `import`
 * (none: `[]`). @throws Error naming the unknown need, or a second `@needs` line.
 */
export function declaredNeeds(text, file = 'test file') {
  const firstImport = text.search(/^import\b/m);
  const head = firstImport < 0 ? text : text.slice(0, firstImport);
  const m = LINE.exec(head);
  if (!m) return [];
  if (LINE.test(head.slice(m.index + m[0].length))) throw new Error(`${file}: more than one "// @needs" line`);
  const needs = m[1].split(/[\s,]+/).filter(Boolean);
  for (const n of needs)
    if (!(n in NEEDS)) throw new Error(`${file}: unknown need "${n}" (known: ${Object.keys(NEEDS).join(', ')})`);
  return [...new Set(needs)].sort();
}

/**
 * For test files (paths relative to `root`): each need, with the files that declare it.
 * @returns Map need → files, only for needs some file declares
 */
export function needsOfFiles(root, files) {
  const out = new Map();
  for (const f of files)
    for (const n of declaredNeeds(readFileSync(join(root, f), 'utf8'), f)) out.set(n, [...(out.get(n) ?? []), f]);
  return out;
}

/** "a, b, c and 4 more": the first `max` files of a list, for a one-line message. */
export function fewFiles(files, max = 3) {
  return files.length <= max ? files.join(', ') : `${files.slice(0, max).join(', ')} and ${files.length - max} more`;
}
