/** Types of scripts/inspector.mjs (the MCP Inspector CLI runner). */
export declare const INSPECTOR_DIR: string;

export interface InspectorRun {
  /** The Inspector's exit code (0 ok, 1 error, 3 auth required, 5 tool returned isError); null if killed. */
  code: number | null;
  stdout: string;
  stderr: string;
  /** Wall time of the run, ms. */
  ms: number;
  /** True when it was killed after `timeoutMs`. */
  timedOut: boolean;
}

export declare function inspectorBinPath(): string;
export declare function installProblem(): string | null;
export declare function ensureInstalled(opts?: { log?: (line: string) => void }): void;
export declare function runInspector(
  args: readonly string[],
  opts?: { timeoutMs?: number; install?: boolean },
): Promise<InspectorRun>;
