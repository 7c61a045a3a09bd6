/**
 * The Redis start-up a gateway and a worker share: open the process' connections (each with its
 * role, redis.ts), start the Redis clock (clock.ts, case N-11), count and log every
 * connection's errors, and say at start when Redis may evict keys (case B-15).
 */
import type { RedisConfig } from '@mcp-tasks/config';
import { connectOrExplain, createRedis, evictionPolicy, type RedisClient, type RedisRole } from './redis.js';
import { RedisClock } from './clock.js';

/** One connection a process opens: its role (redis.ts) and its client name (`CLIENT LIST`). */
export interface ConnectionSpec {
  role: RedisRole;
  name: string;
}

/** What `startRedisErrorLog` and `warnIfEvicting` write through (a pino logger is one). */
interface StartupLog {
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/**
 * Creates and connects the connections of `specs`, in order, then starts a `RedisClock` on the
 * first one (Redis time for every timestamp and expiry: a replica's own clock never counts).
 * A connection that fails writes one line, `<app>: cannot reach Redis at … (why). hint`, to
 * stderr and exits the process with 1: start-up code only.
 */
export async function connectProcessRedis<K extends string>(
  app: string,
  config: RedisConfig,
  specs: Record<K, ConnectionSpec>,
): Promise<{ clients: Record<K, RedisClient>; clock: RedisClock }> {
  const entries = Object.entries(specs) as [K, ConnectionSpec][];
  const clients = Object.fromEntries(entries.map(([k, s]) => [k, createRedis(config, s.role, s.name)])) as Record<
    K,
    RedisClient
  >;
  try {
    for (const [k] of entries) await connectOrExplain(clients[k], config);
  } catch (e) {
    console.error(`${app}: ${(e as Error).message}`);
    process.exit(1);
  }
  const clock = new RedisClock(clients[entries[0]![0]]);
  await clock.start();
  return { clients, clock };
}

/**
 * Counts every error of each connection in `redisErrors{connection}` and logs it at `warn` as
 * `event` (`{err: message}`, never a stack or a credential).
 */
export function startRedisErrorLog(
  redisErrors: { inc(labels: { connection: string }): void },
  log: StartupLog,
  connections: { client: RedisClient; connection: string; event: string }[],
): void {
  for (const { client, connection, event } of connections) {
    client.on('error', (err: Error) => {
      redisErrors.inc({ connection });
      log.warn({ err: err.message }, event);
    });
  }
}

/**
 * Logs `redis.eviction_policy_unsafe` at `error` when Redis' maxmemory-policy is not
 * `noeviction` (readiness answers 503 until it is, case B-15); silent when it cannot be read.
 */
export async function warnIfEvicting(redis: RedisClient, log: StartupLog): Promise<void> {
  const policy = await evictionPolicy(redis);
  if (policy && policy !== 'noeviction')
    log.error(
      { policy },
      'redis.eviction_policy_unsafe: set maxmemory-policy noeviction; /readyz answers 503 until then (case B-15)',
    );
}
