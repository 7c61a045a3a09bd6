/**
 * The benchmark's child processes (its throwaway Redis, the gateways, the workers, the helper
 * forks) die with it. A child the benchmark starts is `own`ed; `killChildrenOnExit()` (called
 * once, before anything starts) SIGKILLs every owned child that still runs whenever the
 * benchmark ends: a normal exit, SIGINT, SIGTERM, SIGHUP, an uncaught exception or rejection,
 * or EPIPE on stdout/stderr (its reader went away, e.g. `npm run bench | head`). Without it a
 * benchmark that died left them running, re-parented to PID 1. SIGKILL is enough: everything
 * they hold is the benchmark's own (a throwaway Redis, temporary directories).
 */
import type { ChildProcess } from 'node:child_process';
import { constants } from 'node:os';

const owned = new Set<ChildProcess>();

/** Registers `proc` to be killed when the benchmark ends; returns it. */
export function own<T extends ChildProcess>(proc: T): T {
  owned.add(proc);
  proc.once('exit', () => owned.delete(proc));
  return proc;
}

/** SIGKILLs every owned child that still runs (synchronous: safe in an `exit` handler). */
function killOwned(): void {
  for (const c of owned) {
    if (c.exitCode !== null || c.signalCode !== null) continue;
    try {
      c.kill('SIGKILL');
    } catch {
      // already gone
    }
  }
  owned.clear();
}

/**
 * Installs the handlers that kill the owned children when this process ends, however it ends.
 * A signal exits with 128 + its number, as a shell reports it; an uncaught error with 1.
 */
export function killChildrenOnExit(): void {
  process.on('exit', killOwned);
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(sig, () => {
      killOwned();
      process.exit(128 + constants.signals[sig]);
    });
  }
  // EPIPE on a closed stdout or stderr: nobody reads the output any more, so stop (quietly:
  // writing the error would fail the same way).
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', () => {
      killOwned();
      process.exit(1);
    });
  }
  const fatal = (e: unknown) => {
    killOwned();
    try {
      process.stderr.write(`bench: ${(e as Error)?.stack ?? String(e)}\n`);
    } finally {
      process.exit(1);
    }
  };
  process.on('uncaughtException', fatal);
  process.on('unhandledRejection', fatal);
}
