/**
 * Runs a real MCP client script (test/clients/*) that prints one JSON line per call
 * (`{client, mode, call, ok, detail, ms}`) and collects those lines, without blocking this
 * process (the round-robin proxy the client talks to runs in it).
 */
import { execFile } from 'node:child_process';

/** One call a client script reported. */
export interface ClientLine {
  client: string;
  mode: string;
  call: string;
  ok: boolean;
  detail: string;
  ms: number;
}

/**
 * Runs `command args` (at most `timeoutMs`); resolves with its lines, its stderr and its exit
 * code; rejects only when it printed no line and failed.
 */
export function runClientScript(
  command: string,
  args: string[],
  { timeoutMs = 120_000, env = {} as Record<string, string> } = {},
): Promise<{ lines: ClientLine[]; stderr: string; code: number }> {
  return new Promise((resolve, reject) => {
    execFile(
      command,
      args,
      { timeout: timeoutMs, maxBuffer: 4 * 1024 * 1024, env: { ...process.env, ...env } },
      (err, stdout, stderr) => {
        const lines = stdout
          .split('\n')
          .filter((l) => l.startsWith('{'))
          .map((l) => JSON.parse(l) as ClientLine);
        const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
        if (err && !lines.length && err.killed) reject(new Error(`${command}: ${err.message}\n${stderr.slice(-3000)}`));
        else resolve({ lines, stderr, code });
      },
    );
  });
}
