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

/**
 * How long (ms) the request client waits for any one command's answer before the caller gets
 * an error; also how long a health PING may stay unanswered before Redis counts as hung
 * (`watchRedis`): a stricter health verdict would refuse requests whose commands still answer in
 * time (case B-02 (b), a slow link on a loaded machine).
 */
export const REQUEST_COMMAND_TIMEOUT_MS = 2000;

/** Connection options for a role. */
export function redisOptions(role: RedisRole): RedisOptions {
  return role === 'request'
    ? {
        maxRetriesPerRequest: 1,
        enableOfflineQueue: false,
        // A command that failed for the caller must not be sent again after a reconnect: the
        // client already got an error (case B-02c: no task or job may appear afterwards).
        autoResendUnfulfilledCommands: false,
        commandTimeout: REQUEST_COMMAND_TIMEOUT_MS,
        retryStrategy,
        connectTimeout: 5000,
        enableAutoPipelining: true,
        // ioredis keeps one auto-pipeline in flight per connection: a command issued meanwhile
        // waits for it to come back, i.e. up to two round trips. PING (the health check,
        // `watchRedis`) is written at once instead, so it measures Redis answering, not that
        // queue (case B-02 (b): through a 200 ms proxy on a loaded machine, a queued PING took
        // over 1 s and the gateway refused task creations as "Task store unavailable").
        autoPipeliningIgnoredCommands: ['ping'],
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
 * Pings `redis` every `everyMs` (default 1000 ms), one PING at a time; Redis counts as hung
 * (`ok` false: readiness off, task requests 503 + Retry-After, D10) while a PING has been
 * unanswered for `timeoutMs` or more (default `REQUEST_COMMAND_TIMEOUT_MS`, 2 s), or when the
 * last one failed, until one is answered. A hung Redis (connection up, no answers, e.g.
 * SIGSTOP) is thus seen within `everyMs + timeoutMs`.
 *
 * The bound is the request client's own command timeout, not less: a request's commands that
 * answer within it succeed, so a PING that takes longer than 1 s on a slow link or a loaded
 * machine is not a hung Redis (case B-02 (b): a 1 s bound, and a PING queued behind the
 * auto-pipeline in flight, refused task creations through a 200 ms proxy while the suite ran
 * twice at once). On the request client PING is not auto-pipelined (`redisOptions`), so its
 * time is one round trip. The age is read from the clock when `ok` is asked, not from a timer
 * racing the answer: after the event loop was blocked, timers run before the socket's pending
 * answer is read, which made a late timer a false "hung".
 */
export function watchRedis(redis: Redis, everyMs = 1000, timeoutMs = REQUEST_COMMAND_TIMEOUT_MS): RedisHealth {
  let failed = false;
  /** When the PING in flight was sent (ms), or undefined when none is. */
  let pingSentAt: number | undefined;
  const tick = () => {
    if (pingSentAt !== undefined || redis.status !== 'ready') return;
    pingSentAt = Date.now();
    redis.ping().then(
      () => {
        failed = false;
        pingSentAt = undefined;
      },
      () => {
        failed = true;
        pingSentAt = undefined;
      },
    );
  };
  const timer = setInterval(tick, everyMs);
  timer.unref();
  return {
    get ok() {
      const unanswered = pingSentAt !== undefined && Date.now() - pingSentAt >= timeoutMs;
      return redis.status === 'ready' && !failed && !unanswered;
    },
    stop: () => clearInterval(timer),
  };
}
