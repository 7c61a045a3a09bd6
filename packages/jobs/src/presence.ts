/**
 * Worker heartbeats: which workers are alive, seen from any process.
 *
 * Key: `<prefix>:workers`, a sorted set; member = a worker's id (`<hostname>:<pid>:<random>`,
 * nothing secret), score = when that worker stops counting as alive (ms, **Redis time**, so a
 * worker or gateway whose clock is off counts nobody wrongly). Every heartbeat adds its own
 * entry, removes the expired ones and sets the key's PEXPIRE to the longest lifetime, so the
 * key disappears on its own once every worker is gone (case B-15). A worker that stops cleanly
 * removes itself at once; a killed one stops counting after `ttlMs`.
 *
 * Both scripts touch one key (Cluster-safe) and read the clock with `TIME` (Redis ≥ 5 replicates
 * script effects, so a write after `TIME` is allowed).
 */
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { RedisClient } from './redis.js';

/** workerHeartbeat: KEYS[1] the set; ARGV[1] worker id, ARGV[2] lifetime (ms). Returns the live count. */
const HEARTBEAT_LUA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local longest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], math.max(tonumber(longest[2]), now + ttl))
return redis.call('ZCARD', KEYS[1])
`;

/** countWorkers: KEYS[1] the set. Returns the members whose lifetime has not ended (Redis time). */
const COUNT_LUA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf')
`;

type PresenceRedis = RedisClient & {
  mcpWorkerHeartbeat(key: string, id: string, ttlMs: string): Promise<number>;
  mcpCountWorkers(key: string): Promise<number>;
};

/** A new worker id: host name, pid and 4 random bytes (unique across restarts and containers). */
export function newWorkerId(): string {
  return `${hostname().slice(0, 64)}:${process.pid}:${randomBytes(4).toString('hex')}`;
}

/** Reads and writes the live-worker set on one Redis client. */
export class WorkerPresence {
  readonly key: string;
  private readonly redis: PresenceRedis;
  private cached: number | undefined;
  private timer: ReturnType<typeof setInterval> | undefined;

  constructor(redis: RedisClient, keyPrefix: string) {
    this.key = `${keyPrefix}:workers`;
    if (!('mcpWorkerHeartbeat' in redis))
      redis.defineCommand('mcpWorkerHeartbeat', { numberOfKeys: 1, lua: HEARTBEAT_LUA });
    if (!('mcpCountWorkers' in redis)) redis.defineCommand('mcpCountWorkers', { numberOfKeys: 1, lua: COUNT_LUA });
    this.redis = redis as PresenceRedis;
  }

  /**
   * Records that worker `id` is alive for `ttlMs` from now (Redis time).
   * @returns the number of live workers, this one included. Throws when Redis fails.
   */
  async beat(id: string, ttlMs: number): Promise<number> {
    return Number(await this.redis.mcpWorkerHeartbeat(this.key, id, String(Math.ceil(ttlMs))));
  }

  /** Removes worker `id` at once (clean shutdown). One ZREM. */
  async leave(id: string): Promise<void> {
    await this.redis.zrem(this.key, id);
  }

  /** Live workers now (one script call). Throws when Redis fails. */
  async count(): Promise<number> {
    return Number(await this.redis.mcpCountWorkers(this.key));
  }

  /**
   * Keeps `alive` fresh: counts now and then every `everyMs`, in the background (one call per
   * interval whatever the request rate). A failed count leaves `alive` undefined (unknown).
   * @param onChange called when the count changes (e.g. to log "no worker is running").
   */
  async watch(
    everyMs: number,
    onChange?: (alive: number | undefined, before: number | undefined) => void,
  ): Promise<void> {
    const tick = async () => {
      const before = this.cached;
      this.cached = await this.count().catch(() => undefined);
      if (onChange && before !== this.cached) onChange(this.cached, before);
    };
    await tick();
    this.timer ??= setInterval(() => void tick(), everyMs);
    this.timer.unref();
  }

  /** The last count `watch` read (undefined before the first one, or while Redis fails). */
  get alive(): number | undefined {
    return this.cached;
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }
}

/**
 * A worker's heartbeat loop: beats at once, then every `everyMs`; each beat lasts 3 intervals,
 * so two lost beats in a row are tolerated. `stop()` ends the loop and removes the entry.
 * `lastOk` is when a beat last succeeded (ms, local clock; for the worker's readiness).
 */
export function startHeartbeat(
  presence: WorkerPresence,
  id: string,
  everyMs: number,
  onError: (err: Error) => void = () => undefined,
) {
  const ttlMs = everyMs * 3;
  let lastOk = 0;
  const beat = () =>
    presence
      .beat(id, ttlMs)
      .then(() => {
        lastOk = Date.now();
      })
      .catch(onError);
  const timer = setInterval(() => void beat(), everyMs);
  timer.unref();
  return {
    first: beat(),
    get lastOk() {
      return lastOk;
    },
    ttlMs,
    /** Stops beating and removes the entry (waits at most 1 s: Redis may be away). */
    async stop(): Promise<void> {
      clearInterval(timer);
      await Promise.race([presence.leave(id).catch(onError), new Promise((r) => setTimeout(r, 1000).unref())]);
    },
  };
}

export type Heartbeat = ReturnType<typeof startHeartbeat>;
