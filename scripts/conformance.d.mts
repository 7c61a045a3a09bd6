/** Types of scripts/conformance.mjs (the official conformance suite runner). */
export declare const TOOLS_DIR: string;
export declare const DEFAULT_SCENARIOS: readonly string[];
export declare const SKIPPED_TASKS_SCENARIOS: readonly string[];
export declare const DEFAULT_SPEC_VERSION: string;

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
  exitCode: number | null;
  seconds: number;
  checksFile: string | null;
  logFile: string;
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
