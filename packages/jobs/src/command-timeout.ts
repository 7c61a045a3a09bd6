/**
 * The request client's command timeout (`REQUEST_COMMAND_TIMEOUT_MS`, redis.ts) measured
 * against Redis's answer, not against a stalled event loop.
 *
 * ioredis fails a command whose timer fires before its reply was read ("Command timed out").
 * After the event loop was blocked for longer than the timeout (a process starved of CPU, a long
 * GC), Node runs expired timers before it reads sockets, so a plain timer failed commands whose
 * answers were already waiting in the socket: every command in flight across the stall failed,
 * and a task creation among them was answered 503 "Task store unavailable" (D10) though Redis had
 * answered at once (the likely source of the 503s seen in case B-16a with the suite run twice at
 * once, the gateway's loop 2-5 s late; not reproduced since).
 *
 * `lagTolerantCommandTimeouts()` replaces ioredis' `Command#setTimeout` (public in its typings;
 * ioredis calls it for a client with `commandTimeout`: our `request` and `queue` roles, not
 * the `worker` role's connections) with one that, when the timer fires, looks again after the
 * event loop's next poll for I/O (`setImmediate` runs after it): a reply that had arrived is
 * read first and the command succeeds; a command still unanswered then (a hung Redis) fails as
 * before, with the same error, one loop turn later. The timer is kept where ioredis keeps it
 * (`_commandTimeoutTimer`, a private field), so ioredis clears it when the reply comes, as
 * before; were the field renamed in an ioredis upgrade, each timer would run out instead, find
 * its command settled and do nothing (re-check the field on an upgrade). Idempotent;
 * process-wide (every client of this ioredis copy).
 */
import { Command } from 'ioredis';

/** The (private) field ioredis keeps the timer in, cleared by its `_clearTimers` when the reply comes. */
interface TimerField {
  _commandTimeoutTimer?: NodeJS.Timeout;
}

let installed = false;

/** Installs the lag-tolerant command timeout (see the module doc). Called by `createRedis`. */
export function lagTolerantCommandTimeouts(): void {
  if (installed) return;
  installed = true;
  Command.prototype.setTimeout = function setTimeout(this: Command, ms: number): void {
    const timed = this as unknown as TimerField;
    if (timed._commandTimeoutTimer) return;
    timed._commandTimeoutTimer = globalThis.setTimeout(() => {
      setImmediate(() => {
        if (!this.isSettled) this.reject(new Error('Command timed out'));
      });
    }, ms);
  };
}
