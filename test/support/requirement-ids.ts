/**
 * Requirement ids cited in the repository, and the lines of docs/requirements.md that define
 * them (design D13). Used by test/unit/requirement-ids.test.ts.
 *
 * Id families and their canonical form (what docs/requirements.md lists):
 *  - spec digest ids: a family letter (or `IO`, `LG`), a dash, two digits: `T-15`, `H-03`,
 *    `B-05`, `M-07`, `P-01`, `C-01`, `E-05`, `S-02`, `L-01`, `K-01`, `V-04`, `D-01`;
 *  - design decisions: `D` and one or two digits, no dash: `D4`, `D11`;
 *  - failure cases: `case B-10`, `case N-01`. Case ids `B-nn` collide with the base-protocol
 *    ids `B-nn`, so a case `B-nn` is recognised only in a *case scope*: the word `case` or `cases`
 *    directly followed by a `B-`/`N-` id opens it ("case B-10", "cases B-02, B-05 (a) and N-01"),
 *    and it runs to the end of the clause: `;`, `:`, `|`, `—`, a sentence end (`. `), a closing
 *    bracket it did not open, or the end of the line. Any other `B-nn` is a base-protocol id.
 *    `N-nn` ids are always cases (no spec family uses `N`);
 *  - SEPs: `SEP-` and the number: `SEP-2243`;
 *  - this project's own requirements for durable steps (issue 22): `R-01`…
 * Letter or number suffixes after a two-digit id name a part of it ("case B-17h", "case B-05.6",
 * "case B-16(c)") and cite the id itself.
 *
 * A family prefix followed by one digit, or by three digits or more, is a malformed citation,
 * except the names listed in NOT_IDS (the elliptic curve P-256).
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Families of the spec digests (`/work/shared/spec/*`): letters before the dash; and `R`, the
 * project's own requirements for durable steps (docs/requirements.md).
 */
export const SPEC_FAMILIES = ['T', 'H', 'B', 'V', 'D', 'S', 'M', 'P', 'C', 'E', 'L', 'K', 'IO', 'LG', 'R'] as const;

/** Strings shaped like a citation that are something else. */
export const NOT_IDS = new Set(['P-256']);

/** A canonical id as docs/requirements.md lists it. */
export const CANONICAL_ID = new RegExp(
  `^(?:(?:${SPEC_FAMILIES.join('|')})-\\d{2}|D\\d{1,2}|case [BN]-\\d{2}|SEP-\\d{2,5})$`,
);

export interface Citation {
  /** Canonical id (`T-15`, `D4`, `case B-10`, `SEP-2243`). */
  id: string;
  /** Path relative to the scanned root. */
  file: string;
  /** 1-based. */
  line: number;
  /** The text as written (`T-15`, or `Case B-17h` of "case B-17h"). */
  raw: string;
}

export interface Malformed {
  raw: string;
  file: string;
  line: number;
}

const FAMILY_ALT = [...SPEC_FAMILIES, 'N'].sort((a, b) => b.length - a.length).join('|');
/** A two-digit family id; suffixes (letters, `.n`, `(c)`) are allowed after it. */
const DASHED = new RegExp(`\\b(${FAMILY_ALT})-(\\d{2})(?!\\d)`, 'g');
const MALFORMED = new RegExp(`\\b(?:${FAMILY_ALT})-(?:\\d|\\d{3,})(?!\\d)`, 'g');
const DESIGN = /\bD(\d{1,2})\b/g;
const SEP = /\bSEP-(\d+)\b/g;
const CASE_OPENER = /\bcases?\s+(?=[BN]-\d{2}(?!\d))/gi;

/** [start, end) character ranges of the case scopes in one line. */
export function caseScopes(line: string): Array<[number, number]> {
  const scopes: Array<[number, number]> = [];
  for (const m of line.matchAll(CASE_OPENER)) {
    const start = m.index!;
    let depth = 0;
    let end = line.length;
    for (let i = start + m[0].length; i < line.length; i++) {
      const ch = line[i]!;
      if (ch === '(' || ch === '[') depth++;
      else if (ch === ')' || ch === ']') {
        if (depth === 0) {
          end = i;
          break;
        }
        depth--;
      } else if (ch === ';' || ch === ':' || ch === '|' || ch === '—') {
        end = i;
        break;
      } else if (ch === '.' && (i + 1 === line.length || /\s/.test(line[i + 1]!))) {
        end = i;
        break;
      }
    }
    scopes.push([start, end]);
  }
  return scopes;
}

/** Every citation and malformed citation in one text. */
export function scanText(text: string, file: string): { citations: Citation[]; malformed: Malformed[] } {
  const citations: Citation[] = [];
  const malformed: Malformed[] = [];
  text.split('\n').forEach((lineText, i) => {
    const line = i + 1;
    const scopes = caseScopes(lineText);
    const inCase = (pos: number) => scopes.some(([s, e]) => pos >= s && pos < e);
    for (const m of lineText.matchAll(DASHED)) {
      const [raw, family, digits] = m as unknown as [string, string, string];
      const base = `${family}-${digits}`;
      const isCase = family === 'N' || (family === 'B' && inCase(m.index!));
      citations.push({ id: isCase ? `case ${base}` : base, file, line, raw });
    }
    for (const m of lineText.matchAll(DESIGN)) citations.push({ id: m[0], file, line, raw: m[0] });
    for (const m of lineText.matchAll(SEP)) citations.push({ id: m[0], file, line, raw: m[0] });
    for (const m of lineText.matchAll(MALFORMED)) if (!NOT_IDS.has(m[0])) malformed.push({ raw: m[0], file, line });
  });
  return { citations, malformed };
}

/** Directories and top-level files scanned for citations (relative to the repository root). */
export const SCANNED = {
  dirs: ['apps', 'packages', 'test', 'docs', 'scripts', 'bench', 'k8s', 'tools', '.ci'],
  files: ['README.md', '.env.example', 'Dockerfile', 'docker-compose.yml', 'package.json'],
  skipDirs: new Set(['node_modules', 'dist', '.git', 'coverage', '.venv']),
  skipFiles: new Set(['package-lock.json']),
  /** Extensions read; files without an extension are read too (`.ci/run`). */
  extensions: /\.(?:[cm]?[jt]s|lua|md|json|ya?ml|sh|conf|txt)$/,
};

/** Paths (relative to `root`) of every file the check reads, minus `exclude`. */
export function scannedFiles(root: string, exclude: ReadonlySet<string>): string[] {
  const out: string[] = [];
  const visit = (rel: string) => {
    const abs = join(root, rel);
    let st;
    try {
      st = statSync(abs);
    } catch {
      return; // an optional top-level file that this checkout lacks
    }
    if (st.isDirectory()) {
      for (const name of readdirSync(abs)) if (!SCANNED.skipDirs.has(name)) visit(join(rel, name));
      return;
    }
    const base = rel.split('/').pop()!;
    if (SCANNED.skipFiles.has(base) || exclude.has(rel)) return;
    if (!base.includes('.') || SCANNED.extensions.test(base) || SCANNED.files.includes(rel)) out.push(rel);
  };
  for (const d of SCANNED.dirs) visit(d);
  for (const f of SCANNED.files) visit(f);
  return out.sort();
}

/** Scans every file under `root` that the check covers. */
export function scanRepository(root: string, exclude: ReadonlySet<string>) {
  const citations: Citation[] = [];
  const malformed: Malformed[] = [];
  for (const file of scannedFiles(root, exclude)) {
    const r = scanText(readFileSync(join(root, file), 'utf8'), file);
    citations.push(...r.citations);
    malformed.push(...r.malformed);
  }
  return { citations, malformed };
}

export interface RequirementLine {
  id: string;
  line: number;
  meaning: string;
  source: string;
}

/**
 * The definition lines of docs/requirements.md: the rows of every table whose header row starts
 * with `| id |` (other tables, e.g. the overview of families, are prose). Returns the well-formed
 * ones and the problems: a first cell that is not a canonical id, a row without exactly three
 * non-empty cells (id, meaning, source), an id listed twice.
 */
export function parseRequirements(text: string): { entries: Map<string, RequirementLine>; problems: string[] } {
  const entries = new Map<string, RequirementLine>();
  const problems: string[] = [];
  let inIdTable = false;
  let previousWasRow = false;
  text.split('\n').forEach((raw, i) => {
    const line = i + 1;
    if (!raw.startsWith('|')) {
      previousWasRow = false;
      return;
    }
    const cells = raw
      .split('|')
      .slice(1, -1)
      .map((c) => c.trim());
    const first = (cells[0] ?? '').replace(/`/g, '');
    if (!previousWasRow) inIdTable = first === 'id'; // a table's header row
    previousWasRow = true;
    if (!inIdTable || first === 'id') return;
    if (cells.every((c) => /^:?-+:?$/.test(c))) return; // the separator row
    if (!CANONICAL_ID.test(first)) {
      problems.push(`docs/requirements.md:${line}: malformed id "${first}"`);
      return;
    }
    if (cells.length !== 3 || !cells[1] || !cells[2]) {
      problems.push(`docs/requirements.md:${line}: ${first} needs exactly three cells: id | meaning | source`);
      return;
    }
    if (entries.has(first)) {
      problems.push(
        `docs/requirements.md:${line}: ${first} is listed twice (first on line ${entries.get(first)!.line})`,
      );
      return;
    }
    entries.set(first, { id: first, line, meaning: cells[1], source: cells[2] });
  });
  return { entries, problems };
}

/**
 * Every problem of a scan against the definitions: each cited id without a line (once per id,
 * naming where it is cited), and each malformed citation. A bare `B-nn` that only a case has
 * gets a hint to write "case B-nn".
 */
export function unresolved(
  citations: readonly Citation[],
  malformed: readonly Malformed[],
  entries: ReadonlyMap<string, RequirementLine>,
): string[] {
  const missing = new Map<string, Citation[]>();
  for (const c of citations) {
    if (entries.has(c.id)) continue;
    missing.set(c.id, [...(missing.get(c.id) ?? []), c]);
  }
  const problems: string[] = [];
  for (const [id, where] of [...missing].sort(([a], [b]) => a.localeCompare(b))) {
    const places = [...new Set(where.map((c) => `${c.file}:${c.line}`))];
    const at = places.slice(0, 3).join(', ') + (places.length > 3 ? `, … (${places.length} places)` : '');
    const hint = /^B-\d{2}$/.test(id) && entries.has(`case ${id}`) ? ` (a failure case is cited as "case ${id}")` : '';
    problems.push(`${id} is cited but has no line in docs/requirements.md${hint}: ${at}`);
  }
  for (const m of malformed) problems.push(`${m.file}:${m.line}: malformed requirement id "${m.raw}"`);
  return problems;
}
