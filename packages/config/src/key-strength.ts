/**
 * The production start-up check of secrets typed by hand (API keys, admin keys, requestState
 * secrets): a key that is long enough but made of few characters (`aaaa…`, `abab…`,
 * `password1password1`) is refused, so a placeholder copied from an example never guards a
 * production gateway.
 *
 * The rule (documented in docs/security.md): at least MIN_DISTINCT_CHARS different characters,
 * and at least MIN_ESTIMATED_BITS bits by a Shannon estimate — the key's length times the
 * entropy of its own character frequencies. `openssl rand -hex 32` (64 characters, ≈ 250 bits)
 * and `openssl rand -base64 48` pass with a wide margin; 32 × `a` is 0 bits. It is no password
 * strength meter (a dictionary word repeated with digits may pass): it catches the obvious.
 * Keys given as `sha256:<hex>` cannot be checked (only their digest is known).
 */

/** Fewest different characters a production key may have. */
export const MIN_DISTINCT_CHARS = 8;
/** Fewest estimated bits (length × Shannon entropy per character) of a production key. */
export const MIN_ESTIMATED_BITS = 64;

/** Length × Shannon entropy (bits per character) of `key`'s own character frequencies. */
export function estimatedBits(key: string): number {
  const counts = new Map<string, number>();
  for (const c of key) counts.set(c, (counts.get(c) ?? 0) + 1);
  const n = [...key].length;
  let perChar = 0;
  for (const k of counts.values()) perChar -= (k / n) * Math.log2(k / n);
  return perChar * n;
}

/** Why `key` is too weak for production, or `undefined`. Never contains the key. */
export function weakKeyProblem(key: string): string | undefined {
  const distinct = new Set(key).size;
  if (distinct < MIN_DISTINCT_CHARS)
    return `has only ${distinct} different characters (at least ${MIN_DISTINCT_CHARS} in production); generate one with: openssl rand -hex 32`;
  const bits = Math.floor(estimatedBits(key));
  if (bits < MIN_ESTIMATED_BITS)
    return `is too predictable (about ${bits} bits, at least ${MIN_ESTIMATED_BITS} in production); generate one with: openssl rand -hex 32`;
  return undefined;
}
