/**
 * A test's keys on a shared Redis. Every key a test writes starts with its own random prefix
 * followed by `:` (the service's key layout: `<prefix>:{t:<taskId>}:…`, `<prefix>:{jobs}:…`),
 * and these are the only keys a test lists or deletes: never FLUSH, other runs share the Redis.
 */
import type { Redis } from 'ioredis';

/** Every key under `<prefix>:`, sorted, each once (ioredis' SCAN stream, 1000 per call). */
export async function keysUnder(redis: Redis, prefix: string): Promise<string[]> {
  const out = new Set<string>();
  for await (const batch of redis.scanStream({ match: `${prefix}:*`, count: 1000 }))
    for (const k of batch as string[]) out.add(k); // SCAN may return a key twice
  return [...out].sort();
}

/**
 * Deletes every key under `<prefix>:` (the test's cleanup), 500 keys per DEL.
 * @returns how many keys were deleted
 */
export async function deleteKeysUnder(redis: Redis, prefix: string): Promise<number> {
  const keys = await keysUnder(redis, prefix);
  let deleted = 0;
  for (let i = 0; i < keys.length; i += 500) deleted += await redis.del(...keys.slice(i, i + 500));
  return deleted;
}
