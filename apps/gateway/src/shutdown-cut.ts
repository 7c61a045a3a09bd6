/**
 * A deadline that starts when a signal aborts: once the gateway shuts down, a read of a held
 * synchronous call's task that has not answered within a set time counts as Redis away
 * (sync-call.ts, SHUTDOWN_READ_MS).
 */

/** What `cut` resolves to once the time after the abort has passed. */
export const CUT = Symbol('cut short by shutdown');

/** Resolves to CUT `ms` after `signal` aborts; `dispose` drops its listener and timer. */
export function cutAfterAbort(signal: AbortSignal, ms: number): { cut: Promise<typeof CUT>; dispose(): void } {
  let timer: NodeJS.Timeout | undefined;
  let onAbort = () => undefined as void;
  const cut = new Promise<typeof CUT>((resolve) => {
    onAbort = () => {
      timer = setTimeout(() => resolve(CUT), ms);
      timer.unref();
    };
  });
  if (signal.aborted) onAbort();
  else signal.addEventListener('abort', onAbort, { once: true });
  return {
    cut,
    dispose() {
      signal.removeEventListener('abort', onAbort);
      clearTimeout(timer);
    },
  };
}
