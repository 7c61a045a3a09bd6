/**
 * Every relative link in the README, the docs pages and k8s/README.md resolves: to a file that
 * exists and, when it carries a `#anchor`, to a heading of that file (GitHub's slug rules:
 * lower case, punctuation dropped, spaces to hyphens, `-1`, `-2`… for repeated headings).
 * Links inside code blocks and inline code are not links; absolute URLs are not checked.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(fileURLToPath(new URL('.', import.meta.url)), '..', '..');

/** The Markdown files checked, relative to the repository root. */
function checkedFiles(): string[] {
  const docs = readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`);
  return ['README.md', 'k8s/README.md', ...docs];
}

/** The lines of a Markdown text outside fenced code blocks (others replaced by ''). */
function proseLines(text: string): string[] {
  let fence: string | undefined;
  return text.split('\n').map((line) => {
    const m = /^\s*(```+|~~~+)/.exec(line);
    if (m) {
      if (fence === undefined) fence = m[1]![0]!;
      else if (m[1]![0] === fence) fence = undefined;
      return '';
    }
    return fence === undefined ? line : '';
  });
}

/** GitHub's anchor for a heading's text. */
export function slug(heading: string): string {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1') // a link's text only
    .replace(/<[^>]+>/g, '') // HTML tags
    .replace(/`/g, '');
  return text
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
}

/** Every anchor a Markdown file offers. */
function anchorsOf(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const line of proseLines(text)) {
    const m = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!m) continue;
    const base = slug(m[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  for (const m of text.matchAll(/<a\s+(?:name|id)="([^"]+)"/g)) out.add(m[1]!);
  return out;
}

interface Link {
  file: string;
  line: number;
  target: string;
}

/** Relative link targets of a Markdown file: inline links and reference definitions. */
export function linksOf(file: string, text: string): Link[] {
  const out: Link[] = [];
  proseLines(text).forEach((raw, i) => {
    const line = raw.replace(/`[^`]*`/g, '``'); // inline code holds no links
    const targets = [
      ...[...line.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((m) => m[1]!),
      ...[...line.matchAll(/^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+"[^"]*")?\s*$/g)].map((m) => m[1]!),
    ];
    for (const target of targets) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:, …
      out.push({ file, line: i + 1, target });
    }
  });
  return out;
}

/** Why a link does not resolve, or undefined when it does. */
function problem(link: Link): string | undefined {
  const [pathPart, anchor] = link.target.split('#', 2) as [string, string | undefined];
  const path = decodeURIComponent(pathPart);
  const abs = path === '' ? join(ROOT, link.file) : join(ROOT, dirname(link.file), path);
  if (relative(ROOT, abs).startsWith('..')) return 'points outside the repository';
  if (!existsSync(abs)) return 'no such file';
  if (anchor === undefined || anchor === '') return undefined;
  if (statSync(abs).isDirectory() || !abs.endsWith('.md')) return 'an anchor on a file that is not Markdown';
  if (!anchorsOf(readFileSync(abs, 'utf8')).has(decodeURIComponent(anchor))) return `no heading #${anchor}`;
  return undefined;
}

describe('relative links in the README, docs/ and k8s/README.md resolve', () => {
  it('slugs follow GitHub', () => {
    assert.equal(slug('The terminal client: `mcp-tasks`'), 'the-terminal-client-mcp-tasks');
    assert.equal(slug('The path of a `tasks/get`, file by file'), 'the-path-of-a-tasksget-file-by-file');
    assert.equal(slug('1. A directory for your tools'), '1-a-directory-for-your-tools');
    assert.equal(slug('Redis settings that matter'), 'redis-settings-that-matter');
    assert.equal(slug('requestState keys and rotation'), 'requeststate-keys-and-rotation');
  });

  it('repeated headings get -1, -2; code blocks hold neither headings nor links', () => {
    const text = '# A\n## A\n```\n# B\n[x](nowhere.md)\n```\n`[y](nowhere.md)` [z](#a-1)\n';
    assert.deepEqual([...anchorsOf(text)], ['a', 'a-1']);
    assert.deepEqual(
      linksOf('f.md', text).map((l) => l.target),
      ['#a-1'],
    );
  });

  const files = checkedFiles();
  it('finds the files and their links (guards against a checker that reads nothing)', () => {
    assert.ok(files.length >= 8, `only ${files.length} files`);
    const count = files.reduce((n, f) => n + linksOf(f, readFileSync(join(ROOT, f), 'utf8')).length, 0);
    assert.ok(count > 40, `only ${count} links found`);
  });

  it('the README links every docs page', () => {
    const linked = new Set(
      linksOf('README.md', readFileSync(join(ROOT, 'README.md'), 'utf8')).map((l) => l.target.split('#')[0]),
    );
    assert.deepEqual(
      files.filter((f) => f.startsWith('docs/') && !linked.has(f)),
      [],
    );
  });

  for (const file of files) {
    it(file, () => {
      const broken = linksOf(file, readFileSync(join(ROOT, file), 'utf8'))
        .map((l) => ({ l, why: problem(l) }))
        .filter((x) => x.why !== undefined)
        .map(({ l, why }) => `${l.file}:${l.line}: ${l.target}: ${why}`);
      assert.deepEqual(broken, []);
    });
  }
});
