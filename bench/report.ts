/**
 * The benchmark's output (issue 8 §5, §6): one row per figure, `figure | ours | ceiling | ratio
 * | target | pass`, printed as a Markdown table (docs/performance.md, "Latest run", takes it
 * verbatim) and written as JSON with the machine it ran on and every round's raw numbers.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { availableParallelism, loadavg } from 'node:os';

export interface Row {
  figure: string;
  ours: number | string;
  ceiling?: number | string;
  /** ours / ceiling, as shown (e.g. `0.81`). */
  ratio?: number;
  target?: string;
  /** undefined: informational, no target. */
  pass?: boolean;
}

/** The machine: cores, CPU model, Node version, load average when the run started. */
export function machine(): Record<string, string | number> {
  const cpu =
    /^model name\s*:\s*(.+)$/m.exec(
      (() => {
        try {
          return readFileSync('/proc/cpuinfo', 'utf8');
        } catch {
          return '';
        }
      })(),
    )?.[1] ?? 'unknown';
  let redis = 'unknown';
  try {
    redis = /v=(\S+)/.exec(execFileSync('redis-server', ['--version'], { encoding: 'utf8' }))?.[1] ?? redis;
  } catch {
    /* not on PATH: the run failed earlier anyway */
  }
  return {
    cores: availableParallelism(),
    cpu,
    node: process.version,
    redis,
    loadAverage1m: Math.round(loadavg()[0]! * 100) / 100,
  };
}

const cell = (v: unknown) => (v === undefined ? '' : String(v));

/** The rows as a Markdown table. */
export function table(rows: Row[]): string {
  const head = ['figure', 'ours', 'ceiling', 'ratio', 'target', 'pass'];
  const lines = rows.map((r) => [
    r.figure,
    cell(r.ours),
    cell(r.ceiling),
    cell(r.ratio),
    cell(r.target),
    r.pass === undefined ? '' : r.pass ? 'pass' : '**FAIL**',
  ]);
  return [
    `| ${head.join(' | ')} |`,
    `|${head.map(() => '---').join('|')}|`,
    ...lines.map((l) => `| ${l.join(' | ')} |`),
  ].join('\n');
}

/** ours / ceiling rounded to 2 decimals. */
export const ratio = (ours: number, ceiling: number): number => Math.round((ours / ceiling) * 100) / 100;
