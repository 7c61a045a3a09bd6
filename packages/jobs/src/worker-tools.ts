/**
 * Which tools the live workers can run (a gateway and its workers that load
 * different tool modules are detected and reported, not left to hang).
 *
 * Every worker advertises the names of the tools it runs, and renews the advert every
 * `everyMs`; a gateway reads the adverts to find the tools it lists that no live worker runs.
 *
 * Redis key (expiring; renewed by every live worker):
 *   `<prefix>:worker-tools`  hash: field = worker id, value = JSON `{tools: string[], until: ms}`;
 *                       PEXPIRE `ttlMs` on every renewal, so the key disappears
 *                       `ttlMs` after the last worker stopped renewing. A field whose `until`
 *                       has passed (a crashed worker) is ignored and deleted by readers.
 */
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { RedisClient } from './redis.js';

/** Renewal interval and lifetime of an advert (ms). A crashed worker is forgotten after `ttlMs`. */
export const WORKER_ADVERT = { everyMs: 5000, ttlMs: 15_000 } as const;

/** The hash of live workers' tool adverts under `keyPrefix`. */
export const workersKey = (keyPrefix: string) => `${keyPrefix}:worker-tools`;

/** A fresh id for this worker process: `<host>:<pid>:<6 hex>`. */
export function newWorkerId(): string {
  return `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
}

/**
 * A worker's advert: `start()` writes it and renews it every `everyMs`; `stop()` removes it.
 * Write errors are passed to `onError` (a Redis outage must not stop the worker).
 */
export class WorkerToolsAdvert {
  private timer: ReturnType<typeof setInterval> | undefined;

  constructor(
    private readonly redis: RedisClient,
    private readonly keyPrefix: string,
    readonly workerId: string,
    private readonly tools: readonly string[],
    private readonly onError: (err: Error) => void = () => undefined,
    private readonly o: { everyMs: number; ttlMs: number } = WORKER_ADVERT,
  ) {}

  /** Renews the advert every `everyMs` in the background, and writes it once now (awaited; errors go to `onError`). */
  async start(): Promise<void> {
    this.timer = setInterval(() => void this.renew().catch(this.onError), this.o.everyMs);
    this.timer.unref();
    await this.renew().catch(this.onError);
  }

  /** Writes the advert and refreshes the key's expiry. */
  async renew(now = Date.now()): Promise<void> {
    const key = workersKey(this.keyPrefix);
    await this.redis
      .multi()
      .hset(key, this.workerId, JSON.stringify({ tools: this.tools, until: now + this.o.ttlMs }))
      .pexpire(key, this.o.ttlMs)
      .exec();
  }

  /** Stops renewing and removes this worker's field (best effort: waits at most 1 s for Redis). */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    const removed = this.redis.hdel(workersKey(this.keyPrefix), this.workerId).catch(() => 0);
    await Promise.race([removed, new Promise((r) => setTimeout(r, 1000).unref())]);
  }
}

/** What the live workers run, as read from their adverts. */
export interface LiveWorkerTools {
  /** Number of workers whose advert has not expired. */
  workers: number;
  /** Union of their tool names. */
  tools: Set<string>;
}

/**
 * Reads the adverts of the live workers; deletes the fields of workers whose advert expired.
 * @throws when Redis fails.
 */
export async function readLiveWorkerTools(
  redis: RedisClient,
  keyPrefix: string,
  now = Date.now(),
): Promise<LiveWorkerTools> {
  const key = workersKey(keyPrefix);
  const all = await redis.hgetall(key);
  const tools = new Set<string>();
  const stale: string[] = [];
  let workers = 0;
  for (const [id, json] of Object.entries(all)) {
    let ad: { tools?: unknown; until?: unknown };
    try {
      ad = JSON.parse(json) as typeof ad;
    } catch {
      stale.push(id);
      continue;
    }
    if (typeof ad.until !== 'number' || ad.until < now) {
      stale.push(id);
      continue;
    }
    workers++;
    if (Array.isArray(ad.tools)) for (const t of ad.tools) if (typeof t === 'string') tools.add(t);
  }
  if (stale.length) await redis.hdel(key, ...stale).catch(() => 0);
  return { workers, tools };
}

/**
 * The tools of `wanted` that no live worker runs, when at least one worker is live; `[]` when
 * none is (then tasks simply wait for a worker, as documented) or when every tool is covered.
 */
export function toolsWithoutWorker(wanted: readonly string[], live: LiveWorkerTools): string[] {
  if (live.workers === 0) return [];
  return wanted.filter((t) => !live.tools.has(t));
}
