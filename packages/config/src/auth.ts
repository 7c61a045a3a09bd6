/**
 * Authentication and `requestState` key configuration (issue 10 §1 and §3, design D9).
 *
 * Variables (each documented in `.env.example`):
 *  - `AUTH_API_KEYS`            `principal:key` or `principal:sha256:<64 hex>`, comma-separated;
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
 *  - API keys are kept only as SHA-256 digests. Request-state secrets are non-enumerable
 *    properties, so `JSON.stringify(config)` and `util.inspect(config)` never print them.
 *
 * Every refusal is a `ConfigError` whose message is one line naming the variable, and never
 * contains a key or secret.
 */
import { createHash } from 'node:crypto';
import { isIP } from 'node:net';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { ConfigError } from './errors.js';

/** Allowed API-key principal names: 1-64 of letters, digits, `.`, `_`, `-`. */
export const PRINCIPAL_NAME_PATTERN = /^[A-Za-z0-9._-]{1,64}$/;
/** Allowed `requestState` key ids (the JWS `kid`): 1-64 of letters, digits, `.`, `_`, `-`. */
export const KEY_ID_PATTERN = /^[A-Za-z0-9._-]{1,64}$/;
/** RFC 6750 `b64token`: the characters a Bearer credential may use. */
const B64TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/;
/** RFC 6749 scope-token. */
const SCOPE_TOKEN = /^[\x21\x23-\x5B\x5D-\x7E]+$/;
export const MIN_API_KEY_CHARS = 16;
const MAX_API_KEY_CHARS = 4096;
export const MIN_REQUEST_STATE_SECRET_CHARS = 32;

/** Key id of the built-in development key, and of the deprecated single `REQUEST_STATE_KEY`. */
export const DEV_REQUEST_STATE_KID = 'dev';
export const LEGACY_REQUEST_STATE_KID = 'legacy';
const DEV_REQUEST_STATE_KEY = 'dev-only-request-state-key-change-me-0123456789';

/** One configured API key: the principal name and SHA-256 of the key (32 bytes); never the key. */
export interface ApiKeyEntry {
  readonly name: string;
  readonly digest: Buffer;
}

/** A JSON Web Key Set (RFC 7517 §5). */
export interface JsonWebKeySet {
  keys: Record<string, unknown>[];
}

/** Where the issuer's public keys come from. */
export type JwksSource =
  /** Fetched and cached (jose `createRemoteJWKSet`). */
  | { kind: 'remote'; url: string }
  /** Read once when the authenticator is created (air-gapped setups; rotate by restarting). */
  | { kind: 'file'; url: string }
  /** Given inline in `AUTH_JWT_JWKS_URL` (air-gapped setups). */
  | { kind: 'inline'; jwks: JsonWebKeySet };

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
  /** API keys (empty = none). */
  apiKeys: ApiKeyEntry[];
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
  /** The address the gateway binds (`HOST`). */
  host: string;
  requestStateTtlSeconds: number;
}

const sha256 = (s: string) => createHash('sha256').update(s, 'utf8').digest();

/** `localhost`, 127.0.0.0/8, `::1` (with or without brackets). */
export function isLoopbackHost(host: string): boolean {
  const h = host.trim().toLowerCase().replace(/^\[(.*)\]$/, '$1');
  if (h === 'localhost' || h === '::1') return true;
  if (isIP(h) === 4) return h.startsWith('127.');
  return false;
}

/**
 * Why `jwks` is not a usable public JWK Set, or `undefined` when it is. Refuses private or
 * symmetric members: a published secret key would let anyone sign tokens.
 */
export function jwksProblem(jwks: unknown): string | undefined {
  if (!jwks || typeof jwks !== 'object' || !Array.isArray((jwks as JsonWebKeySet).keys)) return 'must be a JWK Set: {"keys":[...]}';
  const keys = (jwks as JsonWebKeySet).keys;
  if (keys.length === 0) return 'the JWK Set has no keys';
  for (const [i, k] of keys.entries()) {
    if (!k || typeof k !== 'object' || typeof k.kty !== 'string') return `key ${i + 1} has no "kty"`;
    if (k.kty === 'oct') return `key ${i + 1} is a symmetric ("oct") key; publish only public keys`;
    if ('d' in k || 'p' in k || 'k' in k) return `key ${i + 1} holds private key material; publish only public keys`;
  }
  return undefined;
}

/** Splits a comma list, trimming and dropping empty items (a trailing comma is harmless). */
const items = (v: string) => v.split(',').map((s) => s.trim()).filter(Boolean);

/** An http(s) URL; http only for a loopback host. */
function httpsUrl(v: string, ctx: z.RefinementCtx): URL | undefined {
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    ctx.addIssue({ code: 'custom', message: 'must be an absolute URL such as https://example.com/...' });
    return undefined;
  }
  if (u.protocol !== 'https:' && !(u.protocol === 'http:' && isLoopbackHost(u.hostname))) {
    ctx.addIssue({ code: 'custom', message: 'must be an https URL (http only for a loopback host)' });
    return undefined;
  }
  if (u.username || u.password) {
    ctx.addIssue({ code: 'custom', message: 'must not carry a user name or password' });
    return undefined;
  }
  return u;
}

/** `principal:key,...` or `principal:sha256:<hex>` entries → digests (AUTH_API_KEYS, ADMIN_API_KEYS). */
export const apiKeysSchema = z.string().transform((v, ctx): ApiKeyEntry[] => {
  const out: ApiKeyEntry[] = [];
  const seen = new Map<string, number>();
  const entries = items(v);
  if (entries.length === 0) {
    ctx.addIssue({ code: 'custom', message: 'no entries; expected principal:key or principal:sha256:<64 hex digits>, comma-separated' });
    return z.NEVER;
  }
  for (const [i, entry] of entries.entries()) {
    const n = i + 1;
    const colon = entry.indexOf(':');
    const name = colon > 0 ? entry.slice(0, colon) : '';
    // Never echo the value: an entry without a name may be a bare key.
    if (!PRINCIPAL_NAME_PATTERN.test(name)) {
      ctx.addIssue({ code: 'custom', message: `entry ${n}: expected principal:key or principal:sha256:<64 hex digits>, principal being 1-64 letters, digits, ".", "_" or "-"` });
      return z.NEVER;
    }
    const rest = entry.slice(colon + 1);
    let digest: Buffer;
    if (rest.startsWith('sha256:')) {
      const hex = rest.slice('sha256:'.length);
      if (!/^[0-9a-fA-F]{64}$/.test(hex)) {
        ctx.addIssue({ code: 'custom', message: `entry ${n} (principal "${name}"): the sha256 form needs exactly 64 hex digits (sha256 of the key)` });
        return z.NEVER;
      }
      digest = Buffer.from(hex, 'hex');
    } else {
      if (rest.length < MIN_API_KEY_CHARS) {
        ctx.addIssue({ code: 'custom', message: `entry ${n} (principal "${name}"): key shorter than ${MIN_API_KEY_CHARS} characters; generate one with: openssl rand -hex 32` });
        return z.NEVER;
      }
      if (rest.length > MAX_API_KEY_CHARS || !B64TOKEN.test(rest)) {
        ctx.addIssue({ code: 'custom', message: `entry ${n} (principal "${name}"): a key is at most ${MAX_API_KEY_CHARS} of letters, digits, "-", ".", "_", "~", "+", "/" (then "=" padding), as a Bearer token` });
        return z.NEVER;
      }
      digest = sha256(rest);
    }
    const hex = digest.toString('hex');
    const other = seen.get(hex);
    if (other !== undefined) {
      ctx.addIssue({ code: 'custom', message: `entries ${other} and ${n} carry the same key; every key must name one principal` });
      return z.NEVER;
    }
    seen.set(hex, n);
    out.push({ name, digest });
  }
  return out;
});

const issuer = z.string().transform((v, ctx) => {
  const u = httpsUrl(v, ctx);
  if (!u) return z.NEVER;
  if (u.search || u.hash || v.includes('#') || v.includes('?')) {
    ctx.addIssue({ code: 'custom', message: 'an issuer has no query or fragment (RFC 8414)' });
    return z.NEVER;
  }
  // Kept as written: `iss` is compared as an exact string.
  return v;
});

const jwksSource = z.string().transform((v, ctx): JwksSource => {
  const t = v.trim();
  if (t.startsWith('{')) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(t);
    } catch {
      ctx.addIssue({ code: 'custom', message: 'inline JWKS is not valid JSON' });
      return z.NEVER;
    }
    const problem = jwksProblem(parsed);
    if (problem) {
      ctx.addIssue({ code: 'custom', message: `inline JWKS: ${problem}` });
      return z.NEVER;
    }
    return { kind: 'inline', jwks: parsed as JsonWebKeySet };
  }
  if (t.startsWith('file:')) {
    try {
      fileURLToPath(t);
    } catch {
      ctx.addIssue({ code: 'custom', message: 'a file: URL needs an absolute path, e.g. file:///etc/mcp/jwks.json' });
      return z.NEVER;
    }
    return { kind: 'file', url: new URL(t).href };
  }
  const u = httpsUrl(t, ctx);
  if (!u) return z.NEVER;
  return { kind: 'remote', url: u.href };
});

const scopes = z.string().transform((v, ctx) => {
  const list = [...new Set(v.split(/[\s,]+/).filter(Boolean))];
  const bad = list.find((s) => !SCOPE_TOKEN.test(s));
  if (bad !== undefined) {
    ctx.addIssue({ code: 'custom', message: `"${bad.slice(0, 64)}" is not an OAuth scope token` });
    return z.NEVER;
  }
  return list;
});

const publicUrl = z.string().transform((v, ctx) => {
  const u = httpsUrl(v, ctx);
  if (!u) return z.NEVER;
  if (u.search || u.hash || v.includes('?') || v.includes('#')) {
    ctx.addIssue({ code: 'custom', message: 'must have no query or fragment (it is the RFC 9728 resource identifier)' });
    return z.NEVER;
  }
  if (!/^[A-Za-z0-9._~/-]*$/.test(u.pathname)) {
    ctx.addIssue({ code: 'custom', message: 'the path may only use letters, digits, "/", ".", "_", "~" and "-"' });
    return z.NEVER;
  }
  if (u.href !== v) {
    // Clients compare `resource` with the URL they use, character for character (RFC 9728 §3.3).
    ctx.addIssue({ code: 'custom', message: `write it in canonical form: ${u.href}` });
    return z.NEVER;
  }
  return u.href;
});

const ringEntries = z.string().transform((v, ctx): { kid: string; secret: string }[] => {
  const out: { kid: string; secret: string }[] = [];
  const entries = items(v);
  if (entries.length === 0) {
    ctx.addIssue({ code: 'custom', message: 'no entries; expected kid:secret[,kid:secret...]' });
    return z.NEVER;
  }
  for (const [i, entry] of entries.entries()) {
    const n = i + 1;
    const colon = entry.indexOf(':');
    const kid = colon > 0 ? entry.slice(0, colon) : '';
    if (!KEY_ID_PATTERN.test(kid)) {
      ctx.addIssue({ code: 'custom', message: `entry ${n}: expected kid:secret, kid being 1-64 letters, digits, ".", "_" or "-"` });
      return z.NEVER;
    }
    const secret = entry.slice(colon + 1);
    if (secret.length < MIN_REQUEST_STATE_SECRET_CHARS) {
      ctx.addIssue({ code: 'custom', message: `entry ${n} (kid "${kid}"): secret shorter than ${MIN_REQUEST_STATE_SECRET_CHARS} characters; generate one with: openssl rand -base64 48` });
      return z.NEVER;
    }
    if (out.some((k) => k.kid === kid)) {
      ctx.addIssue({ code: 'custom', message: `kid "${kid}" appears twice; every key needs its own kid` });
      return z.NEVER;
    }
    out.push({ kid, secret });
  }
  return out;
});

const authSchema = z.object({
  AUTH_API_KEYS: apiKeysSchema.optional(),
  AUTH_JWT_ISSUER: issuer.optional(),
  AUTH_JWT_JWKS_URL: jwksSource.optional(),
  AUTH_JWT_AUDIENCE: z.string().optional(),
  AUTH_JWT_REQUIRED_SCOPES: scopes.optional(),
  AUTH_JWT_CLOCK_TOLERANCE_S: z.coerce.number().int().min(0).max(300).default(30),
  AUTH_JWT_JWKS_COOLDOWN_MS: z.coerce.number().int().min(1000).max(600_000).default(30_000),
  AUTH_ALLOW_ANONYMOUS: z.stringbool({ truthy: ['true'], falsy: ['false'], error: 'must be true or false' }).default(false),
  PUBLIC_URL: publicUrl.optional(),
  REQUEST_STATE_KEYS: ringEntries.optional(),
  REQUEST_STATE_KEY: z.string().min(MIN_REQUEST_STATE_SECRET_CHARS, `must be at least ${MIN_REQUEST_STATE_SECRET_CHARS} characters`).optional(),
});

/** The environment variables this module reads (the keys of its schema). */
export const AUTH_VARIABLES: readonly string[] = Object.freeze(Object.keys(authSchema.shape));

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
 * and applies the start rules above.
 * @throws ConfigError one line naming the variable to set or fix.
 */
export function loadAuthConfig(env: Record<string, string | undefined>, ctx: AuthContext): { auth: AuthConfig; requestState: RequestStateConfig } {
  const parsed = authSchema.safeParse(env);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    return fail(`${issue.path.join('.')}: ${issue.message}`);
  }
  const e = parsed.data;
  const production = ctx.nodeEnv.toLowerCase() === 'production';

  // JWT: the issuer and its keys come together; audience and scopes only with them.
  if (e.AUTH_JWT_ISSUER && !e.AUTH_JWT_JWKS_URL) fail('AUTH_JWT_JWKS_URL must be set with AUTH_JWT_ISSUER (the issuer\'s JWKS: https URL, file: URL or inline JSON)');
  if (e.AUTH_JWT_JWKS_URL && !e.AUTH_JWT_ISSUER) fail('AUTH_JWT_ISSUER must be set with AUTH_JWT_JWKS_URL (the exact "iss" of accepted tokens)');
  if (!e.AUTH_JWT_ISSUER) {
    if (e.AUTH_JWT_AUDIENCE !== undefined) fail('AUTH_JWT_AUDIENCE is set but AUTH_JWT_ISSUER is not (set both, or neither)');
    if (e.AUTH_JWT_REQUIRED_SCOPES !== undefined) fail('AUTH_JWT_REQUIRED_SCOPES is set but AUTH_JWT_ISSUER is not (set both, or neither)');
  }
  if (e.AUTH_JWT_ISSUER && !e.PUBLIC_URL) {
    fail('PUBLIC_URL must be set with AUTH_JWT_ISSUER (the MCP endpoint URL clients use, e.g. https://mcp.example.com/mcp; the default token audience)');
  }
  const jwt: JwtConfig | undefined = e.AUTH_JWT_ISSUER
    ? {
        issuer: e.AUTH_JWT_ISSUER,
        audience: e.AUTH_JWT_AUDIENCE ?? e.PUBLIC_URL!,
        jwks: e.AUTH_JWT_JWKS_URL!,
        requiredScopes: e.AUTH_JWT_REQUIRED_SCOPES ?? [],
        clockToleranceSeconds: e.AUTH_JWT_CLOCK_TOLERANCE_S,
        jwksCooldownMs: e.AUTH_JWT_JWKS_COOLDOWN_MS,
      }
    : undefined;
  const keys = e.AUTH_API_KEYS ?? [];

  // Anonymous: explicit, or development on loopback with nothing configured.
  const configured = keys.length > 0 || jwt !== undefined;
  const loopback = isLoopbackHost(ctx.host);
  const devLoopback = !configured && loopback && !production;
  if (!configured && !e.AUTH_ALLOW_ANONYMOUS && !devLoopback) {
    const why = production ? 'NODE_ENV=production' : `HOST=${ctx.host} is not a loopback address`;
    fail(`no authentication configured (${why}): set AUTH_API_KEYS, or AUTH_JWT_ISSUER + AUTH_JWT_JWKS_URL + PUBLIC_URL, or AUTH_ALLOW_ANONYMOUS=true to serve everyone as one anonymous principal`);
  }
  const auth: AuthConfig = {
    apiKeys: keys,
    ...(jwt ? { jwt } : {}),
    ...(e.PUBLIC_URL ? { publicUrl: e.PUBLIC_URL } : {}),
    allowAnonymous: e.AUTH_ALLOW_ANONYMOUS || devLoopback,
    anonymous: e.AUTH_ALLOW_ANONYMOUS ? 'configured' : devLoopback ? 'dev-loopback' : 'off',
  };

  // requestState ring: REQUEST_STATE_KEYS, or the deprecated single key, or (dev-loopback only) the dev key.
  if (e.REQUEST_STATE_KEYS && e.REQUEST_STATE_KEY) {
    fail(`set only one of REQUEST_STATE_KEYS and REQUEST_STATE_KEY (to keep the old key verifying, list it in REQUEST_STATE_KEYS as ${LEGACY_REQUEST_STATE_KID}:<key>)`);
  }
  let ring: RequestStateKey[];
  let isDevKey = false;
  if (e.REQUEST_STATE_KEYS) ring = e.REQUEST_STATE_KEYS.map((k) => ringKey(k.kid, k.secret));
  else if (e.REQUEST_STATE_KEY) ring = [ringKey(LEGACY_REQUEST_STATE_KID, e.REQUEST_STATE_KEY)];
  else if (devLoopback) {
    ring = [ringKey(DEV_REQUEST_STATE_KID, DEV_REQUEST_STATE_KEY)];
    isDevKey = true;
  } else {
    fail('REQUEST_STATE_KEYS must be set: kid:secret[,kid:secret...], each secret >= 32 characters, the same on every gateway replica (the built-in key is only for development on a loopback HOST without authentication)');
  }
  const requestState = { keys: Object.freeze(ring), ttlSeconds: ctx.requestStateTtlSeconds, isDevKey } as RequestStateConfig;
  return { auth, requestState };
}

/**
 * Lines the gateway logs at `warn` when it starts (design D9): anonymous access and the public
 * development key are never silent.
 */
export function authStartupWarnings(c: { auth: AuthConfig; requestState: RequestStateConfig }): { event: string; message: string }[] {
  const out: { event: string; message: string }[] = [];
  if (c.auth.anonymous === 'dev-loopback') {
    out.push({ event: 'auth.anonymous_dev', message: 'no authentication configured: every request is the anonymous principal (allowed only in development on a loopback HOST); set AUTH_API_KEYS or AUTH_JWT_* before exposing the gateway' });
  } else if (c.auth.anonymous === 'configured') {
    out.push({ event: 'auth.anonymous_allowed', message: 'AUTH_ALLOW_ANONYMOUS=true: requests without credentials are served as the anonymous principal' });
  }
  if (c.requestState.isDevKey) {
    out.push({ event: 'request_state.dev_key', message: 'requestState is signed with the public development key; set REQUEST_STATE_KEYS (the same on every replica) outside development' });
  }
  return out;
}
