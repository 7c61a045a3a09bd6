/**
 * ioredis clients with the settings measured in bullmq-notes §5.
 *  - `request`: gateway request path. Fails fast while Redis is away (offline queue off,
 *    1 retry, 2 s command timeout, no resend after a reconnect) so a client gets an error,
 *    never a ghost write later. Auto-pipelined: the commands that concurrent requests issue in
 *    one event-loop turn leave in one write and come back in one read (issue 8 §3: a creation's
 *    five round trips cost the gateway a socket write each otherwise). Never used for blocking
 *    commands or subscriptions (those have their own `worker` connections), and never on a
 *    worker, where BullMQ's own ordering of commands matters.
 *  - `worker`: workers and subscribers. Commands wait for the reconnect (BullMQ requires
 *    `maxRetriesPerRequest: null` on blocking connections), so a finished step's write lands.
 * Reconnect back-off is capped at 2 s (BullMQ's default grows to 20 s).
 */
import { Redis, type RedisOptions } from 'ioredis';

export type RedisRole = 'request' | 'worker';

export const retryStrategy = (times: number): number => Math.min(100 * 2 ** times, 2000);

/** Connection options for a role. */
export function redisOptions(role: RedisRole): RedisOptions {
  return role === 'request'
    ? {
        maxRetriesPerRequest: 1,
        enableOfflineQueue: false,
        // A command that failed for the caller must not be sent again after a reconnect: the
        // client already got an error (case B-02c: no task or job may appear afterwards).
        autoResendUnfulfilledCommands: false,
        commandTimeout: 2000,
        retryStrategy,
        connectTimeout: 5000,
        enableAutoPipelining: true,
      }
    : { maxRetriesPerRequest: null, retryStrategy, connectTimeout: 5000 };
}

/** Creates a client for `url`; the caller attaches an `error` listener (log) and waits for `ready`. */
export function createRedis(url: string, role: RedisRole, name: string): Redis {
  const redis = new Redis(url, { ...redisOptions(role), connectionName: name, lazyConnect: true });
  // Until the app attaches its logging listener, connection errors are reported by
  // `connectOrExplain` (one line), not by ioredis' "Unhandled error event" dump.
  redis.on('error', () => undefined);
  return redis;
}

/**
 * Connects and pings within `timeoutMs`.
 * @throws Error with a one-line message that says what to do (used at process start).
 */
export async function connectOrExplain(redis: Redis, url: string, timeoutMs = 5000): Promise<void> {
  const safeUrl = url.replace(/\/\/[^@/]*@/, '//***@');
  let connectError: Error | undefined; // the socket error says more than "Connection is closed."
  const onError = (e: Error) => {
    connectError ??= e;
  };
  redis.on('error', onError);
  try {
    await Promise.race([
      (async () => {
        await redis.connect();
        await redis.ping();
      })(),
      new Promise((_, reject) => setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs)),
    ]);
  } catch (e) {
    const why = connectError?.message || (e as Error).message || String(e);
    redis.disconnect();
    throw new Error(
      `cannot reach Redis at ${safeUrl} (${why}). Start one (e.g. \`redis-server --port 6379\`) or set REDIS_URL to a reachable Redis.`,
    );
  } finally {
    redis.off('error', onError);
  }
}

/** Warns when Redis may evict keys (BullMQ and the task records need `noeviction`). */
export async function evictionPolicy(redis: Redis): Promise<string | undefined> {
  try {
    const r = (await redis.config('GET', 'maxmemory-policy')) as string[];
    return r[1];
  } catch {
    return undefined;
  }
}

/**
 * The Redis eviction policy, re-read at most every `everyMs` (default 5 s) when asked (case B-15):
 * any policy but `noeviction` can evict BullMQ locks and task records, so readiness refuses it.
 * `check()` answers `undefined` when the policy is fine or cannot be read (managed Redis often
 * refuses CONFIG), else a one-line reason naming the policy.
 */
export function evictionGuard(redis: Redis, everyMs = 5000) {
  let at = 0;
  let policy: string | undefined;
  return {
    async check(): Promise<string | undefined> {
      if (Date.now() - at >= everyMs) {
        policy = await evictionPolicy(redis);
        at = Date.now();
      }
      return policy && policy !== 'noeviction' ? `redis maxmemory-policy is ${policy}: set noeviction (keys and job locks may be evicted)` : undefined;
    },
  };
}

export type EvictionGuard = ReturnType<typeof evictionGuard>;

/** Redis liveness as the gateway sees it: connected **and** answering PING in time. */
export interface RedisHealth {
  readonly ok: boolean;
  stop(): void;
}

/**
 * Pings `redis` every `everyMs` (default 1000 ms); a PING unanswered within `timeoutMs`
 * (default 1000 ms) marks Redis unhealthy until one succeeds. A hung Redis (connection up,
 * no answers) thus turns readiness off and task requests into 503 + Retry-After (D10).
 */
export function watchRedis(redis: Redis, everyMs = 1000, timeoutMs = 1000): RedisHealth {
  let answering = true;
  const tick = async () => {
    try {
      await Promise.race([redis.ping(), new Promise((_, reject) => setTimeout(() => reject(new Error('timeout')), timeoutMs).unref())]);
      answering = true;
    } catch {
      answering = false;
    }
  };
  const timer = setInterval(() => void tick(), everyMs);
  timer.unref();
  return {
    get ok() {
      return answering && redis.status === 'ready';
    },
    stop: () => clearInterval(timer),
  };
}

/**
 * Waits for a connection to come back (issue 9 §6): `wait(ms)` resolves on the client's next
 * `ready` event (a reconnect finished) or after `ms`, whichever is first. One `ready` listener
 * per client however many callers wait, so a gateway holding many synchronous calls through an
 * outage adds one listener, not one per call.
 */
export function readyWaiter(redis: Redis): { wait(ms: number, signal?: AbortSignal): Promise<void> } {
  const existing = waiters.get(redis);
  if (existing) return existing;
  const pending = new Set<() => void>();
  redis.on('ready', () => {
    for (const wake of [...pending]) wake();
  });
  const w = {
    wait(ms: number, signal?: AbortSignal): Promise<void> {
      return new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          pending.delete(done);
          signal?.removeEventListener('abort', done);
          resolve();
        };
        const timer = setTimeout(done, ms);
        pending.add(done);
        signal?.addEventListener('abort', done, { once: true });
      });
    },
  };
  waiters.set(redis, w);
  return w;
}
const waiters = new WeakMap<Redis, ReturnType<typeof readyWaiter>>();
