/**
 * What every command shares: the endpoint and credential (from `--url` / `MCP_TASKS_URL` and
 * `MCP_TASKS_TOKEN`), the exit codes, and one wording for every error a person can meet.
 */
import { readFileSync } from 'node:fs';
import { RpcError, TaskClient } from '@mcp-tasks/client';

/** Default MCP endpoint: what `npm start` serves. */
export const DEFAULT_URL = 'http://127.0.0.1:3000/mcp';
/** Environment variable holding the bearer credential (an API key or a JWT). */
export const TOKEN_ENV = 'MCP_TASKS_TOKEN';
/** Environment variable holding the endpoint (overridden by `--url`). */
export const URL_ENV = 'MCP_TASKS_URL';

/** Process exit codes (documented in `--help` and docs/cli.md). */
export const EXIT = {
  /** The tool finished and its result is not an error. */
  ok: 0,
  /** The tool's result is an error, the task failed, or a request failed. */
  error: 1,
  /** Bad command line (commander's own errors also exit 1). */
  usage: 2,
  /** The task was cancelled. */
  cancelled: 3,
  /** The task waits for an answer and this terminal cannot prompt (stdin is not a TTY). */
  needsInput: 4,
  /** Ctrl-C, and the task was left running (its id is printed). */
  detached: 130,
} as const;

/** An error to show as one line, with the exit code to leave with. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number = EXIT.error,
  ) {
    super(message);
    this.name = 'CliError';
  }
}

/** The CLI's version, from apps/cli/package.json (works from src/ and dist/ alike). */
export function cliVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}

/** A client for `url` with the credential from the environment. */
export function clientFor(url: string): TaskClient {
  const token = process.env[TOKEN_ENV]?.trim();
  return new TaskClient({
    url,
    ...(token ? { token } : {}),
    clientInfo: { name: 'mcp-tasks-cli', version: cliVersion() },
  });
}

/** One line that says what went wrong and, where there is one, what to do about it. */
export function describeError(e: unknown, url: string): string {
  if (e instanceof CliError) return e.message;
  if (e instanceof RpcError) {
    if (e.httpStatus === 401) {
      return process.env[TOKEN_ENV]
        ? `the server at ${url} refused the credential in ${TOKEN_ENV} (HTTP 401: ${e.message})`
        : `the server at ${url} wants credentials: set ${TOKEN_ENV} to an API key or token (HTTP 401: ${e.message})`;
    }
    if (e.httpStatus === 403) return `forbidden (HTTP 403): ${e.message}`;
    if (e.httpStatus === 429) return `refused by a rate or concurrency limit (HTTP 429): ${e.message}`;
    if (e.httpStatus === 503) return `the service is unavailable right now (HTTP 503): ${e.message}`;
    return e.code === undefined ? e.message : `${e.message} (${e.code})`;
  }
  if (e instanceof Error && e.name === 'AbortError') return 'stopped';
  if (e instanceof TypeError && e.message === 'fetch failed') {
    const cause = (e as { cause?: { code?: string; message?: string } }).cause;
    return `cannot reach ${url} (${cause?.code ?? cause?.message ?? 'network error'}): is the service running (\`npm start\`)? Set --url or ${URL_ENV} to point elsewhere`;
  }
  return e instanceof Error ? e.message : String(e);
}
