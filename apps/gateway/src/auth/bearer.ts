/**
 * Reads the `Authorization` header of a request (RFC 6750 §2.1, H-04).
 *
 * Accepted: exactly `Bearer <b64token>`: the scheme in any letter case, ONE space, a token of
 * letters, digits, `-._~+/` and trailing `=`, at most 8,192 characters. RFC 7235 would allow
 * several spaces; like the SDK's `verifyBearerToken` we take exactly one, so that one header
 * value has one reading. A missing or empty header is "no credentials"; anything else that is
 * not that shape (`Basic ...`, `Bearer` alone, two spaces, a token with spaces) is malformed,
 * which the authenticator answers as an invalid token (never as anonymous).
 */

export type BearerCredentials = { kind: 'none' } | { kind: 'bearer'; token: string } | { kind: 'malformed' };

/** Longest accepted token (characters). Longer ones are malformed, not hashed or parsed. */
export const MAX_BEARER_TOKEN_CHARS = 8192;

const BEARER = /^Bearer ([A-Za-z0-9\-._~+/]+=*)$/i;

/** Classifies an `Authorization` header value (Node gives a string, or undefined when absent). */
export function readBearer(header: string | string[] | undefined): BearerCredentials {
  if (header === undefined) return { kind: 'none' };
  if (Array.isArray(header)) return header.length === 0 ? { kind: 'none' } : { kind: 'malformed' };
  if (header === '') return { kind: 'none' };
  if (header.length > MAX_BEARER_TOKEN_CHARS + 7) return { kind: 'malformed' };
  const m = BEARER.exec(header);
  return m ? { kind: 'bearer', token: m[1]! } : { kind: 'malformed' };
}
