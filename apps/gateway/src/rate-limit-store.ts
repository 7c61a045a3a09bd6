/**
 * The Redis store of the gateway's rate limits: `@fastify/rate-limit`'s own RedisStore (its Lua
 * script, INCR with the window's PEXPIRE), with counter keys `<nameSpace><key>`, e.g.
 * `<prefix>:rl:req:<SHA-256>`. The plugin's store names a limiter's counters after its route
 * (`<nameSpace><method><url>-<key>`); a limiter made by `createRateLimit` has no route, so that
 * gave `<prefix>:rl:undefinedundefined-req:…`. Here a limiter's store is the namespace's.
 */
import { createRequire } from 'node:module';
import type { FastifyRateLimitStore, FastifyRateLimitStoreCtor, RateLimitOptions } from '@fastify/rate-limit';
import type { RedisClient } from '@mcp-tasks/jobs';

interface RedisStoreInstance extends FastifyRateLimitStore {
  readonly redis: RedisClient;
  readonly key: string;
}

/** The plugin's RedisStore (CommonJS, not in its typings): `(continueExceeding, exponentialBackoff, redis, key)`. */
type RedisStoreCtor = new (
  continueExceeding: boolean | undefined,
  exponentialBackoff: boolean | undefined,
  redis: RedisClient,
  key: string,
) => RedisStoreInstance;

const RedisStore = createRequire(import.meta.url)('@fastify/rate-limit/store/RedisStore.js') as RedisStoreCtor;

/**
 * The `store` option of `@fastify/rate-limit`: counters in `redis` under `nameSpace` (which
 * ends with its separator, e.g. `<prefix>:rl:`), without a route in their names.
 */
export function redisStoreWithoutRoute(redis: RedisClient, nameSpace: string): FastifyRateLimitStoreCtor {
  const make = (o: RateLimitOptions): FastifyRateLimitStore => {
    const store = new RedisStore(o.continueExceeding, o.exponentialBackoff, redis, nameSpace);
    store.child = (child) => make(child as unknown as RateLimitOptions);
    return store;
  };
  return function Store(o: RateLimitOptions) {
    return make(o);
  } as unknown as FastifyRateLimitStoreCtor;
}
