/**
 * API-key matching (design D9): the presented Bearer token is hashed with SHA-256
 * and its digest compared with `crypto.timingSafeEqual` against EVERY configured digest, with no
 * early exit, so the time taken does not depend on which key (if any) matched or on how many
 * leading bytes agree. Only digests are held in memory; the raw key is never stored or logged.
 */
import { createHash, timingSafeEqual } from 'node:crypto';

/** A configured key: principal name and SHA-256 digest of the key (32 bytes). `config.auth.apiKeys`. */
export interface ApiKeyDigest {
  readonly name: string;
  readonly digest: Uint8Array;
}

/**
 * Returns a matcher: token → the principal name of the key it is, or `undefined`.
 * @throws TypeError when a digest is not 32 bytes.
 */
export function createApiKeyMatcher(keys: readonly ApiKeyDigest[]): (token: string) => string | undefined {
  const entries = keys.map((k) => {
    if (k.digest.byteLength !== 32) throw new TypeError(`API key of "${k.name}": digest must be 32 bytes (SHA-256)`);
    return { name: k.name, digest: Buffer.from(k.digest) };
  });
  return (token) => {
    const presented = createHash('sha256').update(token, 'utf8').digest();
    let found: string | undefined;
    for (const e of entries) {
      // No short-circuit: every digest is compared whatever the outcome of the others.
      if (timingSafeEqual(presented, e.digest) && found === undefined) found = e.name;
    }
    return found;
  };
}
