/**
 * Redis measurements shared by the benchmark's cost figures (redis-cost.ts, lifecycle-ceiling.ts):
 * `INFO commandstats` calls per command, `INFO cpu` seconds, the idle background rate, and
 * per-unit figures with that background removed.
 */
import type { Redis } from 'ioredis';
import { sleep } from '../test/support/cluster.js';
import { round } from './stats.js';

/** Calls per command from `INFO commandstats`. */
export async function commandstats(r: Redis): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const m of (await r.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) out[m[1]!] = Number(m[2]);
  return out;
}

/** `after - before` per command, without the benchmark's own INFO / MEMORY / MONITOR / ZMSCORE calls. */
export function delta(before: Record<string, number>, after: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(after)) {
    if (/^(info|memory|monitor|zmscore|client\|list|psubscribe|punsubscribe)/.test(k)) continue;
    const d = v - (before[k] ?? 0);
    if (d) out[k] = d;
  }
  return out;
}

/** Redis CPU seconds so far (`INFO cpu`: used_cpu_sys + used_cpu_user, every thread). */
export async function redisCpuS(r: Redis): Promise<number> {
  const info = await r.info('cpu');
  const f = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1] ?? 0);
  return f('used_cpu_sys') + f('used_cpu_user');
}

/** The idle background over `ms`: commands per second by command, and Redis CPU seconds per second. */
export async function idleRate(r: Redis, ms = 2000): Promise<{ perS: Record<string, number>; cpuPerS: number }> {
  const cs0 = await commandstats(r);
  const cpu0 = await redisCpuS(r);
  const t0 = Date.now();
  await sleep(ms);
  const cpu1 = await redisCpuS(r);
  const d = delta(cs0, await commandstats(r));
  const s = (Date.now() - t0) / 1000;
  return {
    perS: Object.fromEntries(Object.entries(d).map(([k, v]) => [k, v / s])),
    cpuPerS: Math.max(0, (cpu1 - cpu0) / s),
  };
}

/** Per-unit commands (by command and in all) and Redis CPU µs over a window, idle removed. */
export function perUnit(
  ops: Record<string, number>,
  cpuS: number,
  elapsedS: number,
  idle: { perS: Record<string, number>; cpuPerS: number },
  n: number,
): { byCommand: Record<string, number>; total: number; us: number } {
  const byCommand: Record<string, number> = {};
  let total = 0;
  for (const [k, v] of Object.entries(ops)) {
    const net = (v - (idle.perS[k] ?? 0) * elapsedS) / n;
    total += Math.max(0, net);
    if (net >= 0.05) byCommand[k] = round(net, 2);
  }
  return {
    byCommand: Object.fromEntries(Object.entries(byCommand).sort((a, b) => b[1] - a[1])),
    total: round(total, 1),
    us: Math.round((Math.max(0, cpuS - idle.cpuPerS * elapsedS) / n) * 1e6),
  };
}
