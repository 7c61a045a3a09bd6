/**
 * Reads a V8 `.cpuprofile` (what `node --cpu-prof` writes) and ranks functions by self time,
 * for the note on a missed target (issue 8 §6). Usable on its own:
 *   node --import tsx bench/cpu-profile.ts <file.cpuprofile> [top=25]
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}

export interface SelfTime {
  fn: string;
  /** Share of all samples, in percent. */
  pct: number;
  ms: number;
}

/** The `top` functions by self time (samples attributed to the function itself, not its callees). */
export function topSelfTime(file: string, top = 25): SelfTime[] {
  const p = JSON.parse(readFileSync(file, 'utf8')) as { nodes: ProfileNode[]; samples: number[]; timeDeltas: number[] };
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const us = new Map<string, number>();
  let total = 0;
  p.samples.forEach((id, i) => {
    const n = byId.get(id)!;
    const url = n.callFrame.url.replace(/^file:\/\/.*?\/node_modules\//, '').replace(/^file:\/\/.*?\/(apps|packages)\//, '$1/');
    const key = `${n.callFrame.functionName || '(anonymous)'} ${url ? `${url}:${n.callFrame.lineNumber + 1}` : ''}`.trim();
    const d = p.timeDeltas[i] ?? 0;
    us.set(key, (us.get(key) ?? 0) + d);
    total += d;
  });
  return [...us.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, top)
    .map(([fn, t]) => ({ fn, pct: Math.round((t / total) * 1000) / 10, ms: Math.round(t / 1000) }));
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  for (const r of topSelfTime(process.argv[2]!, Number(process.argv[3] ?? 25))) console.log(`${String(r.pct).padStart(5)} %  ${String(r.ms).padStart(6)} ms  ${r.fn}`);
}
