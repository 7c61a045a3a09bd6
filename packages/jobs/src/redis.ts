/**
 * ioredis clients with settings measured against Redis restarts (below), for any Redis topology of
 * `config.redis` (packages/config redis.ts): one Redis (`REDIS_URL`), a master
 * found through Sentinel (`REDIS_SENTINELS`), or a Redis Cluster (`REDIS_CLUSTER_NODES`, an
 * ioredis `Cluster`; every multi-key script and BullMQ queue keeps its keys in one slot, case N-10).
 *  - `request`: gateway request path. Fails fast while Redis is away (offline queue off,
 *    1 retry, 2 s command timeout, no resend after a reconnect) so a client gets an error,
 *    never a ghost write later. Auto-pipelined: the commands that concurrent requests issue in
 *    one event-loop turn leave in one write and come back in one read (a creation's
 *    five round trips cost the gateway a socket write each otherwise). Never used for blocking
 *    commands or subscriptions (those have their own `worker` connections), and never on a
 *    worker, where BullMQ's own ordering of commands matters.
 *  - `queue`: the gateway's BullMQ queues (adding step jobs). As `request` but not
 *    auto-pipelined: BullMQ defines its ~50 scripts on this client, and ioredis copies every
 *    defined script onto each pipeline it builds, the automatic one per event-loop turn too
 *    (~50 µs each, measured); a job is added with one script call, written at once.
 *  - `worker`: workers and subscribers. Commands wait for the reconnect (BullMQ requires
 *    `maxRetriesPerRequest: null` on blocking connections, for a Cluster in `redisOptions`),
 *    so a finished step's write lands.
 * Reconnect back-off is capped at 2 s (BullMQ's default grows to 20 s).
 */
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import { describeRedis, type RedisConfig } from '@mcp-tasks/config';
import { lagTolerantCommandTimeouts } from './command-timeout.js';

export type RedisRole = 'request' | 'queue' | 'worker';

/** A client of any topology: `Redis` (one Redis or Sentinel) or `Cluster`. Same commands. */
export type RedisClient = Redis | Cluster;

export const retryStrategy = (times: number): number => Math.min(100 * 2 ** times, 2000);

/**
 * How long (ms) the request client waits for any one command's answer before the caller gets
 * an error (measured against Redis's answer: a reply that arrived while the event loop was
 * stalled still counts, command-timeout.ts); also how long a health PING may stay unanswered
 * before Redis counts as hung (`watchRedis`): a stricter health verdict would refuse requests
 * whose commands still answer in time (case B-02 (b), a slow link on a loaded machine).
 */
export const REQUEST_COMMAND_TIMEOUT_MS = 2000;

/** Connection options for a role (one Redis; a Cluster puts them under `redisOptions`). */
export function redisOptions(role: RedisRole): RedisOptions {
  if (role === 'queue') {
    const { enableAutoPipelining: _a, autoPipeliningIgnoredCommands: _i, ...request } = redisOptions('request');
    return request;
  }
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

/**
 * After a Sentinel failover the old master turns replica and answers writes with READONLY:
 * reconnect (Sentinel names the new master). A `worker` client re-sends the refused command
 * (it was not applied); a `request` client does not (its caller already got the error).
 */
const reconnectOnReadonly = (role: RedisRole) => (err: Error) =>
  err.message.startsWith('READONLY') ? (role === 'worker' ? 2 : 1) : false;

/** ioredis options of a `Cluster` for a role (see the module doc). */
export function clusterOptions(c: RedisConfig, role: RedisRole, name: string): ClusterOptions {
  const { retryStrategy: _r, enableOfflineQueue, enableAutoPipelining, ...node } = redisOptions(role);
  return {
    lazyConnect: true,
    enableOfflineQueue: enableOfflineQueue ?? true,
    enableAutoPipelining: enableAutoPipelining ?? false,
    // Every read goes to the master of its slot: replicas lag, and the task record must read its own writes (T-30).
    scaleReads: 'master',
    clusterRetryStrategy: retryStrategy,
    redisOptions: {
      ...node,
      connectionName: name,
      ...(c.username ? { username: c.username } : {}),
      ...(c.password ? { password: c.password } : {}),
      ...(c.tls ? { tls: {} } : {}),
    },
    // TLS certificates name the host, not its address (managed clusters): keep host names as given.
    ...(c.tls ? { dnsLookup: (address: string, cb: (err: null, address: string) => void) => cb(null, address) } : {}),
  };
}

/**
 * Creates a client for the topology `c` (config.redis); nothing connects until
 * `connectOrExplain` (lazy). The caller attaches an `error` listener (log) and waits for `ready`.
 * @param role `request` (gateway request path) or `worker` (workers, subscribers, BullMQ)
 * @param name the connection name (CLIENT SETNAME), seen in CLIENT LIST
 */
export function createRedis(c: RedisConfig, role: RedisRole, name: string): RedisClient {
  // The request and queue roles' command timeout counts Redis's answer, not the event loop's lag.
  if (redisOptions(role).commandTimeout !== undefined) lagTolerantCommandTimeouts();
  let redis: RedisClient;
  const creds = { ...(c.username ? { username: c.username } : {}), ...(c.password ? { password: c.password } : {}) };
  if (c.mode === 'cluster') {
    redis = new Cluster(c.nodes, clusterOptions(c, role, name));
  } else if (c.mode === 'sentinel') {
    redis = new Redis({
      ...redisOptions(role),
      sentinels: c.sentinels,
      name: c.name,
      ...(c.sentinelPassword ? { sentinelPassword: c.sentinelPassword } : {}),
      // Sentinels announce a failover (+switch-master): reconnect to the new master at once.
      failoverDetector: true,
      reconnectOnError: reconnectOnReadonly(role),
      ...(c.tls ? { tls: {}, enableTLSForSentinelMode: true, sentinelTLS: {} } : {}),
      ...creds,
      connectionName: name,
      lazyConnect: true,
    });
  } else {
    redis = new Redis(c.url, {
      ...redisOptions(role),
      ...creds,
      ...(c.tls && !c.url.startsWith('rediss://') ? { tls: {} } : {}),
      connectionName: name,
      lazyConnect: true,
    });
  }
  // Until the app attaches its logging listener, connection errors are reported by
  // `connectOrExplain` (one line), not by ioredis' "Unhandled error event" dump.
  redis.on('error', () => undefined);
  return redis;
}

/** The masters a command without a key must reach: every master of a Cluster, else the client itself. */
export function masters(redis: RedisClient): Redis[] {
  return redis instanceof Cluster ? redis.nodes('master') : [redis];
}

/** The port of a `redis://` / `rediss://` URL, 6379 when it names none (or cannot be read). */
export function singlePort(url: string): number {
  try {
    return Number(new URL(url).port) || 6379;
  } catch {
    return 6379;
  }
}

/**
 * Connects and pings (every master of a Cluster) within `timeoutMs`.
 * @throws Error with a one-line message that says what to do (used at process start); it names
 *         the Redis as `describeRedis` does (no password).
 */
export async function connectOrExplain(redis: RedisClient, c: RedisConfig, timeoutMs = 5000): Promise<void> {
  let connectError: Error | undefined; // the socket error says more than "Connection is closed."
  const onError = (e: Error) => {
    connectError ??= e;
  };
  redis.on('error', onError);
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    await Promise.race([
      (async () => {
        // A Cluster's connect() resolves on 'ready' (CLUSTER INFO says cluster_state:ok).
        await redis.connect();
        await Promise.all(masters(redis).map((n) => n.ping()));
      })(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
      }),
    ]);
  } catch (e) {
    const why = (connectError?.message || (e as Error).message || String(e)).replace(/\/\/[^@/\s]*@/g, '//***@');
    redis.disconnect();
    const hint =
      c.mode === 'cluster'
        ? 'Check REDIS_CLUSTER_NODES (seed nodes of a Redis Cluster with every slot assigned) and REDIS_PASSWORD.'
        : c.mode === 'sentinel'
          ? 'Check REDIS_SENTINELS, REDIS_SENTINEL_NAME (the master group the Sentinels monitor) and the passwords.'
          : `Start one (e.g. \`redis-server --port ${singlePort(c.url)}\`) or set REDIS_URL to a reachable Redis.`;
    // No `cause`: the driver's error may carry the Redis URL with its password; `why` is its redacted message.
    // eslint-disable-next-line preserve-caught-error -- the cause would leak credentials into logs
    throw new Error(`cannot reach Redis at ${describeRedis(c)} (${why}). ${hint}`);
  } finally {
    if (timer) clearTimeout(timer);
    redis.off('error', onError);
  }
}

/**
 * The eviction policy (BullMQ and the task records need `noeviction`). On a Cluster every
 * master is asked and the first one that is not `noeviction` is answered (one evicting shard
 * loses keys as surely as one Redis). `undefined` when it cannot be read (managed Redis often
 * refuses CONFIG).
 */
export async function evictionPolicy(redis: RedisClient): Promise<string | undefined> {
  try {
    const policies = await Promise.all(masters(redis).map(async (n) => (await n.config('GET', 'maxmemory-policy'))[1]));
    return policies.find((p) => p !== 'noeviction') ?? policies[0];
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
export function evictionGuard(redis: RedisClient, everyMs = 5000) {
  let at = 0;
  let policy: string | undefined;
  return {
    async check(): Promise<string | undefined> {
      if (Date.now() - at >= everyMs) {
        policy = await evictionPolicy(redis);
        at = Date.now();
      }
      return policy && policy !== 'noeviction'
        ? `redis maxmemory-policy is ${policy}: set noeviction (keys and job locks may be evicted)`
        : undefined;
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
 * Pings `redis` (every master of a Cluster, case N-10) every `everyMs` (default 1000 ms), one PING at a time; Redis counts as hung
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
export function watchRedis(redis: RedisClient, everyMs = 1000, timeoutMs = REQUEST_COMMAND_TIMEOUT_MS): RedisHealth {
  let failed = false;
  /** When the PING in flight was sent (ms), or undefined when none is. */
  let pingSentAt: number | undefined;
  const tick = () => {
    if (pingSentAt !== undefined || redis.status !== 'ready') return;
    pingSentAt = Date.now();
    pingAll(redis).then(
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

/** PING to every master (see `masters`); throws when one does not answer. */
export async function pingAll(redis: RedisClient): Promise<void> {
  await Promise.all(masters(redis).map((n) => n.ping()));
}
/**
 * Waits for a connection to come back: `wait(ms)` resolves on the client's next
 * `ready` event (a reconnect finished) or after `ms`, whichever is first. One `ready` listener
 * per client however many callers wait, so a gateway holding many synchronous calls through an
 * outage adds one listener, not one per call.
 */
export function readyWaiter(redis: RedisClient): { wait(ms: number, signal?: AbortSignal): Promise<void> } {
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
const waiters = new WeakMap<RedisClient, ReturnType<typeof readyWaiter>>();
