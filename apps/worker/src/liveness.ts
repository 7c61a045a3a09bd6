/**
 * A worker's liveness: starts `liveness-thread.ts` in a worker thread, which keeps
 * `<prefix>:alive:<bullWorkerId>` (PX WORKER_LOST_AFTER_MS, refreshed every fifth of it) for
 * each BullMQ worker of this process, on its own Redis connection. `first` resolves after the
 * first write (the worker takes no job before it: a job of a worker without a key could be
 * taken for lost). `stop()` ends the thread (its keys deleted), at the very end of a drain.
 */
import { Worker as Thread } from 'node:worker_threads';
import type { RedisConfig } from '@mcp-tasks/config';
import type { LivenessThreadData } from './liveness-thread.js';

export interface Liveness {
  first: Promise<void>;
  stop(): Promise<void>;
}

/** The key that says BullMQ worker `id` is alive. */
export const aliveKey = (keyPrefix: string, id: string) => `${keyPrefix}:alive:${id}`;
/** The key that says BullMQ worker `id` writes liveness keys at all. */
export const aliveKnownKey = (keyPrefix: string, id: string) => `${keyPrefix}:alive-known:${id}`;

/** Starts the liveness thread for BullMQ worker ids `ids`. */
export function startLiveness(o: {
  redis: RedisConfig;
  keyPrefix: string;
  ids: string[];
  lostAfterMs: number;
  /** How long `alive-known` outlives the last write (ms): the job lock duration, at least. */
  knownForMs: number;
}): Liveness {
  const data: LivenessThreadData = {
    redis: o.redis,
    keyPrefix: o.keyPrefix,
    ids: o.ids,
    everyMs: Math.max(100, Math.floor(o.lostAfterMs / 5)),
    lostAfterMs: o.lostAfterMs,
    knownForMs: o.knownForMs,
  };
  const thread = new Thread(new URL('./liveness-thread.js', import.meta.url), { workerData: data });
  thread.unref();
  const first = new Promise<void>((resolve, reject) => {
    thread.once('message', () => resolve());
    thread.once('error', reject);
  });
  let exited = false;
  const gone = new Promise<void>((r) => thread.once('exit', () => ((exited = true), r())));
  return {
    first,
    async stop() {
      if (exited) return;
      thread.postMessage('stop');
      await Promise.race([gone, new Promise((r) => setTimeout(r, 500).unref())]);
      if (!exited) await thread.terminate();
    },
  };
}
