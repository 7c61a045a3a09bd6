/**
 * docs/errors.md and `@mcp-tasks/errors` agree (the table is checked against the module, not
 * copied by hand): every code of `ErrorCode` has a row in the codes table and every row's code
 * is one of `ErrorCode`; the `data.reason` table lists exactly `FAILURE_REASONS`. Also: no
 * JSON-RPC code literal (`-32xxx`, `-31429`) in the code of apps/ and packages/ outside
 * packages/errors (comments may cite codes).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ErrorCode, FAILURE_REASONS, isKnownErrorCode } from '@mcp-tasks/errors';

const ROOT = join(fileURLToPath(new URL('.', import.meta.url)), '..', '..');
const DOC = readFileSync(join(ROOT, 'docs/errors.md'), 'utf8');

/** The first cells of the table whose header row starts with `header`. */
function firstColumn(header: string): string[] {
  const lines = DOC.split('\n');
  const start = lines.findIndex((l) => l.startsWith(`| ${header} |`));
  assert.ok(start >= 0, `docs/errors.md has a table headed "${header}"`);
  const cells: string[] = [];
  for (const line of lines.slice(start + 2)) {
    if (!line.startsWith('|')) break;
    cells.push(line.split('|')[1]!.trim());
  }
  return cells;
}

/** The `.ts` files under `dir`, recursively, without dist/ and node_modules/. */
function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (name === 'dist' || name === 'node_modules') return [];
    if (statSync(path).isDirectory()) return sources(path);
    return name.endsWith('.ts') ? [path] : [];
  });
}

/** `text` without its comments (line and block), strings kept. Good enough for this codebase's style. */
function withoutComments(text: string): string {
  return text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:'"`])\/\/.*$/gm, '$1');
}

describe('docs/errors.md against @mcp-tasks/errors', () => {
  it('every ErrorCode has a row, and every row names a known code', () => {
    const rows = firstColumn('JSON-RPC code')
      .map((c) => /^`(-\d+)`$/.exec(c)?.[1])
      .filter((c): c is string => c !== undefined)
      .map(Number);
    for (const [name, code] of Object.entries(ErrorCode))
      assert.ok(rows.includes(code), `ErrorCode.${name} (${code}) has no row in docs/errors.md`);
    for (const code of rows) assert.ok(isKnownErrorCode(code), `docs/errors.md lists ${code}, not in ErrorCode`);
  });

  it('the data.reason table lists exactly FAILURE_REASONS', () => {
    const reasons = firstColumn('`data.reason`').map((c) => c.replace(/`/g, ''));
    assert.deepEqual([...reasons].sort(), [...FAILURE_REASONS].sort());
  });
});

describe('JSON-RPC codes only in packages/errors', () => {
  it('no -32xxx / -31429 literal in the code of apps/*/src and packages/*/src', () => {
    const roots = ['apps', 'packages'].flatMap((top) =>
      readdirSync(join(ROOT, top)).map((name) => join(ROOT, top, name, 'src')),
    );
    const found: string[] = [];
    for (const root of roots) {
      let files: string[];
      try {
        files = sources(root);
      } catch {
        continue;
      }
      for (const file of files) {
        const rel = relative(ROOT, file);
        if (rel.startsWith('packages/errors/')) continue;
        withoutComments(readFileSync(file, 'utf8'))
          .split('\n')
          .forEach((line, i) => {
            if (/(?<![\w.])-3(?:2\d{3}|1429)\b/.test(line)) found.push(`${rel}: ${line.trim()}`);
          });
      }
    }
    assert.deepEqual(found, [], 'JSON-RPC code literals outside packages/errors');
  });
});
