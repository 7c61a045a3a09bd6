/**
 * The API-key principal remembered per `Authorization` header value, so a client polling with
 * the same key does not pay the SHA-256 and the constant-time comparison against every
 * configured digest on each request (docs/performance.md).
 *
 * Bounded: at most `API_KEY_CACHE_MAX` header values, each for at most `API_KEY_CACHE_TTL_MS`
 * (5 s) after it was last matched against the digests (`lru-cache`, least recently used out
 * first). Only a header that matched a configured key is remembered; a wrong or unknown token
 * is hashed and compared every time, so the cache changes nothing for a guesser's timing. The
 * authenticator empties it the moment its keys are replaced (a reloaded AUTH_API_KEYS_FILE,
 * keys-file.ts): a revoked key stops working at the reload that removes it, not up to 5 s
 * later. The header value lives in this process's memory only (never logged, never written),
 * for at most the TTL.
 */
import { LRUCache } from 'lru-cache';

/** Header values remembered at most (distinct keys in use on one gateway; more just costs hashes). */
export const API_KEY_CACHE_MAX = 1000;
/** How long a matched header value is remembered (ms). */
export const API_KEY_CACHE_TTL_MS = 5000;

/** A cache of header value → the outcome of a successful API-key match (the same frozen object each time). */
export type PrincipalCache<V extends object> = LRUCache<string, V>;

/** Builds an empty cache; `now` replaces the clock (ms, monotonic) in tests. */
export function createPrincipalCache<V extends object>(now?: () => number): PrincipalCache<V> {
  return new LRUCache<string, V>({
    max: API_KEY_CACHE_MAX,
    ttl: API_KEY_CACHE_TTL_MS,
    // A hit does not extend the entry: a header is re-checked against the digests every 5 s.
    updateAgeOnGet: false,
    // The clock read on every lookup (cheap), not cached behind a timer.
    ttlResolution: 0,
    ...(now ? { perf: { now } } : {}),
  });
}
