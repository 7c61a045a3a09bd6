/**
 * Redis measurements shared by the benchmark's cost figures (redis-cost.ts, lifecycle-ceiling.ts):
 * `INFO commandstats` calls per command, `INFO cpu` seconds, the idle background rate, and
 * per-unit figures with that background removed.
 */
import { createHash } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { Redis } from 'ioredis';
import { sleep } from '../test/support/cluster.js';
import { round } from './stats.js';

const require = createRequire(import.meta.url);
const ROOT = join(dirname(new URL(import.meta.url).pathname), '..');

/** Calls per command from `INFO commandstats`. */
export async function commandstats(r: Redis): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const m of (await r.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) out[m[1]!] = Number(m[2]);
  return out;
}

/**
 * Microseconds Redis spent per command so far (`INFO commandstats` usec). A script call's usec
 * includes the commands it ran, which are also counted under their own names.
 */
export async function commandUsec(r: Redis): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const m of (await r.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=\d+,usec=(\d+)/gm))
    out[m[1]!] = Number(m[2]);
  return out;
}

/** Usec per unit by command over a window (`before`/`after` from `commandUsec`), the largest first. */
export function usecPerUnit(before: Record<string, number>, after: Record<string, number>, n: number) {
  const out: [string, number][] = [];
  for (const [k, v] of Object.entries(delta(before, after))) if (v / n >= 0.5) out.push([k, round(v / n, 1)]);
  return Object.fromEntries(out.sort((a, b) => b[1] - a[1]));
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

/** Starts logging every command's duration (`BENCH_SLOWLOG=1`): SLOWLOG with a 0 µs threshold, emptied. */
export async function startSlowlog(r: Redis): Promise<void> {
  await r.call('CONFIG', 'SET', 'slowlog-log-slower-than', '0', 'slowlog-max-len', '1000000');
  await r.call('SLOWLOG', 'RESET');
}

/**
 * SHA1 → name of every script this service and BullMQ load: ours from packages/task-store/lua
 * (includes expanded as scripts.ts does), BullMQ's from its compiled `dist/cjs/scripts`.
 */
function scriptNames(): Map<string, string> {
  const names = new Map<string, string>();
  const sha = (text: string) => createHash('sha1').update(text).digest('hex');
  const luaDir = join(ROOT, 'packages', 'task-store', 'lua');
  for (const f of readdirSync(luaDir).filter((x) => x.endsWith('.lua'))) {
    const text = readFileSync(join(luaDir, f), 'utf8').replace(/^--@include (\w+)$/gm, (_, inc: string) =>
      readFileSync(join(luaDir, 'includes', `${inc}.lua`), 'utf8'),
    );
    names.set(sha(text), f.replace(/\.lua$/, ''));
  }
  const bullDir = join(dirname(require.resolve('bullmq')), 'scripts');
  for (const f of readdirSync(bullDir).filter((x) => x.endsWith('.js') && x !== 'index.js')) {
    for (const v of Object.values(require(join(bullDir, f)) as Record<string, { name?: string; content?: string }>))
      if (v?.content) names.set(sha(v.content), `bullmq ${v.name ?? f}`);
  }
  return names;
}

/**
 * What the SLOWLOG since `startSlowlog` holds, per unit (`n` tasks or jobs): each script by name
 * (scriptNames; else its SHA's first 8 characters and first key) with its calls, the commands it ran per call
 * and its µs (its commands' included), then the commands sent outside scripts; the most
 * expensive first. A command a script runs is logged, in capitals as the script spells it,
 * before the script's own entry; ioredis sends commands in lower case. The SLOWLOG's own work
 * makes every µs larger (about 1.3× here): compare shares, not µs. Resets the threshold to
 * Redis's default.
 */
export async function slowlogProfile(r: Redis, n: number): Promise<string[]> {
  const log = (await r.call('SLOWLOG', 'GET', '-1')) as [number, number, number, string[]][];
  await r.call('CONFIG', 'SET', 'slowlog-log-slower-than', '10000');
  log.sort((a, b) => a[0] - b[0]);
  const names = scriptNames();
  const by = new Map<string, { calls: number; us: number; inner: number }>();
  let inner = 0;
  for (const [, , us, args] of log) {
    const cmd = args[0]!;
    const lower = cmd.toLowerCase();
    if (/^(slowlog|config|info|memory|zmscore|client)$/.test(lower)) continue;
    if (cmd !== lower && !lower.startsWith('eval')) {
      inner++;
      continue;
    }
    // A script neither loads (the rate limiter's, rate-limiter-flexible): its SHA and first key.
    const unnamed = () => `${args[1]!.slice(0, 8)} (${(args[3] ?? '').replace(/[0-9a-f]{16,}/g, '…')})`;
    const name = lower.startsWith('eval') ? (names.get(args[1]!) ?? unnamed()) : `${lower} (sent)`;
    const e = by.get(name) ?? { calls: 0, us: 0, inner: 0 };
    e.calls++;
    e.us += us;
    if (lower.startsWith('eval')) e.inner += inner;
    inner = 0;
    by.set(name, e);
  }
  return [...by]
    .filter(([, e]) => e.calls / n >= 0.05)
    .sort((a, b) => b[1].us - a[1].us)
    .map(
      ([k, e]) =>
        `${k}: ${round(e.calls / n, 2)} calls/unit, ${round(e.inner / e.calls, 1)} commands/call, ${round(e.us / n, 1)} µs/unit`,
    );
}
