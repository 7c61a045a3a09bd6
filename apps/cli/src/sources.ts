/**
 * Where a followed task's snapshots come from: `tasks/get` every `pollIntervalMs` (the spec's
 * way, T-23; the only way to see `statusMessage` move, since tasks have no progress
 * notifications, T-41), or a `subscriptions/listen` stream for the task's id (T-39: a
 * `notifications/tasks` with the full task on every change of status), which falls back to
 * polling when the server refuses the stream, does not grant the id, or the stream ends early.
 * `tasks/get` is retried on transient failures (network, 429, 502-504) with backoff.
 */
import { RpcError, type Task, type TaskClient } from '@mcp-tasks/client';

/** Poll period when the server suggests none. */
export const DEFAULT_POLL_MS = 1000;

export interface Source {
  /** The next snapshot (the first one at once). Call again only after the previous one resolved. */
  next(): Promise<Task>;
  /** Makes the next poll happen now (after an answer or a cancel). */
  soon(): void;
  close(): void;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

const transient = (e: unknown) =>
  (e instanceof RpcError && [429, 502, 503, 504].includes(e.httpStatus)) ||
  (e instanceof TypeError && e.message === 'fetch failed');

/** `tasks/get`, retried up to 6 times over about 30 s on transient failures. */
export async function getTaskRetrying(client: TaskClient, taskId: string): Promise<Task> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await client.getTask(taskId);
    } catch (e) {
      if (attempt >= 5 || !transient(e)) throw e;
      await sleep(Math.min(8000, 500 * 2 ** attempt));
    }
  }
}

/** Polls `tasks/get`; `first` (e.g. the CreateTaskResult) is the first snapshot when given. */
export function pollingSource(
  client: TaskClient,
  taskId: string,
  first?: Task,
  fallbackIntervalMs = DEFAULT_POLL_MS,
): Source {
  let last = first;
  let delivered = false;
  let skipWait = false;
  return {
    async next() {
      if (!delivered && first) {
        delivered = true;
        return first;
      }
      delivered = true;
      if (last && !skipWait) await sleep(last.pollIntervalMs ?? fallbackIntervalMs);
      skipWait = false;
      last = await getTaskRetrying(client, taskId);
      return last;
    },
    soon() {
      skipWait = true;
    },
    close() {},
  };
}

/**
 * Follows `subscriptions/listen` for `taskId`; on refusal or an early end, polls instead and
 * calls `onFallback` once with the reason. The stream only speaks when the status changes, so
 * with `refresh` (a person watching a progress bar) a quiet stream is topped up with a
 * `tasks/get` every `pollIntervalMs` to keep `statusMessage` current; without it (a script,
 * `watch --notify` in the background) nothing is polled while the stream is up.
 */
export function listenSource(
  client: TaskClient,
  taskId: string,
  onFallback: (reason: string) => void,
  refresh = false,
): Source {
  const queue: Task[] = [];
  let waiting: (() => void) | undefined;
  let ended: string | undefined;
  let closed = false;
  let lastInterval = DEFAULT_POLL_MS;
  let fallback: Source | undefined;
  const ac = new AbortController();
  const wake = () => {
    const w = waiting;
    waiting = undefined;
    w?.();
  };
  // The chain cannot reject: its first .then handles both outcomes, its last only records them.
  void client
    .listenTasks([taskId], {
      signal: ac.signal,
      onAck: (ids) => {
        if (!ids.includes(taskId)) ac.abort(new Error('the server did not grant a live stream for this task'));
      },
      onTask: (t) => {
        if (t.taskId !== taskId) return;
        if (typeof t.pollIntervalMs === 'number') lastInterval = t.pollIntervalMs;
        queue.push(t);
        wake();
      },
    })
    .then(
      () => 'the live stream ended',
      (e: unknown) =>
        ac.signal.aborted && ac.signal.reason instanceof Error
          ? ac.signal.reason.message
          : e instanceof Error
            ? e.message
            : String(e),
    )
    .then((reason) => {
      ended = reason;
      wake();
    });
  return {
    async next() {
      for (;;) {
        const t = queue.shift();
        if (t) return t;
        if (ended !== undefined && !closed) {
          if (!fallback) {
            onFallback(ended);
            fallback = pollingSource(client, taskId, undefined, lastInterval);
          }
          return fallback.next();
        }
        let timer: ReturnType<typeof setTimeout> | undefined;
        const quiet = await new Promise<boolean>((r) => {
          waiting = () => r(false);
          if (refresh) timer = setTimeout(() => r(true), lastInterval);
        });
        clearTimeout(timer);
        if (quiet && queue.length === 0 && ended === undefined) {
          waiting = undefined;
          return getTaskRetrying(client, taskId);
        }
      }
    },
    soon() {
      fallback?.soon();
    },
    close() {
      closed = true;
      ac.abort();
    },
  };
}
