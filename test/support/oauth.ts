/**
 * A loopback OAuth issuer for tests: signing keys made with jose, a JWKS served over HTTP on
 * 127.0.0.1 (its key set can be replaced, to rotate keys at the issuer, or made to fail), and a
 * token minter with every claim overridable.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK, type JWTPayload } from 'jose';

export interface SigningKey {
  kid: string;
  privateKey: CryptoKey;
  /** Public JWK with `kid`, `alg`, `use`. */
  jwk: JWK;
}

/** A fresh ES256 key pair with its public JWK. */
export async function signingKey(kid: string): Promise<SigningKey> {
  const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
  const jwk = { ...(await exportJWK(publicKey)), kid, alg: 'ES256', use: 'sig' };
  return { kid, privateKey, jwk };
}

export interface JwksServer {
  /** `http://127.0.0.1:<port>`: used as the issuer in tests. */
  origin: string;
  /** `<origin>/jwks.json`. */
  jwksUrl: string;
  /** Number of GETs of the JWKS so far. */
  fetches(): number;
  /** Replaces the published keys. */
  publish(keys: SigningKey[]): void;
  /** Answer the JWKS with this HTTP status (500: the issuer is failing); 200 restores. */
  failWith(status: number): void;
  close(): Promise<void>;
}

/** Starts a JWKS server on 127.0.0.1 (random port) publishing `keys`. */
export async function startJwksServer(keys: SigningKey[]): Promise<JwksServer> {
  let published = keys;
  let status = 200;
  let count = 0;
  const server: Server = createServer((req, res) => {
    if (req.url !== '/jwks.json') {
      res.writeHead(404).end();
      return;
    }
    count += 1;
    if (status !== 200) {
      res.writeHead(status, { 'content-type': 'text/plain' }).end('failing');
      return;
    }
    res
      .writeHead(200, { 'content-type': 'application/json' })
      .end(JSON.stringify({ keys: published.map((k) => k.jwk) }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const origin = `http://127.0.0.1:${port}`;
  return {
    origin,
    jwksUrl: `${origin}/jwks.json`,
    fetches: () => count,
    publish: (k) => void (published = k),
    failWith: (s) => void (status = s),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

export interface TokenSpec {
  key: SigningKey;
  issuer?: string;
  audience?: string | string[];
  subject?: string | null;
  /** Seconds since the epoch; `null` leaves the claim out. Default: now + 300. */
  exp?: number | null;
  nbf?: number;
  claims?: JWTPayload;
  /** Header `kid` (default the key's); `null` leaves it out. */
  kid?: string | null;
}

export const nowSeconds = () => Math.floor(Date.now() / 1000);

/** Signs an ES256 access token. */
export async function accessToken(s: TokenSpec): Promise<string> {
  const jwt = new SignJWT({ ...s.claims })
    .setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', ...(s.kid === null ? {} : { kid: s.kid ?? s.key.kid }) })
    .setIssuedAt();
  if (s.issuer) jwt.setIssuer(s.issuer);
  if (s.audience) jwt.setAudience(s.audience);
  if (s.subject !== null) jwt.setSubject(s.subject ?? 'user-1');
  if (s.exp !== null) jwt.setExpirationTime(s.exp ?? nowSeconds() + 300);
  if (s.nbf !== undefined) jwt.setNotBefore(s.nbf);
  return jwt.sign(s.key.privateKey);
}
