/**
 * The gateway's drain (SIGTERM / SIGINT), bounded whatever Redis does.
 *
 * Phases, from the signal:
 *  1. drain, SHUTDOWN_DRAIN_DELAY_MS: `/readyz` fails, responses carry `Connection: close`;
 *  2. grace, SHUTDOWN_GRACE_MS: task listen streams end with their final result, the listener
 *     closes, idle keep-alive connections are closed once no request has come for PROXY_QUIET_MS
 *     (a proxy's pooled connection is never closed under a request it is sending), in-flight
 *     requests may finish;
 *  3. hand-off, at most HAND_OFF_WINDOW_MS: every synchronous call still held ends with the
 *     `task_status` hand-off result (its work goes on as a task), or, when Redis did not take the
 *     detach, with `-32603` saying the call could not be handed off (sync-call.ts);
 *  4. abort, at most ABORT_WINDOW_MS: whatever MCP exchange is left is aborted;
 *  5. close, at most CLOSE_WINDOW_MS: Redis connections, queues, the metrics listener and the
 *     trace exporter are closed; a Redis client whose `QUIT` is not answered (Redis stopped or
 *     unreachable) is disconnected instead;
 *  6. exit 0, once the log lines are written (at most FLUSH_WINDOW_MS).
 * So the process exits within SHUTDOWN_DRAIN_DELAY_MS + SHUTDOWN_GRACE_MS + SHUTDOWN_MARGIN_MS
 * (5.5 s). A backstop timer set at the signal enforces that bound: if a phase hangs anyway, the
 * process logs `gateway.exit_forced` and exits 1.
 */
import type { Logger } from '@mcp-tasks/observability';
import { REQUEST_COMMAND_TIMEOUT_MS, type RedisClient } from '@mcp-tasks/jobs';
import type { GatewayApp } from './app.js';

/**
 * Phase 3 (ms): a read in flight is cut short after SHUTDOWN_READ_MS (sync-call.ts), the detach
 * takes at most one Redis command's timeout, and the answer is written: REQUEST_COMMAND_TIMEOUT_MS + 1 s.
 */
export const HAND_OFF_WINDOW_MS = REQUEST_COMMAND_TIMEOUT_MS + 1000;
/** Phase 4 (ms): aborted exchanges end their responses. */
export const ABORT_WINDOW_MS = 1000;
/** Phase 5 (ms): connections and exporters close. */
export const CLOSE_WINDOW_MS = 1000;
/** Phase 6 (ms): the asynchronous log lines are written. */
export const FLUSH_WINDOW_MS = 500;
/**
 * After the listener closes, idle keep-alive connections are closed only once no request has
 * arrived for this long (ms), within SHUTDOWN_GRACE_MS: the proxy in front has stopped sending
 * here by then (its pooled connections were retired by `Connection: close`, and a refused new
 * connection took this gateway out of its rotation).
 */
export const PROXY_QUIET_MS = 1000;
/** The backstop fires this long after the normal path's last deadline (ms). */
const BACKSTOP_SLACK_MS = 100;
/** How long after drain + grace a gateway has exited at the latest (ms). */
export const SHUTDOWN_MARGIN_MS = HAND_OFF_WINDOW_MS + ABORT_WINDOW_MS + CLOSE_WINDOW_MS + FLUSH_WINDOW_MS;

/** Resolves when `p` settles or `ms` passes, whichever is first; true when `p` settled. */
export function within(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p.then(
      () => true,
      () => true,
    ),
    new Promise<boolean>((r) => {
      timer = setTimeout(() => r(false), ms);
      timer.unref();
    }),
  ]).finally(() => clearTimeout(timer));
}

/** Closes a Redis client: `QUIT`, or a plain disconnect when Redis does not answer within `ms`. */
export async function closeRedis(client: RedisClient, ms: number): Promise<void> {
  if (!(await within(client.quit(), ms))) client.disconnect();
}

export interface ShutdownDeps {
  app: GatewayApp;
  log: Logger;
  drainDelayMs: number;
  shutdownGraceMs: number;
  /** Stops the background loops (health checks, presence, clock): synchronous. */
  stopLoops(): void;
  /** Closes queues, the admin view, the metrics listener, the exporter: each may hang on Redis or the network. */
  closeServices(): Promise<unknown>[];
  /** Every Redis connection of the process. */
  redis: RedisClient[];
  /** Ends the process (`process.exit` in production). */
  exit(code: number): void;
}

/**
 * Builds the signal handler (see the module docstring). Calling it twice does nothing more.
 * @returns a function to call with the signal's name.
 */
export function gatewayShutdown(d: ShutdownDeps): (sig: string) => Promise<void> {
  const { app, log } = d;
  let stopping = false;
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms).unref());
  return async (sig) => {
    if (stopping) return;
    stopping = true;
    const started = Date.now();
    const boundMs = d.drainDelayMs + d.shutdownGraceMs + SHUTDOWN_MARGIN_MS;
    // Each phase after the grace also ends by its share of the bound (less BACKSTOP_SLACK_MS, so
    // the normal exit never races the backstop), even when the earlier ones started late.
    const until = started + boundMs - BACKSTOP_SLACK_MS;
    const upTo = (windowMs: number, laterMs: number) => Math.max(0, Math.min(windowMs, until - laterMs - Date.now()));
    setTimeout(() => {
      log.error({ sig, boundMs }, 'gateway.exit_forced: a shutdown phase did not end in time');
      log.flush(() => d.exit(1));
      setTimeout(() => d.exit(1), BACKSTOP_SLACK_MS).unref();
    }, boundMs).unref();
    log.info({ sig, drainDelayMs: d.drainDelayMs, graceMs: d.shutdownGraceMs, boundMs }, 'gateway.draining');
    app.startDrain();
    await sleep(d.drainDelayMs);
    // Listen streams never finish by themselves: end them cleanly (final result) so clients
    // reopen them on another replica. Then stop accepting and let in-flight requests finish.
    app.closeListens();
    const graceEnd = Date.now() + d.shutdownGraceMs;
    // Stop accepting, but keep the idle keep-alive connections a little longer: a proxy (nginx's
    // upstream keepalive pool) may be sending a request on one at the very moment the gateway
    // closes it, and a POST that was sent is never re-sent elsewhere: the client would get a 502.
    // While the listener is closed, a request on a pooled connection is served (with
    // `Connection: close`, so the proxy retires it) and a new connection is refused, which makes
    // the proxy take this gateway out of its rotation. Once no request has come for
    // PROXY_QUIET_MS the proxy has stopped sending here, and the idle connections are closed.
    app.stopAccepting();
    await within(app.quietFor(PROXY_QUIET_MS), d.shutdownGraceMs);
    const closing = app.close();
    // A request that began before the drain answers on a keep-alive connection, which then sits
    // idle (its response said nothing of closing): closed as soon as it is idle, so `close`
    // resolves when the last response is written instead of at the keep-alive timeout.
    const sweep = setInterval(() => app.server.closeIdleConnections(), 100);
    sweep.unref();
    if (!(await within(closing, Math.max(0, graceEnd - Date.now())))) {
      // Synchronous calls still running: handed off (their work continues as a task).
      app.handOffSync();
      const later = ABORT_WINDOW_MS + CLOSE_WINDOW_MS + FLUSH_WINDOW_MS;
      if (!(await within(closing, upTo(HAND_OFF_WINDOW_MS, later)))) {
        // Whatever exchange is left is aborted.
        await within(Promise.all([app.closeMcp(), closing]), upTo(ABORT_WINDOW_MS, CLOSE_WINDOW_MS + FLUSH_WINDOW_MS));
      }
    }
    clearInterval(sweep);
    d.stopLoops();
    const closeMs = upTo(CLOSE_WINDOW_MS, FLUSH_WINDOW_MS);
    await within(Promise.allSettled([...d.closeServices(), ...d.redis.map((c) => closeRedis(c, closeMs))]), closeMs);
    log.info({ sig, afterMs: Date.now() - started }, 'gateway.stopped');
    // Lines are written asynchronously (createLogger): the last ones go out before the exit.
    log.flush(() => d.exit(0));
    setTimeout(() => d.exit(0), upTo(FLUSH_WINDOW_MS, 0)).unref();
  };
}
