/**
 * The Authenticator (H-04, design D9): `Authorization` header value → the caller's
 * identity, or a refusal the route turns into HTTP 401/403/503 with `authRefusalReply`
 * (challenge.ts).
 *
 * Order, for `Authorization: Bearer <token>`:
 *  1. API keys: SHA-256 of the token against every configured digest in constant time
 *     (api-keys.ts) → principal `key:<name>`, no scopes;
 *  2. JWT (jwt.ts), when configured → principal `jwt:<iss>#<sub>`, scopes from `scope`/`scp`;
 *     every `requiredScopes` must be present, else 403 `insufficient_scope`;
 *  3. otherwise 401 `invalid_token`.
 * Without the header (or with an empty one): `anonymous` when `allowAnonymous`, else 401 with no
 * error code (RFC 6750 §3.1: a request without credentials gets a bare challenge). A header
 * that is present but not `Bearer <token>` is 401 `invalid_token`, even when anonymous access
 * is allowed: presented credentials are never ignored.
 *
 * The SDK's `verifyBearerToken` is not used: it answers a missing header with `invalid_token`,
 * reads `Bearer a b` as the token `a`, compares the audience as one string and requires
 * `expiresAt` (API keys have none). Its challenge format (parameter order, quoting) is kept.
 *
 * The identity never holds the token, so nothing downstream can store or log it (case N-04).
 * A matched API key's outcome is remembered per header value for at most 5 s and forgotten the
 * moment the keys change (principal-cache.ts); the returned outcome is then shared and frozen.
 */
import type { ApiKeyDigest } from './api-keys.js';
import { createApiKeyMatcher } from './api-keys.js';
import { readBearer } from './bearer.js';
import { createJwtVerifier, looksLikeJwt, type JwtVerifierOptions } from './jwt.js';
import { createPrincipalCache } from './principal-cache.js';

export const ANONYMOUS_PRINCIPAL = 'anonymous';

/** Structurally `config.auth` (packages/config/src/auth.ts): `createAuthenticator(config.auth)`. */
export interface AuthenticatorOptions {
  /** Configured API keys (principal name + SHA-256 digest). */
  apiKeys?: readonly ApiKeyDigest[];
  /** JWT access tokens; `requiredScopes` must all be present in a token. */
  jwt?: JwtVerifierOptions & { requiredScopes?: readonly string[] };
  /** Serve requests without credentials as `anonymous`. */
  allowAnonymous: boolean;
}

/** Who is calling. `expiresAt` (seconds since the epoch) for a JWT. */
export interface Identity {
  principal: string;
  scopes: string[];
  kind: 'apikey' | 'jwt' | 'anonymous';
  expiresAt?: number;
}

/**
 * Why a request is refused. `error` is the RFC 6750 error code (the SDK's `OAuthErrorCode`
 * values); none when no credentials were presented. `description` is a fixed text, never
 * derived from the token.
 */
export type AuthRefusal =
  | { ok: false; status: 401; error?: undefined; description: string }
  | { ok: false; status: 401; error: 'invalid_token'; description: string }
  | { ok: false; status: 403; error: 'insufficient_scope'; description: string; scope: readonly string[] }
  | { ok: false; status: 503; error: 'temporarily_unavailable'; description: string; retryAfterSeconds: number };

export type AuthOutcome = ({ ok: true } & Identity) | AuthRefusal;

export interface Authenticator {
  /**
   * Authenticates one request from its `Authorization` header value (`req.headers.authorization`).
   * An API key's outcome is remembered per header value for a few seconds (principal-cache.ts).
   */
  authenticate(authorization: string | string[] | undefined): Promise<AuthOutcome>;
  /**
   * The outcome `authenticate` would give when it is known without any work, else undefined: an
   * API key's header value matched within the last API_KEY_CACHE_TTL_MS (principal-cache.ts), or
   * no credentials while anonymous access is on. Synchronous, so a poll's authentication costs
   * no promise (mcp-route.ts).
   */
  known(authorization: string | string[] | undefined): AuthOutcome | undefined;
  /** Replaces the API keys (a reloaded AUTH_API_KEYS_FILE, keys-file.ts); later requests use them. */
  setApiKeys(keys: readonly ApiKeyDigest[]): void;
  /** Scopes a JWT must carry (for `WWW-Authenticate` and the metadata document). */
  readonly requiredScopes: readonly string[];
}

/** Seconds a client is asked to wait when the issuer's keys cannot be fetched. */
export const JWKS_UNAVAILABLE_RETRY_AFTER_S = 5;

/**
 * Builds the authenticator. Reads a `file:` JWKS now; a remote JWKS is fetched on first use.
 * @throws AuthSetupError (jwt.ts) with a one-line message when a `file:` JWKS is unusable.
 */
export async function createAuthenticator(options: AuthenticatorOptions, clock?: () => number): Promise<Authenticator> {
  let matchKey = options.apiKeys?.length ? createApiKeyMatcher(options.apiKeys) : undefined;
  // Header value → the frozen outcome of its API key; emptied whenever the keys change.
  type KeyOutcome = Readonly<{ ok: true } & Identity>;
  const known = createPrincipalCache<KeyOutcome>(clock);
  const verifyJwt = options.jwt ? await createJwtVerifier(options.jwt) : undefined;
  const requiredScopes = Object.freeze([...(options.jwt?.requiredScopes ?? [])]);
  const invalid = (description: string): AuthRefusal => ({
    ok: false,
    status: 401,
    error: 'invalid_token',
    description,
  });

  const anonymous: AuthOutcome = Object.freeze({
    ok: true,
    principal: ANONYMOUS_PRINCIPAL,
    scopes: [],
    kind: 'anonymous',
  });

  function knownOutcome(authorization: string | string[] | undefined): AuthOutcome | undefined {
    if (typeof authorization === 'string' && authorization !== '') return known.get(authorization);
    if ((authorization === undefined || authorization === '') && options.allowAnonymous) return anonymous;
    return undefined;
  }

  async function authenticate(authorization: string | string[] | undefined): Promise<AuthOutcome> {
    const hit = knownOutcome(authorization);
    if (hit !== undefined) return hit;
    const creds = readBearer(authorization);
    if (creds.kind === 'none') {
      if (options.allowAnonymous) return anonymous;
      return { ok: false, status: 401, description: 'authentication required' };
    }
    if (creds.kind === 'malformed') return invalid("Authorization must be 'Bearer <token>'");
    const name = matchKey?.(creds.token);
    if (name !== undefined) {
      const out: KeyOutcome = Object.freeze({ ok: true, principal: `key:${name}`, scopes: [], kind: 'apikey' });
      known.set(authorization as string, out);
      return out;
    }
    // An opaque token that is no configured key is not sent to the JWT verifier.
    if (!verifyJwt || !looksLikeJwt(creds.token)) return invalid(matchKey ? 'unknown credentials' : 'malformed token');
    const r = await verifyJwt(creds.token);
    if (!r.ok) {
      if (r.reason === 'unavailable') {
        return {
          ok: false,
          status: 503,
          error: 'temporarily_unavailable',
          description: r.description,
          retryAfterSeconds: JWKS_UNAVAILABLE_RETRY_AFTER_S,
        };
      }
      return invalid(r.description);
    }
    if (!requiredScopes.every((s) => r.scopes.includes(s))) {
      return {
        ok: false,
        status: 403,
        error: 'insufficient_scope',
        description: 'token lacks a required scope',
        scope: requiredScopes,
      };
    }
    return { ok: true, principal: r.principal, scopes: r.scopes, kind: 'jwt', expiresAt: r.expiresAt };
  }

  return {
    authenticate,
    known: knownOutcome,
    requiredScopes,
    setApiKeys: (keys) => {
      matchKey = createApiKeyMatcher(keys);
      // A removed key must not outlive the reload in the cache.
      known.clear();
    },
  };
}
