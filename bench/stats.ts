/**
 * Small statistics for the benchmark (issue 8 §5): percentiles of latency samples, the median
 * of rounds, a least-squares slope, and a high-resolution wall clock that agrees across the
 * processes of one machine.
 */

/** Unix time in ms with sub-ms resolution (`performance.timeOrigin + performance.now()`). */
export const wallMs = (): number => performance.timeOrigin + performance.now();

/** Rounds to `digits` decimals. */
export const round = (v: number, digits = 2): number => Math.round(v * 10 ** digits) / 10 ** digits;

export interface Percentiles {
  n: number;
  p50: number;
  p99: number;
  max: number;
}

/** Nearest-rank percentiles of `xs` (ms); throws on an empty sample. */
export function percentiles(xs: number[]): Percentiles {
  if (!xs.length) throw new Error('percentiles: no samples');
  const s = [...xs].sort((a, b) => a - b);
  const q = (p: number) => s[Math.min(s.length - 1, Math.max(0, Math.ceil(p * s.length) - 1))]!;
  return { n: s.length, p50: round(q(0.5)), p99: round(q(0.99)), max: round(s[s.length - 1]!) };
}

/** Median of a list of numbers (the middle round of three). */
export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** Least-squares slope of y over x (units of y per unit of x). */
export function slope(xs: number[], ys: number[]): number {
  const n = xs.length;
  const mx = xs.reduce((a, b) => a + b, 0) / n;
  const my = ys.reduce((a, b) => a + b, 0) / n;
  let num = 0;
  let den = 0;
  for (let i = 0; i < n; i++) {
    num += (xs[i]! - mx) * (ys[i]! - my);
    den += (xs[i]! - mx) ** 2;
  }
  return den ? num / den : 0;
}
