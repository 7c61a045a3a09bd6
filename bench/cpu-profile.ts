/**
 * Reads a V8 `.cpuprofile` (what `node --cpu-prof` writes) and ranks where the busy time went,
 * for the note on a missed target (issue 8 §6): functions by self time, and self time by
 * package. `(idle)` and `(program)` are left out of the shares (a gateway waiting between
 * figures is not a cost). With the ceiling's profile and the requests each served, where a
 * request costs ours more (`perRequestDifference`). Usable on its own:
 *   node --import tsx bench/cpu-profile.ts <file.cpuprofile> [top=25]
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}

export interface SelfTime {
  /** Function (`name file:line`) or package. */
  what: string;
  /** Share of the busy samples, in percent. */
  pct: number;
  ms: number;
}

const IDLE = new Set(['(idle)', '(program)']);

/** Where a script URL belongs: an npm package, a workspace (`apps/gateway`), or `node:` internals. */
function packageOf(url: string): string {
  const nm = /\/node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (nm) return nm[1]!;
  const ws = /\/((?:apps|packages)\/[^/]+)\//.exec(url);
  if (ws) return ws[1]!;
  if (url.startsWith('node:')) return 'node (internals)';
  return url ? url : '(native / GC)';
}

/** Self time (µs) by function (`name file:line`) and by package of a profile, idle left out. */
function selfTimes(file: string): { busyUs: number; fns: Map<string, number>; pkgs: Map<string, number> } {
  const p = JSON.parse(readFileSync(file, 'utf8')) as { nodes: ProfileNode[]; samples: number[]; timeDeltas: number[] };
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const fns = new Map<string, number>();
  const pkgs = new Map<string, number>();
  let busy = 0;
  p.samples.forEach((id, i) => {
    const { functionName, url, lineNumber } = byId.get(id)!.callFrame;
    if (IDLE.has(functionName)) return;
    const d = p.timeDeltas[i] ?? 0;
    const short = url.replace(/^file:\/\/.*?\/node_modules\//, '').replace(/^file:\/\/.*?\/((apps|packages)\/)/, '$1');
    const key = `${functionName || '(anonymous)'}${short ? ` ${short}:${lineNumber + 1}` : ''}`;
    fns.set(key, (fns.get(key) ?? 0) + d);
    const pkg = packageOf(url);
    pkgs.set(pkg, (pkgs.get(pkg) ?? 0) + d);
    busy += d;
  });
  return { busyUs: busy, fns, pkgs };
}

/** Self time by function and by package, the `top` of each. */
export function profileSummary(
  file: string,
  top = 25,
): { busyMs: number; functions: SelfTime[]; packages: SelfTime[] } {
  const { busyUs: busy, fns, pkgs } = selfTimes(file);
  const rank = (m: Map<string, number>) =>
    [...m.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([what, t]) => ({ what, pct: Math.round((t / busy) * 1000) / 10, ms: Math.round(t / 1000) }));
  return { busyMs: Math.round(busy / 1000), functions: rank(fns), packages: rank(pkgs) };
}

/** One function's self time per request in two profiles (µs), and what ours spends more. */
export interface PerRequest {
  what: string;
  ours: number;
  ceiling: number;
  more: number;
}

/**
 * Where a request costs ours more than the ceiling: each profile's self time divided by the
 * requests its process served while profiled, function by function, ranked by the difference
 * (the `top` largest). What makes the gap between two throughput figures, where one profile
 * alone only ranks ours. Start-up (module loading) is in both profiles and counts as a few
 * tenths of a µs per request.
 */
export function perRequestDifference(
  ours: { file: string; requests: number },
  ceiling: { file: string; requests: number },
  top = 25,
): { oursUs: number; ceilingUs: number; rows: PerRequest[] } {
  const a = selfTimes(ours.file);
  const b = selfTimes(ceiling.file);
  const r = (us: number, n: number) => Math.round((us / n) * 100) / 100;
  const rows = [...new Set([...a.fns.keys(), ...b.fns.keys()])].map((what) => {
    const o = r(a.fns.get(what) ?? 0, ours.requests);
    const c = r(b.fns.get(what) ?? 0, ceiling.requests);
    return { what, ours: o, ceiling: c, more: Math.round((o - c) * 100) / 100 };
  });
  rows.sort((x, y) => y.more - x.more);
  return { oursUs: r(a.busyUs, ours.requests), ceilingUs: r(b.busyUs, ceiling.requests), rows: rows.slice(0, top) };
}

/** The difference as text lines. */
export function formatDifference(d: ReturnType<typeof perRequestDifference>): string {
  const n = (x: number) => x.toFixed(2).padStart(7);
  return [
    `busy µs per request: ours ${d.oursUs}, ceiling ${d.ceilingUs}; self time per request, ranked by what ours spends more:`,
    `   more    ours ceiling`,
    ...d.rows.map((x) => `${n(x.more)} ${n(x.ours)} ${n(x.ceiling)}  ${x.what}`),
  ].join('\n');
}

/** The summary as text lines. */
export function formatSummary(s: ReturnType<typeof profileSummary>): string {
  const line = (r: SelfTime) => `${String(r.pct).padStart(5)} %  ${String(r.ms).padStart(6)} ms  ${r.what}`;
  return [
    `busy ${s.busyMs} ms; self time by package:`,
    ...s.packages.slice(0, 12).map(line),
    'by function:',
    ...s.functions.map(line),
  ].join('\n');
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  console.log(formatSummary(profileSummary(process.argv[2]!, Number(process.argv[3] ?? 25))));
}
