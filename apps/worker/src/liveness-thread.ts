/**
 * The liveness writer, in a worker thread of its own, so that a busy event loop in the
 * worker's main thread (a tool computing for seconds) does not make a live worker look lost.
 * Every `everyMs` it sets, on its own Redis connection, for each BullMQ worker id of the
 * process (the prefix of the lock tokens of the jobs it holds, `<id>:<n>`):
 *   `<prefix>:alive:<id>`        PX `lostAfterMs`: gone = the worker is lost;
 *   `<prefix>:alive-known:<id>`  PX `knownForMs`: this worker writes liveness keys at all (a worker
 *                                of an older version, which does not, is never taken for lost).
 * Single-key SETs (no pipeline): every key may sit on another Cluster slot. A failed write is
 * retried on the next tick. Message `'stop'`: deletes its `alive` keys and exits.
 */
import { parentPort, workerData } from 'node:worker_threads';
import type { RedisConfig } from '@mcp-tasks/config';
import { createRedis } from '@mcp-tasks/jobs';

/** What the main thread passes (`workerData`). */
export interface LivenessThreadData {
  redis: RedisConfig;
  keyPrefix: string;
  ids: string[];
  everyMs: number;
  lostAfterMs: number;
  knownForMs: number;
}

const d = workerData as LivenessThreadData;
const redis = createRedis(d.redis, 'worker', 'mcp-worker-liveness');
redis.on('error', () => undefined); // the main thread's connections report outages
let busy = false;
const tick = async () => {
  if (busy) return; // the previous writes are still waiting for Redis
  busy = true;
  try {
    await Promise.all(
      d.ids.flatMap((id) => [
        redis.set(`${d.keyPrefix}:alive:${id}`, '1', 'PX', d.lostAfterMs),
        redis.set(`${d.keyPrefix}:alive-known:${id}`, '1', 'PX', d.knownForMs),
      ]),
    );
    parentPort?.postMessage('written');
  } catch {
    // next tick
  } finally {
    busy = false;
  }
};
const timer = setInterval(() => void tick(), d.everyMs);
void tick();
parentPort?.on('message', (m) => {
  if (m !== 'stop') return;
  clearInterval(timer);
  void Promise.race([
    Promise.all(d.ids.map((id) => redis.del(`${d.keyPrefix}:alive:${id}`))),
    new Promise((r) => setTimeout(r, 300)),
  ]).finally(() => {
    redis.disconnect();
    process.exit(0);
  });
});
