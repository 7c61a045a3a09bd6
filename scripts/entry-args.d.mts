/** Types of scripts/entry-args.mjs (also used by the benchmark, bench/run.ts). */
import type { ParseArgsConfig } from 'node:util';
/**
 * Parses `argv` (default `process.argv.slice(2)`) with `options` plus `-h/--help` and
 * `-v/--version`; answers help and version and exits (0), an unknown option exits 2.
 */
export declare function entryArgs(o: {
  argv?: string[];
  name: string;
  usage: string;
  options?: NonNullable<ParseArgsConfig['options']>;
  allowPositionals?: boolean;
  hint?: string;
}): { values: Record<string, string | boolean | undefined>; positionals: string[] };
/** `version` of the repository's package.json. */
export declare function repoVersion(): string;
