/**
 * Unit tests of the MRTR requestState codec with a key ring (apps/gateway/src/request-state.ts;
 * M-05, M-06, M-07; cases B-17 (b)-(d), (f) and N-02): round trip, any changed byte refused,
 * another principal, expiry on the injected clock, rotation (a key still in the ring verifies,
 * a removed one does not), unknown kid, and no principal or key material in the state.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { SignJWT } from 'jose';
import { loadConfig } from '@mcp-tasks/config';
import {
  createRequestStateRing,
  RequestStateError,
  type RequestStateFailure,
} from '../../apps/gateway/src/request-state.js';

interface Round {
  k: 'inline' | 'sync';
  tool: string;
  step: number;
  state: unknown;
}

const S1 = 'ring-secret-one-0123456789abcdefghijklmnop';
const S2 = 'ring-secret-two-0123456789abcdefghijklmnop';
const ALICE = 'key:alice';
const BOB = 'key:bob';
const PAYLOAD: Round = { k: 'inline', tool: 'share_report', step: 1, state: { channel: '#general', n: [1, 2] } };

async function rejects(p: Promise<unknown>, reason: RequestStateFailure | RequestStateFailure[]) {
  const reasons = Array.isArray(reason) ? reason : [reason];
  await assert.rejects(p, (e: unknown) => {
    assert.ok(e instanceof RequestStateError, `a RequestStateError, got ${String(e)}`);
    assert.ok(reasons.includes(e.reason), `reason ${e.reason}, expected ${reasons.join('|')}`);
    assert.equal(e.message, `requestState rejected: ${e.reason}`, 'the message is the opaque reason only');
    return true;
  });
}

const decodePart = (state: string, i: number) =>
  JSON.parse(Buffer.from(state.split('.')[i]!, 'base64url').toString('utf8'));

describe('createRequestStateRing: round trip and binding', () => {
  it('mint then verify returns the payload and a nonce; each mint has its own nonce', async () => {
    const ring = createRequestStateRing<Round>({ keys: [{ kid: 'k1', secret: S1 }], ttlSeconds: 600 });
    const a = await ring.mint(PAYLOAD, ALICE);
    const b = await ring.mint(PAYLOAD, ALICE);
    const va = await ring.verify(a, ALICE);
    const vb = await ring.verify(b, ALICE);
    const { nonce, ...rest } = va;
    assert.deepEqual(rest, PAYLOAD);
    assert.match(nonce, /^[0-9a-f-]{36}$/);
    assert.notEqual(va.nonce, vb.nonce, 'single use needs a nonce per state (M-07)');
    assert.equal(decodePart(a, 0).kid, 'k1');
    assert.equal(decodePart(a, 0).alg, 'HS256');
  });

  it('another principal is refused (M-06, N-02)', async () => {
    const ring = createRequestStateRing<Round>({ keys: [{ kid: 'k1', secret: S1 }], ttlSeconds: 600 });
    const s = await ring.mint(PAYLOAD, ALICE);
    await rejects(ring.verify(s, BOB), 'principal');
    await rejects(ring.verify(s, ''), 'principal');
    await rejects(ring.verify(s, `${ALICE} `), 'principal');
    assert.equal((await ring.verify(s, ALICE)).tool, 'share_report');
  });

  it('a state holds neither the raw principal nor any key material (and is not an unkeyed hash of the principal)', async () => {
    const principal = 'jwt:https://idp.example.com#user-4711';
    const ring = createRequestStateRing<Round>({ keys: [{ kid: 'k1', secret: S1 }], ttlSeconds: 600 });
    const s = await ring.mint(PAYLOAD, principal);
    const text = JSON.stringify([decodePart(s, 0), decodePart(s, 1)]) + s;
    for (const needle of [
      principal,
      'user-4711',
      S1,
      Buffer.from(S1).toString('base64url'),
      Buffer.from(S1).toString('hex'),
    ]) {
      assert.ok(!text.includes(needle), `the state does not contain ${needle}`);
    }
    const pb = decodePart(s, 1).pb as string;
    const unkeyed = createHash('sha256').update(principal).digest();
    assert.ok(!unkeyed.toString('base64url').startsWith(pb.slice(0, 10)), 'the binding is keyed, not a plain hash');
    assert.deepEqual(Object.keys(decodePart(s, 1)).sort(), ['exp', 'iat', 'jti', 'p', 'pb']);
  });
});

describe('createRequestStateRing: tampering and malformed input (case B-17 b)', () => {
  it('every single-character change anywhere in the state that changes its bytes is refused', async () => {
    const ring = createRequestStateRing<Round>({ keys: [{ kid: 'k1', secret: S1 }], ttlSeconds: 600 });
    const s = await ring.mint(PAYLOAD, ALICE);
    const parts = (x: string) =>
      x
        .split('.')
        .map((p) => Buffer.from(p, 'base64url').toString('hex'))
        .join('.');
    let tried = 0;
    for (let i = 0; i < s.length; i++) {
      const flipped = s.slice(0, i) + (s[i] === 'A' ? 'B' : 'A') + s.slice(i + 1);
      // A changed padding bit in the last character of a part decodes to the same bytes: not a change.
      if (s[i] !== '.' && parts(flipped) === parts(s)) continue;
      tried += 1;
      await rejects(ring.verify(flipped, ALICE), ['signature', 'malformed', 'unknown_kid']);
    }
    assert.ok(tried > s.length - 5, `almost every position is a real change (${tried}/${s.length})`);
  });

  it('a flipped byte in the payload or the signature is a signature failure', async () => {
    const ring = createRequestStateRing<Round>({ keys: [{ kid: 'k1', secret: S1 }], ttlSeconds: 600 });
    const s = await ring.mint(PAYLOAD, ALICE);
    const [h, p, sig] = s.split('.') as [string, string, string];
    const flip = (x: string, i: number) => x.slice(0, i) + (x[i] === 'A' ? 'B' : 'A') + x.slice(i + 1);
    await rejects(ring.verify(`${h}.${flip(p, 10)}.${sig}`, ALICE), 'signature');
    await rejects(ring.verify(`${h}.${p}.${flip(sig, 5)}`, ALICE), 'signature');
  });

  it('malformed values are refused as malformed', async () => {
    const ring = createRequestStateRing<Round>({ keys: [{ kid: 'k1', secret: S1 }], ttlSeconds: 600, maxLength: 4096 });
    const s = await ring.mint(PAYLOAD, ALICE);
    for (const bad of [
      '',
      'abc',
      'a.b.c',
      `${s}.x`,
      s.split('.').slice(0, 2).join('.'),
      'v1.eyJwIjp7fX0.AAAA',
      `${s}${'A'.repeat(4096)}`,
    ]) {
      await rejects(ring.verify(bad, ALICE), 'malformed');
    }
    await rejects(ring.verify(undefined as unknown as string, ALICE), 'malformed');
  });

  it('a correctly keyed token of another type, algorithm or shape is refused (no cross-use)', async () => {
    const ring = createRequestStateRing<Round>({ keys: [{ kid: 'k1', secret: S1 }], ttlSeconds: 600 });
    const key = new TextEncoder().encode(S1);
    const exp = Math.floor(Date.now() / 1000) + 60;
    // A plain JWT signed with the same secret (e.g. the secret reused elsewhere): typ differs.
    const plainJwt = await new SignJWT({ p: PAYLOAD, pb: 'x', jti: 'n' })
      .setProtectedHeader({ alg: 'HS256', kid: 'k1' })
      .setExpirationTime(exp)
      .sign(key);
    await rejects(ring.verify(plainJwt, ALICE), 'malformed');
    // HS512 with the right key and typ: only HS256 is accepted.
    const hs512 = await new SignJWT({ p: PAYLOAD, pb: 'x', jti: 'n' })
      .setProtectedHeader({ alg: 'HS512', kid: 'k1', typ: 'mcp-request-state+jwt' })
      .setExpirationTime(exp)
      .sign(key);
    await rejects(ring.verify(hs512, ALICE), 'malformed');
    // No expiry: refused.
    const noExp = await new SignJWT({ p: PAYLOAD, pb: 'x', jti: 'n' })
      .setProtectedHeader({ alg: 'HS256', kid: 'k1', typ: 'mcp-request-state+jwt' })
      .sign(key);
    await rejects(ring.verify(noExp, ALICE), 'malformed');
    // The payload must be an object.
    const notObject = await new SignJWT({ p: 'string', pb: 'x', jti: 'n' })
      .setProtectedHeader({ alg: 'HS256', kid: 'k1', typ: 'mcp-request-state+jwt' })
      .setExpirationTime(exp)
      .sign(key);
    await rejects(ring.verify(notObject, ALICE), 'malformed');
  });
});

describe('createRequestStateRing: expiry on the injected clock (case B-17 d)', () => {
  it('valid until ttlSeconds after minting, refused from then on', async () => {
    let t = 1_800_000_000_000;
    const ring = createRequestStateRing<Round>({ keys: [{ kid: 'k1', secret: S1 }], ttlSeconds: 60, now: () => t });
    const s = await ring.mint(PAYLOAD, ALICE);
    assert.equal(decodePart(s, 1).exp, 1_800_000_060, 'exp comes from the injected clock, not Date.now()');
    t += 59_000;
    assert.equal((await ring.verify(s, ALICE)).step, 1);
    t += 1_000;
    await rejects(ring.verify(s, ALICE), 'expired');
    t += 3_600_000;
    await rejects(ring.verify(s, ALICE), 'expired');
  });

  it('a clock behind the minting one does not extend the life (exp is absolute)', async () => {
    let t = 1_800_000_000_000;
    const ring = createRequestStateRing<Round>({ keys: [{ kid: 'k1', secret: S1 }], ttlSeconds: 60, now: () => t });
    const s = await ring.mint(PAYLOAD, ALICE);
    t = 1_800_000_000_000 + 120_000;
    await rejects(ring.verify(s, ALICE), 'expired');
  });
});

describe('createRequestStateRing: rotation and key ids (cases B-17 f, N-02)', () => {
  it('signs with the first key; a state of a key still in the ring verifies; once removed it is refused', async () => {
    const before = createRequestStateRing<Round>({ keys: [{ kid: 'k1', secret: S1 }], ttlSeconds: 600 });
    const during = createRequestStateRing<Round>({
      keys: [
        { kid: 'k2', secret: S2 },
        { kid: 'k1', secret: S1 },
      ],
      ttlSeconds: 600,
    });
    const after = createRequestStateRing<Round>({ keys: [{ kid: 'k2', secret: S2 }], ttlSeconds: 600 });
    const old = await before.mint(PAYLOAD, ALICE);
    assert.equal((await during.verify(old, ALICE)).tool, 'share_report', 'the old key is still in the ring: accepted');
    await rejects(after.verify(old, ALICE), 'unknown_kid');
    const fresh = await during.mint(PAYLOAD, ALICE);
    assert.equal(decodePart(fresh, 0).kid, 'k2', 'the first key signs');
    assert.equal((await after.verify(fresh, ALICE)).tool, 'share_report');
    await rejects(before.verify(fresh, ALICE), 'unknown_kid');
    // The binding follows the key that signed: another principal is refused under either key.
    await rejects(during.verify(old, BOB), 'principal');
  });

  it('a kid in the ring with another secret is a signature failure; an unknown or missing kid is refused', async () => {
    const ring = createRequestStateRing<Round>({ keys: [{ kid: 'k1', secret: S1 }], ttlSeconds: 600 });
    const sameKidOtherSecret = createRequestStateRing<Round>({ keys: [{ kid: 'k1', secret: S2 }], ttlSeconds: 600 });
    const otherKid = createRequestStateRing<Round>({ keys: [{ kid: 'zz', secret: S1 }], ttlSeconds: 600 });
    await rejects(ring.verify(await sameKidOtherSecret.mint(PAYLOAD, ALICE), ALICE), 'signature');
    await rejects(ring.verify(await otherKid.mint(PAYLOAD, ALICE), ALICE), 'unknown_kid');
    const exp = Math.floor(Date.now() / 1000) + 60;
    const noKid = await new SignJWT({ p: PAYLOAD, pb: 'x', jti: 'n' })
      .setProtectedHeader({ alg: 'HS256', typ: 'mcp-request-state+jwt' })
      .setExpirationTime(exp)
      .sign(new TextEncoder().encode(S1));
    await rejects(ring.verify(noKid, ALICE), 'unknown_kid');
  });

  it('takes config.requestState.keys as they are (secrets are non-enumerable there, still readable)', async () => {
    const config = loadConfig({
      HOST: '0.0.0.0',
      AUTH_API_KEYS: 'ci:ci-api-key-0123456789abcdef',
      REQUEST_STATE_KEYS: `new:${S2},old:${S1}`,
    });
    const ring = createRequestStateRing<Round>({
      keys: config.requestState.keys,
      ttlSeconds: config.requestState.ttlSeconds,
    });
    const s = await ring.mint(PAYLOAD, ALICE);
    assert.equal(decodePart(s, 0).kid, 'new');
    const newKeyOnly = createRequestStateRing<Round>({ keys: [{ kid: 'new', secret: S2 }], ttlSeconds: 600 });
    assert.equal((await newKeyOnly.verify(s, ALICE)).step, 1, 'signed with the configured secret of the first key');
  });

  it('accepts Uint8Array secrets', async () => {
    const bytes = new Uint8Array(32).fill(7);
    const ring = createRequestStateRing<Round>({ keys: [{ kid: 'b', secret: bytes }], ttlSeconds: 600 });
    assert.equal((await ring.verify(await ring.mint(PAYLOAD, ALICE), ALICE)).step, 1);
  });
});

describe('createRequestStateRing: construction and mint checks', () => {
  it('refuses an empty ring, a short secret, a bad or repeated kid, a bad ttl; messages hold no secret', () => {
    const cases: [() => unknown, RegExp][] = [
      [() => createRequestStateRing({ keys: [], ttlSeconds: 600 }), /at least one key/],
      [
        () => createRequestStateRing({ keys: [{ kid: 'k1', secret: 'x'.repeat(31) }], ttlSeconds: 600 }),
        /shorter than 32 bytes/,
      ],
      [() => createRequestStateRing({ keys: [{ kid: 'k 1', secret: S1 }], ttlSeconds: 600 }), /kid must be/],
      [
        () =>
          createRequestStateRing({
            keys: [
              { kid: 'k1', secret: S1 },
              { kid: 'k1', secret: S2 },
            ],
            ttlSeconds: 600,
          }),
        /appears twice/,
      ],
      [() => createRequestStateRing({ keys: [{ kid: 'k1', secret: S1 }], ttlSeconds: 0 }), /ttlSeconds/],
      [() => createRequestStateRing({ keys: [{ kid: 'k1', secret: S1 }], ttlSeconds: 1.5 }), /ttlSeconds/],
    ];
    for (const [make, re] of cases) {
      assert.throws(make, (e: Error) => {
        assert.match(e.message, re);
        assert.ok(!e.message.includes(S1) && !e.message.includes(S2) && !e.message.includes('x'.repeat(31)));
        return true;
      });
    }
  });

  it('mint refuses a payload with a "nonce" key, a non-object, and a state over maxLength', async () => {
    const ring = createRequestStateRing<Record<string, unknown>>({
      keys: [{ kid: 'k1', secret: S1 }],
      ttlSeconds: 600,
      maxLength: 2048,
    });
    await assert.rejects(ring.mint({ nonce: 'mine' }, ALICE), TypeError);
    await assert.rejects(ring.mint([] as unknown as Record<string, unknown>, ALICE), TypeError);
    await assert.rejects(ring.mint({ big: 'x'.repeat(4096) }, ALICE), RangeError);
    assert.ok((await ring.mint({ small: 'x'.repeat(100) }, ALICE)).length < 2048);
  });
});
