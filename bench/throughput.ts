/**
 * Throughput figures, side by side with their ceiling in the same run (issue 8 §5): each
 * target gets a 2 s warm-up (JIT: a cold gateway's first round is its slowest), then `rounds`
 * rounds in which every target runs once for `durationS`, in a rotating order (round r starts
 * with target r), so a slow patch of a shared machine hits all of them alike. Per target the median over the rounds of requests/s, p50 and
 * p99 (each taken on its own). With a `pid`, also the target's CPU time during each round
 * (/proc/<pid>/stat, utime + stime): requests per CPU-second is what one core of it serves.
 */
import { readFileSync } from 'node:fs';
import type { BenchProcesses } from './processes.js';
import type { LoadResult } from './load.js';
import type { BenchRequest } from './requests.js';
import { median } from './stats.js';

export interface Target {
  label: string;
  url: string;
  request: BenchRequest;
  /** Process serving it (for its CPU time). */
  pid?: number;
}

/** CPU seconds (user + system) a process has used so far; Linux only (undefined elsewhere). */
export function cpuSeconds(pid: number): number | undefined {
  try {
    // Fields after the parenthesised command name: state is field 3, utime 14, stime 15.
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(f[11]) + Number(f[12])) / 100; // USER_HZ: 100 on Linux
  } catch {
    return undefined;
  }
}

/** One round: the load generator's figures, and CPU seconds the server and Redis used meanwhile. */
export type Round = LoadResult & { cpuS?: number; redisCpuS?: number };

export interface Summary {
  rps: number;
  p50: number;
  p99: number;
  /** Failed requests over all rounds (connection errors, non-2xx, JSON-RPC errors). */
  failed: number;
  /** Requests the target answered during the figure, warm-up included (a profile's divisor). */
  served: number;
  /** Median over the rounds of requests answered per CPU-second of the serving process. */
  perCpuSecond?: number;
  /** Median over the rounds of Redis CPU time per request (µs; redis-server's own CPU). */
  redisUsPerRequest?: number;
  rounds: Round[];
}

/**
 * Runs every target `o.rounds` times for `o.durationS` at `o.connections`, rotating the order
 * each round, and summarizes each by the median round. Throws only if the load process fails;
 * failed requests are counted in `failed`.
 */
export async function alternate(
  b: BenchProcesses,
  targets: Target[],
  o: { connections: number; durationS: number; rounds: number },
): Promise<Record<string, Summary>> {
  const redisPid = b.redis.proc.pid!;
  const spec = (t: Target, durationS: number) => ({
    url: t.url,
    connections: o.connections,
    duration: durationS,
    requests: [t.request],
  });
  const warmUp: Record<string, number> = {};
  for (const t of targets) warmUp[t.label] = (await b.load(spec(t, 2))).total;
  const rounds: Record<string, Round[]> = Object.fromEntries(targets.map((t) => [t.label, []]));
  for (let r = 0; r < o.rounds; r++) {
    for (let k = 0; k < targets.length; k++) {
      const t = targets[(r + k) % targets.length]!;
      const cpu0 = t.pid ? cpuSeconds(t.pid) : undefined;
      const redis0 = cpuSeconds(redisPid);
      const res: Round = await b.load(spec(t, o.durationS));
      const cpu1 = t.pid ? cpuSeconds(t.pid) : undefined;
      const redis1 = cpuSeconds(redisPid);
      if (cpu0 !== undefined && cpu1 !== undefined) res.cpuS = Math.round((cpu1 - cpu0) * 100) / 100;
      if (redis0 !== undefined && redis1 !== undefined) res.redisCpuS = Math.round((redis1 - redis0) * 100) / 100;
      rounds[t.label]!.push(res);
      console.error(
        `  round ${r + 1} ${t.label}: ${res.rps} req/s, p50 ${res.p50} ms, p99 ${res.p99} ms${res.cpuS ? `, ${res.cpuS} CPU-s` : ''}${res.errors + res.non2xx + res.mismatches ? `, ${res.errors} errors, ${res.non2xx} non-2xx, ${res.mismatches} bad bodies` : ''}`,
      );
    }
  }
  return Object.fromEntries(
    Object.entries(rounds).map(([label, rs]) => [
      label,
      {
        rps: median(rs.map((x) => x.rps)),
        p50: median(rs.map((x) => x.p50)),
        p99: median(rs.map((x) => x.p99)),
        failed: rs.reduce((a, x) => a + x.errors + x.non2xx + x.mismatches, 0),
        served: rs.reduce((a, x) => a + x.total, warmUp[label] ?? 0),
        ...(rs.every((x) => x.cpuS) ? { perCpuSecond: Math.round(median(rs.map((x) => x.total / x.cpuS!))) } : {}),
        ...(rs.every((x) => x.redisCpuS !== undefined)
          ? { redisUsPerRequest: Math.round(median(rs.map((x) => (x.redisCpuS! / x.total) * 1e6))) }
          : {}),
        rounds: rs,
      },
    ]),
  );
}
