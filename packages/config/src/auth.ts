/**
 * Authentication and `requestState` key configuration (design D9).
 *
 * Variables (each documented in `.env.example`):
 *  - `AUTH_API_KEYS`            `principal:key` or `principal:sha256:<64 hex>`, comma-separated;
 *  - `AUTH_API_KEYS_FILE`       a file of such entries, re-read by the gateway every
 *                               `AUTH_API_KEYS_RELOAD_MS` (default 5000) (api-keys-file.ts);
 *  - `AUTH_JWT_ISSUER`          the one trusted issuer (`iss`), an https URL (http on loopback);
 *  - `AUTH_JWT_JWKS_URL`        https URL (http on loopback), `file:` URL, or an inline JWKS JSON;
 *  - `AUTH_JWT_AUDIENCE`        the required `aud` (default `PUBLIC_URL`);
 *  - `AUTH_JWT_REQUIRED_SCOPES` scopes every token must carry (space or comma list);
 *  - `AUTH_JWT_CLOCK_TOLERANCE_S` leeway for `exp`/`nbf`, seconds (default 30, max 300);
 *  - `AUTH_JWT_JWKS_COOLDOWN_MS` least time between two JWKS fetches for an unknown `kid` (default 30000);
 *  - `AUTH_ALLOW_ANONYMOUS`     `true` serves requests without credentials as `anonymous`;
 *  - `PUBLIC_URL`               the canonical URL of the MCP endpoint (RFC 9728 `resource`);
 *  - `REQUEST_STATE_KEYS`       `kid:secret,...` (first signs, all verify), secrets >= 32 characters;
 *  - `REQUEST_STATE_KEY`        deprecated single key, read as the ring `legacy:<key>`.
 *
 * Rules:
 *  - Without API keys or JWT, anonymous access needs `AUTH_ALLOW_ANONYMOUS=true`, or development
 *    on a loopback `HOST` with `NODE_ENV` not `production` ("dev-loopback": the gateway warns at
 *    start). Anything else refuses to start.
 *  - The built-in development `requestState` key only in "dev-loopback"; otherwise a ring from
 *    `REQUEST_STATE_KEYS` (or the deprecated `REQUEST_STATE_KEY`) is required. An explicit
 *    `AUTH_ALLOW_ANONYMOUS=true` does not allow the public key: a forged continuation can set a
 *    tool's state, which answering questions as `anonymous` cannot.
 *  - In production (`NODE_ENV=production`, exactly) the public development key is refused in
 *    REQUEST_STATE_KEYS, and every raw API key and requestState secret must pass the strength
 *    check (key-strength.ts).
 *  - API keys are kept only as SHA-256 digests. Request-state secrets are non-enumerable
 *    properties, so `JSON.stringify(config)` and `util.inspect(config)` never print them.
 *
 * The variables' schema is auth-schema.ts; this file applies the rules between them.
 *
 * Every refusal is a `ConfigError` whose message is one line naming the variable, and never
 * contains a key or secret.
 */
import { ConfigError } from './errors.js';
import { readApiKeysFile, weakKeysProblem } from './api-keys-file.js';
import { weakKeyProblem } from './key-strength.js';
import { authSchema, isLoopbackHost, type ApiKeyEntry, type AuthEnv, type JwksSource } from './auth-schema.js';

export {
  PRINCIPAL_NAME_PATTERN,
  KEY_ID_PATTERN,
  MIN_API_KEY_CHARS,
  MIN_REQUEST_STATE_SECRET_CHARS,
  AUTH_VARIABLES,
  apiKeysSchema,
  isLoopbackHost,
  jwksProblem,
} from './auth-schema.js';
export type { ApiKeyEntry, JsonWebKeySet, JwksSource } from './auth-schema.js';

/** Key id of the built-in development key, and of the deprecated single `REQUEST_STATE_KEY`. */
export const DEV_REQUEST_STATE_KID = 'dev';
export const LEGACY_REQUEST_STATE_KID = 'legacy';
const DEV_REQUEST_STATE_KEY = 'dev-only-request-state-key-change-me-0123456789';

/** OAuth 2.1 resource-server settings (JWT access tokens). */
export interface JwtConfig {
  /** Exact `iss` value tokens must carry. */
  issuer: string;
  /** Exact `aud` value tokens must carry (one of, if `aud` is an array). */
  audience: string;
  jwks: JwksSource;
  /** Scopes every token must carry (403 `insufficient_scope` otherwise). */
  requiredScopes: string[];
  /** Leeway for `exp` and `nbf`, seconds. */
  clockToleranceSeconds: number;
  /** Least time between two JWKS fetches triggered by an unknown `kid`, ms (jose `cooldownDuration`). */
  jwksCooldownMs: number;
}

/** `config.auth`. */
export interface AuthConfig {
  /** API keys (empty = none): AUTH_API_KEYS and, at start, the keys file's. */
  apiKeys: ApiKeyEntry[];
  /** The keys of AUTH_API_KEYS alone (fixed while the gateway runs). */
  fixedApiKeys: ApiKeyEntry[];
  /** AUTH_API_KEYS_FILE (absolute or relative path) and how often it is re-read (ms). */
  apiKeysFile?: { path: string; reloadMs: number };
  /** JWT access tokens, when `AUTH_JWT_ISSUER` is set. */
  jwt?: JwtConfig;
  /** `PUBLIC_URL` in canonical form (WHATWG URL `href`); required with JWT. */
  publicUrl?: string;
  /** Requests without credentials are served as the `anonymous` principal. */
  allowAnonymous: boolean;
  /** Why anonymous access is allowed: `configured` (AUTH_ALLOW_ANONYMOUS=true), `dev-loopback`, or `off`. */
  anonymous: 'off' | 'configured' | 'dev-loopback';
}

/** One key of the `requestState` ring. `secret` is non-enumerable (never serialized or printed). */
export interface RequestStateKey {
  readonly kid: string;
  readonly secret: string;
}

/** `config.requestState`. */
export interface RequestStateConfig {
  /** The key ring: `keys[0]` signs, every key verifies (rotation without downtime). */
  keys: readonly RequestStateKey[];
  /** Lifetime of a minted `requestState`, seconds. */
  ttlSeconds: number;
  /** The ring is the public built-in development key (dev-loopback only). */
  isDevKey: boolean;
}

/** What `loadAuthConfig` needs from the rest of the configuration. */
export interface AuthContext {
  nodeEnv: string;
  /** Digests of ADMIN_API_KEYS (none may be an MCP key). */
  adminDigests?: readonly Uint8Array[];
  /** The address the gateway binds (`HOST`). */
  host: string;
  requestStateTtlSeconds: number;
}

function fail(message: string): never {
  throw new ConfigError(`invalid configuration: ${message}`);
}

/** A ring entry whose `secret` is non-enumerable (kept out of JSON, inspect and spreads). */
function ringKey(kid: string, secret: string): RequestStateKey {
  const k = { kid } as RequestStateKey;
  Object.defineProperty(k, 'secret', { value: secret, enumerable: false });
  return Object.freeze(k);
}

/**
 * Parses the authentication and `requestState` variables of `env` (empty values already removed)
 * and applies the start rules above, in steps: parse (`parseAuthEnv`), JWT (`jwtSettings`), API
 * keys (`apiKeySettings`), anonymous access (`accessSettings`), the key ring (`requestStateRing`).
 * @throws ConfigError one line naming the variable to set or fix.
 */
export function loadAuthConfig(
  env: Record<string, string | undefined>,
  ctx: AuthContext,
): { auth: AuthConfig; requestState: RequestStateConfig } {
  const production = ctx.nodeEnv === 'production';
  const e = parseAuthEnv(env, production);
  const jwt = jwtSettings(e);
  const keys = apiKeySettings(e, ctx, production);
  const { auth, devLoopback } = accessSettings(e, keys, jwt, ctx.host, production);
  const { ring, isDevKey } = requestStateRing(e, devLoopback, production);
  const requestState = {
    keys: Object.freeze(ring),
    ttlSeconds: ctx.requestStateTtlSeconds,
    isDevKey,
  };
  return { auth, requestState };
}

/** Applies the schema; in production every raw AUTH_API_KEYS key must pass the strength check. */
function parseAuthEnv(env: Record<string, string | undefined>, production: boolean): AuthEnv {
  const parsed = authSchema.safeParse(env);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    return fail(`${issue.path.join('.')}: ${issue.message}`);
  }
  if (production && env.AUTH_API_KEYS) {
    const weak = weakKeysProblem(env.AUTH_API_KEYS, 'AUTH_API_KEYS');
    if (weak) fail(weak);
  }
  return parsed.data;
}

/** JWT: the issuer and its keys come together; audience and scopes only with them; PUBLIC_URL with them. */
function jwtSettings(e: AuthEnv): JwtConfig | undefined {
  if (e.AUTH_JWT_ISSUER && !e.AUTH_JWT_JWKS_URL)
    fail("AUTH_JWT_JWKS_URL must be set with AUTH_JWT_ISSUER (the issuer's JWKS: https URL, file: URL or inline JSON)");
  if (e.AUTH_JWT_JWKS_URL && !e.AUTH_JWT_ISSUER)
    fail('AUTH_JWT_ISSUER must be set with AUTH_JWT_JWKS_URL (the exact "iss" of accepted tokens)');
  if (!e.AUTH_JWT_ISSUER) {
    if (e.AUTH_JWT_AUDIENCE !== undefined)
      fail('AUTH_JWT_AUDIENCE is set but AUTH_JWT_ISSUER is not (set both, or neither)');
    if (e.AUTH_JWT_REQUIRED_SCOPES !== undefined)
      fail('AUTH_JWT_REQUIRED_SCOPES is set but AUTH_JWT_ISSUER is not (set both, or neither)');
  }
  if (e.AUTH_JWT_ISSUER && !e.PUBLIC_URL) {
    fail(
      'PUBLIC_URL must be set with AUTH_JWT_ISSUER (the MCP endpoint URL clients use, e.g. https://mcp.example.com/mcp; the default token audience)',
    );
  }
  return e.AUTH_JWT_ISSUER
    ? {
        issuer: e.AUTH_JWT_ISSUER,
        audience: e.AUTH_JWT_AUDIENCE ?? e.PUBLIC_URL!,
        jwks: e.AUTH_JWT_JWKS_URL!,
        requiredScopes: e.AUTH_JWT_REQUIRED_SCOPES ?? [],
        clockToleranceSeconds: e.AUTH_JWT_CLOCK_TOLERANCE_S,
        jwksCooldownMs: e.AUTH_JWT_JWKS_COOLDOWN_MS,
      }
    : undefined;
}

/** AUTH_API_KEYS and, at start, the keys of AUTH_API_KEYS_FILE (checked against the fixed and admin keys). */
function apiKeySettings(
  e: AuthEnv,
  ctx: AuthContext,
  production: boolean,
): { fixed: ApiKeyEntry[]; all: ApiKeyEntry[] } {
  const fixed = e.AUTH_API_KEYS ?? [];
  if (!e.AUTH_API_KEYS_FILE) return { fixed, all: fixed };
  const rules = { production, ...(ctx.adminDigests ? { adminDigests: ctx.adminDigests } : {}) };
  const r = readApiKeysFile(e.AUTH_API_KEYS_FILE, fixed, rules);
  if ('problem' in r) fail(r.problem);
  return { fixed, all: [...fixed, ...r.keys] };
}

/** `config.auth`; anonymous access is explicit, or development on loopback with nothing configured (`devLoopback`). */
function accessSettings(
  e: AuthEnv,
  keys: { fixed: ApiKeyEntry[]; all: ApiKeyEntry[] },
  jwt: JwtConfig | undefined,
  host: string,
  production: boolean,
): { auth: AuthConfig; devLoopback: boolean } {
  const configured = keys.all.length > 0 || jwt !== undefined || e.AUTH_API_KEYS_FILE !== undefined;
  const loopback = isLoopbackHost(host);
  const devLoopback = !configured && loopback && !production;
  if (!configured && !e.AUTH_ALLOW_ANONYMOUS && !devLoopback) {
    const why = production ? 'NODE_ENV=production' : `HOST=${host} is not a loopback address`;
    fail(
      `no authentication configured (${why}): set AUTH_API_KEYS, or AUTH_JWT_ISSUER + AUTH_JWT_JWKS_URL + PUBLIC_URL, or AUTH_ALLOW_ANONYMOUS=true to serve everyone as one anonymous principal`,
    );
  }
  const auth: AuthConfig = {
    apiKeys: keys.all,
    fixedApiKeys: keys.fixed,
    ...(e.AUTH_API_KEYS_FILE
      ? { apiKeysFile: { path: e.AUTH_API_KEYS_FILE, reloadMs: e.AUTH_API_KEYS_RELOAD_MS } }
      : {}),
    ...(jwt ? { jwt } : {}),
    ...(e.PUBLIC_URL ? { publicUrl: e.PUBLIC_URL } : {}),
    allowAnonymous: e.AUTH_ALLOW_ANONYMOUS || devLoopback,
    anonymous: e.AUTH_ALLOW_ANONYMOUS ? 'configured' : devLoopback ? 'dev-loopback' : 'off',
  };
  return { auth, devLoopback };
}

/**
 * The requestState ring: REQUEST_STATE_KEYS, or the deprecated single key, or (dev-loopback
 * only) the dev key. In production no entry may be the dev key or a weak secret.
 */
function requestStateRing(
  e: AuthEnv,
  devLoopback: boolean,
  production: boolean,
): { ring: RequestStateKey[]; isDevKey: boolean } {
  if (e.REQUEST_STATE_KEYS && e.REQUEST_STATE_KEY) {
    fail(
      `set only one of REQUEST_STATE_KEYS and REQUEST_STATE_KEY (to keep the old key verifying, list it in REQUEST_STATE_KEYS as ${LEGACY_REQUEST_STATE_KID}:<key>)`,
    );
  }
  let ring: RequestStateKey[];
  let isDevKey = false;
  if (e.REQUEST_STATE_KEYS) ring = e.REQUEST_STATE_KEYS.map((k) => ringKey(k.kid, k.secret));
  else if (e.REQUEST_STATE_KEY) ring = [ringKey(LEGACY_REQUEST_STATE_KID, e.REQUEST_STATE_KEY)];
  else if (devLoopback) {
    ring = [ringKey(DEV_REQUEST_STATE_KID, DEV_REQUEST_STATE_KEY)];
    isDevKey = true;
  } else {
    fail(
      'REQUEST_STATE_KEYS must be set: kid:secret[,kid:secret...], each secret >= 32 characters, the same on every gateway replica (the built-in key is only for development on a loopback HOST without authentication)',
    );
  }
  if (production) {
    for (const [i, k] of ring.entries()) {
      const source = e.REQUEST_STATE_KEYS ? 'REQUEST_STATE_KEYS' : 'REQUEST_STATE_KEY';
      if (k.secret === DEV_REQUEST_STATE_KEY)
        fail(
          `${source}: entry ${i + 1} (kid "${k.kid}") is the public development key, which anyone can use to forge a continuation; generate one with: openssl rand -base64 48`,
        );
      const weak = weakKeyProblem(k.secret);
      if (weak)
        fail(
          `${source}: entry ${i + 1} (kid "${k.kid}"): the secret ${weak.replace('openssl rand -hex 32', 'openssl rand -base64 48')}`,
        );
    }
  }
  return { ring, isDevKey };
}

/**
 * Lines the gateway logs at `warn` when it starts (design D9): anonymous access and the public
 * development key are never silent.
 */
export function authStartupWarnings(c: {
  auth: AuthConfig;
  requestState: RequestStateConfig;
}): { event: string; message: string }[] {
  const out: { event: string; message: string }[] = [];
  if (c.auth.anonymous === 'dev-loopback') {
    out.push({
      event: 'auth.anonymous_dev',
      message:
        'no authentication configured: every request is the anonymous principal (allowed only in development on a loopback HOST); set AUTH_API_KEYS or AUTH_JWT_* before exposing the gateway',
    });
  } else if (c.auth.anonymous === 'configured') {
    out.push({
      event: 'auth.anonymous_allowed',
      message: 'AUTH_ALLOW_ANONYMOUS=true: requests without credentials are served as the anonymous principal',
    });
  }
  if (c.requestState.isDevKey) {
    out.push({
      event: 'request_state.dev_key',
      message:
        'requestState is signed with the public development key; set REQUEST_STATE_KEYS (the same on every replica) outside development',
    });
  }
  return out;
}
