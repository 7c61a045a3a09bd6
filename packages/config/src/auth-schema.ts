/**
 * The authentication variables' schema (zod): API keys, JWT issuer and keys, scopes,
 * PUBLIC_URL and the `requestState` key ring, each checked alone; auth.ts applies the rules
 * between them (`loadAuthConfig`). Every message names what is wrong, never a key or secret.
 */
import { createHash } from 'node:crypto';
import { isIP } from 'node:net';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';

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

const sha256 = (s: string) => createHash('sha256').update(s, 'utf8').digest();

/** `localhost`, 127.0.0.0/8, `::1` (with or without brackets). */
export function isLoopbackHost(host: string): boolean {
  const h = host
    .trim()
    .toLowerCase()
    .replace(/^\[(.*)\]$/, '$1');
  if (h === 'localhost' || h === '::1') return true;
  if (isIP(h) === 4) return h.startsWith('127.');
  return false;
}

/**
 * Why `jwks` is not a usable public JWK Set, or `undefined` when it is. Refuses private or
 * symmetric members: a published secret key would let anyone sign tokens.
 */
export function jwksProblem(jwks: unknown): string | undefined {
  if (!jwks || typeof jwks !== 'object' || !Array.isArray((jwks as JsonWebKeySet).keys))
    return 'must be a JWK Set: {"keys":[...]}';
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
const items = (v: string) =>
  v
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);

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
    ctx.addIssue({
      code: 'custom',
      message: 'no entries; expected principal:key or principal:sha256:<64 hex digits>, comma-separated',
    });
    return z.NEVER;
  }
  for (const [i, entry] of entries.entries()) {
    const n = i + 1;
    const colon = entry.indexOf(':');
    const name = colon > 0 ? entry.slice(0, colon) : '';
    // Never echo the value: an entry without a name may be a bare key.
    if (!PRINCIPAL_NAME_PATTERN.test(name)) {
      ctx.addIssue({
        code: 'custom',
        message: `entry ${n}: expected principal:key or principal:sha256:<64 hex digits>, principal being 1-64 letters, digits, ".", "_" or "-"`,
      });
      return z.NEVER;
    }
    const rest = entry.slice(colon + 1);
    let digest: Buffer;
    if (rest.startsWith('sha256:')) {
      const hex = rest.slice('sha256:'.length);
      if (!/^[0-9a-fA-F]{64}$/.test(hex)) {
        ctx.addIssue({
          code: 'custom',
          message: `entry ${n} (principal "${name}"): the sha256 form needs exactly 64 hex digits (sha256 of the key)`,
        });
        return z.NEVER;
      }
      digest = Buffer.from(hex, 'hex');
    } else {
      if (rest.length < MIN_API_KEY_CHARS) {
        ctx.addIssue({
          code: 'custom',
          message: `entry ${n} (principal "${name}"): key shorter than ${MIN_API_KEY_CHARS} characters; generate one with: openssl rand -hex 32`,
        });
        return z.NEVER;
      }
      if (rest.length > MAX_API_KEY_CHARS || !B64TOKEN.test(rest)) {
        ctx.addIssue({
          code: 'custom',
          message: `entry ${n} (principal "${name}"): a key is at most ${MAX_API_KEY_CHARS} of letters, digits, "-", ".", "_", "~", "+", "/" (then "=" padding), as a Bearer token`,
        });
        return z.NEVER;
      }
      digest = sha256(rest);
    }
    const hex = digest.toString('hex');
    const other = seen.get(hex);
    if (other !== undefined) {
      ctx.addIssue({
        code: 'custom',
        message: `entries ${other} and ${n} carry the same key; every key must name one principal`,
      });
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
    ctx.addIssue({
      code: 'custom',
      message: 'must have no query or fragment (it is the RFC 9728 resource identifier)',
    });
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
      ctx.addIssue({
        code: 'custom',
        message: `entry ${n}: expected kid:secret, kid being 1-64 letters, digits, ".", "_" or "-"`,
      });
      return z.NEVER;
    }
    const secret = entry.slice(colon + 1);
    if (secret.length < MIN_REQUEST_STATE_SECRET_CHARS) {
      ctx.addIssue({
        code: 'custom',
        message: `entry ${n} (kid "${kid}"): secret shorter than ${MIN_REQUEST_STATE_SECRET_CHARS} characters; generate one with: openssl rand -base64 48`,
      });
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

/** The authentication variables (`loadAuthConfig` parses `env` with it). */
export const authSchema = z.object({
  AUTH_API_KEYS: apiKeysSchema.optional(),
  AUTH_API_KEYS_FILE: z.string().optional(),
  AUTH_API_KEYS_RELOAD_MS: z.coerce.number().int().min(1000).max(3_600_000).default(5000),
  AUTH_JWT_ISSUER: issuer.optional(),
  AUTH_JWT_JWKS_URL: jwksSource.optional(),
  AUTH_JWT_AUDIENCE: z.string().optional(),
  AUTH_JWT_REQUIRED_SCOPES: scopes.optional(),
  AUTH_JWT_CLOCK_TOLERANCE_S: z.coerce.number().int().min(0).max(300).default(30),
  AUTH_JWT_JWKS_COOLDOWN_MS: z.coerce.number().int().min(1000).max(600_000).default(30_000),
  AUTH_ALLOW_ANONYMOUS: z
    .stringbool({ truthy: ['true'], falsy: ['false'], error: 'must be true or false' })
    .default(false),
  PUBLIC_URL: publicUrl.optional(),
  REQUEST_STATE_KEYS: ringEntries.optional(),
  REQUEST_STATE_KEY: z
    .string()
    .min(MIN_REQUEST_STATE_SECRET_CHARS, `must be at least ${MIN_REQUEST_STATE_SECRET_CHARS} characters`)
    .optional(),
});

/** The environment variables this module reads (the keys of its schema). */
export const AUTH_VARIABLES: readonly string[] = Object.freeze(Object.keys(authSchema.shape));

/** The parsed authentication variables. */
export type AuthEnv = z.infer<typeof authSchema>;
