/**
 * The MRTR `requestState` codec with a key ring (M-05, M-06, M-07; design D7, D9; cases B-17, N-02).
 *
 * Wire form: a compact JWS (RFC 7515), HS256, made and checked by jose:
 *
 *     header  {"alg":"HS256","kid":"<key id>","typ":"mcp-request-state+jwt"}
 *     payload {"p":<the continuation>,"pb":"<principal tag>","jti":"<nonce>","iat":<s>,"exp":<s>}
 *
 * - Rotation: `mint` signs with `keys[0]`; `verify` uses the key the `kid` names, so a state
 *   minted before a rotation verifies while its key is still in the ring. A `kid` not in the ring
 *   is refused.
 * - Binding (M-06): `pb` is HMAC-SHA256(key, "mcp.requestState.principal\0" + principal), first
 *   16 bytes, base64url: the raw principal is never in the state, and a tag cannot be checked
 *   against a guessed principal without the key. `verify` recomputes it for the caller's principal.
 * - Expiry: `exp` = now + `ttlSeconds`, checked against the injectable clock (no extra leeway:
 *   the same ring and clock mint and verify). The gateway passes Redis time (`RedisClock`,
 *   packages/jobs clock.ts), so every replica checks against one clock, within its 1 s
 *   tolerance, whatever its own clock says (case N-11).
 * - Single use (M-07): `jti` is a random nonce returned by `verify` as `nonce`; the caller spends
 *   it (e.g. Redis `SET NX` with an expiry >= the ttl). This module keeps no state.
 * - The state is signed, not encrypted: the client can read `p`. Never put a secret in it.
 *
 * Any failure throws one error type, `RequestStateError`, whose `reason` is an opaque code; the
 * message never carries the payload, the principal or a key. The caller answers `-32602`
 * ("invalid requestState"), whatever the reason.
 */
import { createHmac, randomUUID, timingSafeEqual } from 'node:crypto';
import { errors, jwtVerify, SignJWT } from 'jose';

/** Why a `requestState` was refused. Opaque: for logs and metrics, not for the client. */
export type RequestStateFailure = 'malformed' | 'signature' | 'unknown_kid' | 'expired' | 'principal';

/** The single error `verify` throws. */
export class RequestStateError extends Error {
  override name = 'RequestStateError';
  constructor(readonly reason: RequestStateFailure) {
    super(`requestState rejected: ${reason}`);
  }
}

/** One key of the ring. `secret`: a string is UTF-8 encoded; at least 32 bytes. */
export interface RequestStateRingKey {
  kid: string;
  secret: string | Uint8Array;
}

export interface RequestStateRingOptions {
  /** The ring: `keys[0]` signs, every key verifies. Key ids unique, 1-64 of `[A-Za-z0-9._-]`. */
  keys: readonly RequestStateRingKey[];
  /** Lifetime of a minted state, seconds (integer >= 1). */
  ttlSeconds: number;
  /** Clock in milliseconds since the epoch (default `Date.now`). */
  now?: () => number;
  /** Longest accepted (and minted) state, in characters (default 65,536). */
  maxLength?: number;
}

export interface RequestStateRing<T extends object> {
  /**
   * Seals `payload` (JSON-serializable; the key `nonce` is reserved) for `principal`.
   * @throws TypeError when the payload has a `nonce` key; RangeError when the state would exceed `maxLength`.
   */
  mint(payload: T, principal: string): Promise<string>;
  /**
   * Checks `state` for `principal` and returns its payload with the state's single-use `nonce`.
   * @throws RequestStateError on a bad signature, unknown `kid`, expiry, another principal, or malformed input.
   */
  verify(state: string, principal: string): Promise<T & { nonce: string }>;
}

const TYP = 'mcp-request-state+jwt';
const KID = /^[A-Za-z0-9._-]{1,64}$/;
const MIN_SECRET_BYTES = 32;
const DEFAULT_MAX_LENGTH = 65_536;
const BIND_LABEL = 'mcp.requestState.principal\0';

/** Marker thrown by the key lookup, mapped to `unknown_kid`. */
class UnknownKidError extends Error {}

const toBytes = (s: string | Uint8Array) => (typeof s === 'string' ? new TextEncoder().encode(s) : new Uint8Array(s));

/**
 * The ring's secrets by key id, checked: kids unique and well-formed, secrets of at least
 * MIN_SECRET_BYTES. @throws TypeError / RangeError naming the bad key.
 */
function secretsByKid(keys: readonly RequestStateRingKey[]): Map<string, Uint8Array> {
  const byKid = new Map<string, Uint8Array>();
  for (const k of keys) {
    if (typeof k.kid !== 'string' || !KID.test(k.kid))
      throw new TypeError('requestState ring: a kid must be 1-64 of letters, digits, ".", "_" or "-"');
    if (byKid.has(k.kid)) throw new TypeError(`requestState ring: kid "${k.kid}" appears twice`);
    const secret = toBytes(k.secret);
    if (secret.byteLength < MIN_SECRET_BYTES)
      throw new RangeError(`requestState ring: the secret of kid "${k.kid}" is shorter than ${MIN_SECRET_BYTES} bytes`);
    byKid.set(k.kid, secret);
  }
  return byKid;
}

/**
 * Creates the codec. Validates the ring at once.
 * @throws TypeError / RangeError for an empty ring, a bad or repeated `kid`, a secret under 32 bytes, or a bad `ttlSeconds`.
 */
export function createRequestStateRing<T extends object>(options: RequestStateRingOptions): RequestStateRing<T> {
  const { keys, ttlSeconds, now = Date.now, maxLength = DEFAULT_MAX_LENGTH } = options;
  const list: unknown = keys;
  if (!Array.isArray(list) || keys.length === 0) throw new TypeError('requestState ring: at least one key is required');
  if (!Number.isInteger(ttlSeconds) || ttlSeconds < 1)
    throw new RangeError('requestState ring: ttlSeconds must be an integer >= 1');
  const byKid = secretsByKid(keys);
  const signKid = keys[0]!.kid;
  const signKey = byKid.get(signKid)!;

  const principalTag = (key: Uint8Array, principal: string) =>
    createHmac('sha256', key)
      .update(BIND_LABEL + principal, 'utf8')
      .digest()
      .subarray(0, 16);

  async function mint(payload: T, principal: string): Promise<string> {
    if (payload === null || typeof payload !== 'object' || Array.isArray(payload))
      throw new TypeError('requestState payload must be an object');
    if (Object.prototype.hasOwnProperty.call(payload, 'nonce'))
      throw new TypeError('requestState payload must not have a "nonce" key (reserved)');
    const iat = Math.floor(now() / 1000);
    const state = await new SignJWT({
      p: payload,
      pb: principalTag(signKey, principal).toString('base64url'),
    })
      .setProtectedHeader({ alg: 'HS256', kid: signKid, typ: TYP })
      .setJti(randomUUID())
      .setIssuedAt(iat)
      .setExpirationTime(iat + ttlSeconds)
      .sign(signKey);
    if (state.length > maxLength)
      throw new RangeError(`requestState longer than ${maxLength} characters; keep the continuation small`);
    return state;
  }

  async function verify(state: string, principal: string): Promise<T & { nonce: string }> {
    if (typeof state !== 'string' || state.length === 0 || state.length > maxLength)
      throw new RequestStateError('malformed');
    let result;
    try {
      result = await jwtVerify(
        state,
        (header) => {
          const key = typeof header.kid === 'string' ? byKid.get(header.kid) : undefined;
          if (!key) throw new UnknownKidError();
          return key;
        },
        { algorithms: ['HS256'], typ: TYP, currentDate: new Date(now()), requiredClaims: ['exp', 'jti'] },
      );
    } catch (e) {
      if (e instanceof UnknownKidError) throw new RequestStateError('unknown_kid');
      if (e instanceof errors.JWTExpired) throw new RequestStateError('expired');
      if (e instanceof errors.JWSSignatureVerificationFailed) throw new RequestStateError('signature');
      throw new RequestStateError('malformed');
    }
    const { payload, protectedHeader } = result;
    const key = byKid.get(protectedHeader.kid!)!;
    const p = payload.p;
    if (
      p === null ||
      typeof p !== 'object' ||
      Array.isArray(p) ||
      typeof payload.jti !== 'string' ||
      typeof payload.pb !== 'string'
    ) {
      throw new RequestStateError('malformed');
    }
    const presented = Buffer.from(payload.pb, 'base64url');
    const expected = principalTag(key, principal);
    if (presented.length !== expected.length || !timingSafeEqual(presented, expected))
      throw new RequestStateError('principal');
    return { ...(p as T), nonce: payload.jti };
  }

  return { mint, verify };
}
