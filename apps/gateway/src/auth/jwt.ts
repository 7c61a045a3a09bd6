/**
 * JWT access-token verification for the OAuth 2.1 resource server (H-04, design D9, case N-04),
 * with jose: signature through the issuer's JWK Set, then `iss` (exact), `aud` (the configured
 * audience, default `PUBLIC_URL`), `exp` (required) and `nbf`, with `clockToleranceSeconds` of
 * leeway. Only asymmetric algorithms are accepted, so a symmetric key can never verify a token.
 *
 * Keys:
 *  - remote (`createRemoteJWKSet`): fetched on first use, cached for 10 min (jose `cacheMaxAge`),
 *    and fetched again when a token names an unknown `kid`, at most once per `jwksCooldownMs`:
 *    a key the issuer added is picked up without a restart, and tokens with made-up `kid`s cannot
 *    make us hammer the issuer. A fetch that fails (network, timeout after `jwksTimeoutMs`,
 *    non-200, bad JSON) is `unavailable`, not the token's fault.
 *  - `file:` URL: read once when the verifier is created (rotate by restarting the gateways);
 *  - inline JWKS: from the configuration.
 *
 * Principal: `jwt:<iss>#<sub>` (an issuer has no fragment, so the first `#` ends it). A token
 * without `sub`, or with an empty or control-character `sub`, or one over 256 characters, is
 * refused. Scopes: the union of `scope` (space-separated) and `scp` (array, or space-separated).
 */
import { readFile } from 'node:fs/promises';
import { createLocalJWKSet, createRemoteJWKSet, errors, jwtVerify, type JWTVerifyGetKey } from 'jose';
import { jwksProblem, type JwksSource } from '@mcp-tasks/config';

/** Asymmetric JWS algorithms accepted for access tokens. */
export const ACCEPTED_JWT_ALGORITHMS = [
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
  'Ed25519',
];

export interface JwtVerifierOptions {
  /** Exact `iss`. */
  issuer: string;
  /** Exact `aud` (or one of the token's `aud` values). */
  audience: string;
  jwks: JwksSource;
  /** Leeway for `exp` and `nbf`, seconds. */
  clockToleranceSeconds: number;
  /** Least time between two JWKS fetches for an unknown `kid`, ms (jose `cooldownDuration`). */
  jwksCooldownMs: number;
  /** JWKS fetch timeout, ms (default 5000). */
  jwksTimeoutMs?: number;
  /** How long a fetched JWKS is used before it is fetched again, ms (default 600,000). */
  jwksCacheMaxAgeMs?: number;
}

export type JwtOutcome =
  | { ok: true; principal: string; scopes: string[]; expiresAt: number }
  | { ok: false; reason: 'invalid_token'; description: string }
  | { ok: false; reason: 'unavailable'; description: string };

/** A configuration problem found when the verifier is created; the message is one line. */
export class AuthSetupError extends Error {
  override name = 'AuthSetupError';
}

/** A failure to get the issuer's keys (not the token's fault). */
class JwksUnavailableError extends Error {}

const JWS_COMPACT = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

/** The token has the JWS compact shape (three base64url parts). */
export const looksLikeJwt = (token: string) => JWS_COMPACT.test(token);
const MAX_SUB_CHARS = 256;
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;

/** Errors of the key lookup that mean "this token names no usable key". */
const tokenSideKeyError = (e: unknown) =>
  e instanceof errors.JWKSNoMatchingKey ||
  e instanceof errors.JWKSMultipleMatchingKeys ||
  e instanceof errors.JOSENotSupported ||
  e instanceof errors.JOSEAlgNotAllowed;

async function keySet(o: JwtVerifierOptions): Promise<JWTVerifyGetKey> {
  const src = o.jwks;
  if (src.kind === 'inline') return createLocalJWKSet(src.jwks);
  if (src.kind === 'file') {
    let jwks: unknown;
    try {
      jwks = JSON.parse(await readFile(new URL(src.url), 'utf8'));
    } catch (e) {
      const why = e instanceof SyntaxError ? 'not valid JSON' : ((e as NodeJS.ErrnoException).code ?? 'unreadable');
      throw new AuthSetupError(`AUTH_JWT_JWKS_URL: cannot read the JWKS file ${src.url}: ${why}`);
    }
    const problem = jwksProblem(jwks);
    if (problem) throw new AuthSetupError(`AUTH_JWT_JWKS_URL: the JWKS file ${src.url}: ${problem}`);
    return createLocalJWKSet(jwks as never);
  }
  const remote = createRemoteJWKSet(new URL(src.url), {
    cooldownDuration: o.jwksCooldownMs,
    timeoutDuration: o.jwksTimeoutMs ?? 5000,
    cacheMaxAge: o.jwksCacheMaxAgeMs ?? 600_000,
  });
  return async (header, token) => {
    try {
      return await remote(header, token);
    } catch (e) {
      if (tokenSideKeyError(e)) throw e;
      throw new JwksUnavailableError('jwks', { cause: e });
    }
  };
}

function claimProblem(e: errors.JWTClaimValidationFailed): string {
  switch (e.claim) {
    case 'aud':
      return 'token audience is not this resource';
    case 'iss':
      return 'token issuer is not trusted';
    case 'nbf':
      return 'token is not yet valid';
    case 'sub':
      return 'token has no subject';
    case 'exp':
      return 'token has no expiry';
    default:
      return 'token claims are invalid';
  }
}

/**
 * Creates the verifier: token → outcome (never throws for a bad token).
 * @throws AuthSetupError when a `file:` JWKS cannot be read or is not a public JWK Set.
 */
export async function createJwtVerifier(o: JwtVerifierOptions): Promise<(token: string) => Promise<JwtOutcome>> {
  const getKey = await keySet(o);
  const invalid = (description: string): JwtOutcome => ({ ok: false, reason: 'invalid_token', description });
  return async (token) => {
    if (!looksLikeJwt(token)) return invalid('malformed token');
    let payload;
    try {
      ({ payload } = await jwtVerify(token, getKey, {
        issuer: o.issuer,
        audience: o.audience,
        algorithms: ACCEPTED_JWT_ALGORITHMS,
        clockTolerance: o.clockToleranceSeconds,
        requiredClaims: ['exp', 'sub'],
      }));
    } catch (e) {
      if (e instanceof JwksUnavailableError)
        return { ok: false, reason: 'unavailable', description: "the token issuer's keys could not be fetched" };
      if (e instanceof errors.JWTExpired) return invalid('token expired');
      if (e instanceof errors.JWTClaimValidationFailed) return invalid(claimProblem(e));
      if (e instanceof errors.JWSSignatureVerificationFailed) return invalid('token signature is invalid');
      if (e instanceof errors.JWKSNoMatchingKey || e instanceof errors.JWKSMultipleMatchingKeys)
        return invalid('token signing key is unknown');
      if (e instanceof errors.JOSEAlgNotAllowed || e instanceof errors.JOSENotSupported)
        return invalid('token algorithm is not accepted');
      return invalid('malformed token');
    }
    const sub = payload.sub;
    if (typeof sub !== 'string' || sub.length === 0 || sub.length > MAX_SUB_CHARS || CONTROL.test(sub))
      return invalid('token subject is not usable');
    const scopes = new Set<string>();
    const addAll = (v: unknown) => {
      const list: unknown[] = typeof v === 'string' ? v.split(' ') : Array.isArray(v) ? v : [];
      for (const s of list) {
        if (typeof s === 'string' && s) scopes.add(s);
      }
    };
    addAll(payload.scope);
    addAll(payload.scp);
    return { ok: true, principal: `jwt:${o.issuer}#${sub}`, scopes: [...scopes], expiresAt: payload.exp! };
  };
}
