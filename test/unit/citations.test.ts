/**
 * Only citations that resolve in the repository: the code and scripts under apps/ and
 * packages/ cite requirement ids (docs/requirements.md, checked by requirement-ids.test.ts) and
 * docs/ pages, never documents outside the repository: no `issue N` / `issue N §M`, no
 * `sdk-notes`, `bullmq-notes` or `clients.md`. A decision such a note stood for is written in
 * the comment itself, or in docs/architecture.md / docs/requirements.md and linked from there.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(fileURLToPath(new URL('.', import.meta.url)), '..', '..');

/** A citation of a document outside the repository. */
const OUTSIDE_CITATION = /\bissue \d+\b|\bsdk-notes\b|\bbullmq-notes\b|\bclients\.md\b/i;

/** What starts a comment's continuation line (`*`, `//`, `--` in Lua, `#`), with its spaces. */
const COMMENT_LEAD = /^\s*(?:\*|\/\/|--|#)?\s*/;

/**
 * The citations in `text`, as `<line>: <text>`: one on a line, or one split across a line break
 * (`(issue` at the end of a line, `10 §4)` at the start of the next, after its comment lead).
 */
function citationsIn(text: string): string[] {
  const lines = text.split('\n');
  const found: string[] = [];
  lines.forEach((line, i) => {
    if (OUTSIDE_CITATION.test(line)) return found.push(`${i + 1}: ${line.trim()}`);
    const next = lines[i + 1];
    if (next === undefined || OUTSIDE_CITATION.test(next)) return;
    const joined = `${line.trimEnd()} ${next.replace(COMMENT_LEAD, '')}`;
    if (OUTSIDE_CITATION.test(joined)) found.push(`${i + 1}-${i + 2}: ${line.trim()} / ${next.trim()}`);
  });
  return found;
}

/** Source and script files under `dir` (no dist/, node_modules/), relative to the root. */
function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (name === 'dist' || name === 'node_modules') return [];
    if (statSync(path).isDirectory()) return files(path);
    return /\.(ts|mts|js|mjs|lua|json|md)$/.test(name) ? [relative(ROOT, path)] : [];
  });
}

describe('citations in apps/ and packages/ resolve in the repository', () => {
  it('the pattern catches each form and spares what is not a citation', () => {
    for (const bad of [
      '(issue 9 §6)',
      'issue 11 §4, §5',
      '(case B-15, issue 8)',
      'sdk-notes §1.3',
      'bullmq-notes §4',
      'clients.md 5c',
    ])
      assert.ok(OUTSIDE_CITATION.test(bad), bad);
    for (const ok of ['(D10)', 'case N-09', 'docs/architecture.md', 'the issuer', 'tissue 9'])
      assert.ok(!OUTSIDE_CITATION.test(ok), ok);
  });

  it('a citation split across a line break is caught, in each comment style', () => {
    for (const text of [
      ' * MAX_OUTSTANDING_TASKS (issue\n *   10 §4); PEXPIREAT',
      '  // the largest cost (issue 8\n  // §6 profile)',
      '-- see issue\n-- 12',
    ])
      assert.equal(citationsIn(text).length, 1, text);
    assert.deepEqual(citationsIn(' * a tissue\n * 9 cells, the issuer\n * 4 keys'), []);
  });

  it('no file under apps/ or packages/ cites an issue or an outside note', () => {
    const scanned = [...files(join(ROOT, 'apps')), ...files(join(ROOT, 'packages'))];
    assert.ok(scanned.length > 100, `only ${scanned.length} files scanned`);
    const found = scanned.flatMap((file) =>
      citationsIn(readFileSync(join(ROOT, file), 'utf8')).map((at) => `${file}:${at}`),
    );
    assert.deepEqual(found, [], 'citations of documents outside the repository');
  });
});
