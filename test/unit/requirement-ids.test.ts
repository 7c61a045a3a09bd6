/**
 * Every requirement id the repository cites resolves in docs/requirements.md (design D13;
 * issue 7 §5). Scans the code, tests, docs, scripts, benchmarks, manifests and top-level files
 * (test/support/requirement-ids.ts says which, and how a case `B-nn` is told from a base-protocol
 * `B-nn`) and fails naming each cited id without a line there, each malformed citation, and each
 * malformed, incomplete or repeated line of the document. The document itself is scanned too:
 * ids its meanings and sources mention must resolve as well.
 *
 * This file is the one file not scanned: its fixtures cite ids that must not exist.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { caseScopes, parseRequirements, scanRepository, scanText, unresolved } from '../support/requirement-ids.js';

const ROOT = join(fileURLToPath(new URL('.', import.meta.url)), '..', '..');
const SELF = 'test/unit/requirement-ids.test.ts';
const DOC = 'docs/requirements.md';

const ids = (text: string) => scanText(text, 'fixture.ts').citations.map((c) => c.id);

describe('requirement-ids scanner (self-test)', () => {
  it('finds every family and gives each its canonical id', () => {
    assert.deepEqual(ids('durable first (T-15, D4); Origin (H-03); SEP-2243 headers; D11 and D-01; LG-01, IO-01'), [
      'T-15',
      'H-03',
      'D-01',
      'LG-01',
      'IO-01',
      'D4',
      'D11',
      'SEP-2243',
    ]);
  });

  it('a bare B-nn is the base protocol; after "case"/"cases" it is a failure case, to the end of the clause', () => {
    assert.deepEqual(ids('missing _meta (B-05)'), ['B-05']);
    assert.deepEqual(ids('unanswered question (case B-05.6)'), ['case B-05']);
    assert.deepEqual(ids('cases B-02, B-07 (a) and N-01; then -32021 (B-07)'), [
      'case B-02',
      'case B-07',
      'case N-01',
      'B-07',
    ]);
    assert.deepEqual(ids("it('Case B-17(h): the retry twice', …) // B-01"), ['case B-17', 'B-01']);
    assert.deepEqual(ids('(T-44, case B-14) and B-06'), ['T-44', 'case B-14', 'B-06']);
    assert.deepEqual(ids('| case B-03 | B-01 |'), ['case B-03', 'B-01']);
    assert.deepEqual(ids('see case B-10. Then B-05 again'), ['case B-10', 'B-05']);
    // "case" must be followed by the id itself: "in that case" opens nothing.
    assert.deepEqual(ids('in that case the answer is -32602 (B-05)'), ['B-05']);
    // N-nn is always a case; suffixes cite the id itself.
    assert.deepEqual(ids('N-04, B-17h, B-16(c)'), ['case N-04', 'B-17', 'B-16']);
    assert.deepEqual(caseScopes('x (case B-14) y'), [[3, 12]]);
  });

  it('flags malformed citations but not the names that merely look like one', () => {
    const r = scanText('see T-5 and H-150; curve P-256; SHA-256, UTF-8', 'fixture.ts');
    assert.deepEqual(
      r.malformed.map((m) => m.raw),
      ['T-5', 'H-150'],
    );
    assert.deepEqual(r.citations, []);
  });

  it('reads the definition tables only, and reports malformed, incomplete and repeated lines', () => {
    const doc = [
      '| family | what |',
      '|---|---|',
      '| `T-nn` | tasks |',
      '',
      '| id | meaning | source |',
      '|---|---|---|',
      '| `T-15` | durable before the handle | Tasks › Task Creation |',
      '| `case B-10` | idle SSE | trigger.dev#2134 |',
      '| `T-5` | bad id | x |',
      '| `H-03` | no source |  |',
      '| `T-15` | again | y |',
    ].join('\n');
    const { entries, problems } = parseRequirements(doc);
    assert.deepEqual([...entries.keys()], ['T-15', 'case B-10']);
    assert.equal(problems.length, 3, problems.join('\n'));
    assert.match(problems[0]!, /:9: malformed id "T-5"/);
    assert.match(problems[1]!, /:10: H-03 needs exactly three cells/);
    assert.match(problems[2]!, /:11: T-15 is listed twice \(first on line 7\)/);
  });

  it('names each unknown id once with where it is cited, and hints "case" for a bare case number', () => {
    const { entries } = parseRequirements(
      '| id | meaning | source |\n|---|---|---|\n| `T-15` | a | b |\n| `case B-10` | c | d |',
    );
    const text = 'T-15 ok; T-99 unknown; T-99 again; B-10 bare; case B-10 fine';
    const r = scanText(text, 'src/x.ts');
    const problems = unresolved(r.citations, r.malformed, entries);
    assert.deepEqual(problems, [
      'B-10 is cited but has no line in docs/requirements.md (a failure case is cited as "case B-10"): src/x.ts:1',
      'T-99 is cited but has no line in docs/requirements.md: src/x.ts:1',
    ]);
  });
});

describe('requirement ids cited in the repository resolve in docs/requirements.md (D13)', () => {
  const { entries, problems: docProblems } = parseRequirements(readFileSync(join(ROOT, DOC), 'utf8'));
  const scan = scanRepository(ROOT, new Set([SELF]));

  it('the scan covers the repository (guards against a walker that silently reads nothing)', () => {
    const files = new Set(scan.citations.map((c) => c.file));
    for (const f of [
      'apps/gateway/src/errors.ts',
      'packages/task-store/lua/createTask-1.lua',
      'README.md',
      '.ci/run',
      DOC,
    ]) {
      assert.ok(files.has(f), `${f} was not scanned or cites nothing`);
    }
    assert.ok(scan.citations.length > 500, `only ${scan.citations.length} citations found`);
  });

  it('docs/requirements.md: every definition line is well formed', () => {
    assert.deepEqual(docProblems, []);
    assert.ok(entries.size > 100, `only ${entries.size} definitions parsed`);
  });

  it('every cited id has a line, and no citation is malformed', () => {
    assert.deepEqual(unresolved(scan.citations, scan.malformed, entries), []);
  });
});
