/** Types of scripts/conformance.mjs (the official conformance suite runner). */
export declare const TOOLS_DIR: string;
export declare const DEFAULT_SCENARIOS: readonly string[];
export declare const SKIPPED_TASKS_SCENARIOS: readonly string[];
export declare const DEFAULT_SPEC_VERSION: string;
export declare const REQUIREMENTS_REVISION: string;
/** The 37 scenarios `--requirements 2026-07-28` scores. */
export declare const SCORED_2026_SCENARIOS: readonly string[];
/** The 3 it runs unscored as pending. */
export declare const PENDING_2026_SCENARIOS: readonly string[];
/** All 50 it runs: scored, the 10 tasks-*, pending. */
export declare const REQUIREMENTS_2026_SCENARIOS: readonly string[];

export interface CheckFailure {
  id: string;
  errorMessage: string;
}

export interface ScenarioResult {
  name: string;
  ok: boolean;
  passed: number;
  failed: number;
  failures: CheckFailure[];
  warnings: number;
  warningChecks: CheckFailure[];
  skipped: number;
  info: number;
  /** SKIPPED checks as the suite wrote them. */
  skippedChecks: CheckFailure[];
  exitCode: number | null;
  /** 0 in a `runRequirements` run (one suite process for all). */
  seconds: number;
  checksFile: string | null;
  logFile: string | null;
  error?: string;
}

export interface ConformanceResult {
  ok: boolean;
  passed: number;
  failed: number;
  outDir: string;
  scenarios: ScenarioResult[];
}

export declare function lockProblem(dir: string): string | null;
export declare function nodeBinaryPath(): string;
export declare function installProblem(): string | null;
export declare function ensureInstalled(opts?: { log?: (line: string) => void }): void;
export declare function runConformance(opts: {
  url: string;
  scenarios?: readonly string[];
  out?: string;
  timeoutMs?: number;
  specVersion?: string | null;
  install?: boolean;
  verbose?: boolean;
  log?: (line: string) => void;
}): Promise<ConformanceResult>;

export interface RequirementsResult extends ConformanceResult {
  /** Wall time of the suite run (s). */
  seconds: number;
  exitCode: number | null;
  logFile: string;
}

export declare function runRequirements(opts: {
  url: string;
  revision?: string;
  expected?: readonly string[];
  out?: string;
  timeoutMs?: number;
  killAfterMs?: number;
  install?: boolean;
  verbose?: boolean;
  log?: (line: string) => void;
}): Promise<RequirementsResult>;
