/**
 * The auth pieces over real HTTP (issue 10 §1; H-04; RFC 6750 §3; RFC 9728): a Fastify app in
 * the test registers `protectedResourceMetadataRoutes` and a stand-in `POST /mcp` whose
 * preHandler is wired the way the gateway is meant to wire it (authenticate →
 * `authRefusalReply`). Requests go over a socket with node:http so `Host` and
 * `X-Forwarded-*` can be forged: the metadata document and the challenge URL must not move.
 * The header shape is the one Claude Code sends from `.mcp.json` `headers`
 * (`"Authorization": "Bearer ${MCP_TASKS_TOKEN}"`).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'node:http';
import type { AddressInfo } from 'node:net';
import Fastify, { type FastifyInstance } from 'fastify';
import { loadConfig, type Config } from '@mcp-tasks/config';
import { createAuthenticator, type Identity } from '../../apps/gateway/src/auth/authenticator.js';
import { authRefusalReply } from '../../apps/gateway/src/auth/challenge.js';
import {
  metadataOptionsFromAuth,
  protectedResourceMetadataRoutes,
  protectedResourceMetadataUrl,
} from '../../apps/gateway/src/auth/metadata-route.js';
import { accessToken, signingKey, type SigningKey } from '../support/oauth.js';

const PUBLIC_URL = 'https://mcp.example.com/mcp';
const ISSUER = 'https://idp.example.com/realms/mcp';
const META_URL = 'https://mcp.example.com/.well-known/oauth-protected-resource/mcp';
const API_KEY = 'claude-code-key-0123456789abcdef';

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: any;
}

/** One HTTP request over a socket; `headers` may include Host. */
function call(
  port: number,
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: unknown,
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method,
        path,
        headers: { ...(payload ? { 'content-type': 'application/json' } : {}), ...headers },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          resolve({ status: res.statusCode!, headers: res.headers, body: text ? JSON.parse(text) : undefined });
        });
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

/** The stand-in gateway: metadata routes plus POST /mcp behind the authenticator. */
async function app(config: Config): Promise<{ app: FastifyInstance; port: number }> {
  const authenticator = await createAuthenticator(config.auth);
  const resourceMetadataUrl = config.auth.publicUrl ? protectedResourceMetadataUrl(config.auth.publicUrl) : undefined;
  const f = Fastify();
  const metadata = metadataOptionsFromAuth(config.auth, 'mcp-task-service');
  if (metadata) await f.register(protectedResourceMetadataRoutes, metadata);
  f.post('/mcp', {
    preHandler: async (req, reply) => {
      const outcome = await authenticator.authenticate(req.headers.authorization);
      if (!outcome.ok) {
        const r = authRefusalReply(outcome, {
          ...(resourceMetadataUrl ? { resourceMetadataUrl } : {}),
          requestId: (req.body as { id?: unknown } | undefined)?.id,
        });
        return reply.code(r.status).headers(r.headers).send(r.body);
      }
      (req as unknown as { identity: Identity }).identity = outcome;
    },
    handler: async (req) => {
      const { identity } = req as unknown as { identity: Identity };
      return {
        jsonrpc: '2.0',
        id: (req.body as { id: unknown }).id,
        result: { principal: identity.principal, kind: identity.kind },
      };
    },
  });
  await f.listen({ host: '127.0.0.1', port: 0 });
  return { app: f, port: (f.server.address() as AddressInfo).port };
}

const RPC = { jsonrpc: '2.0', id: 42, method: 'tools/list', params: {} };
const FORGED = {
  host: 'evil.example.net',
  'x-forwarded-host': 'evil.example.net',
  'x-forwarded-proto': 'http',
  'x-forwarded-prefix': '/evil',
};

describe('HTTP: JWT and API keys with PUBLIC_URL', () => {
  let k1: SigningKey;
  let server: { app: FastifyInstance; port: number };

  before(async () => {
    k1 = await signingKey('k1');
    const config = loadConfig({
      HOST: '0.0.0.0',
      REQUEST_STATE_KEYS: 'k1:ring-secret-0123456789abcdefghijklmnop',
      AUTH_API_KEYS: `claude:${API_KEY}`,
      AUTH_JWT_ISSUER: ISSUER,
      AUTH_JWT_JWKS_URL: JSON.stringify({ keys: [k1.jwk] }),
      AUTH_JWT_REQUIRED_SCOPES: 'tasks',
      PUBLIC_URL,
    });
    server = await app(config);
  });
  after(async () => {
    await server.app.close();
  });

  for (const path of ['/.well-known/oauth-protected-resource', '/.well-known/oauth-protected-resource/mcp']) {
    it(`GET ${path} without credentials: the RFC 9728 document, resource exactly PUBLIC_URL, whatever Host says`, async () => {
      for (const headers of [{}, FORGED]) {
        const r = await call(server.port, 'GET', path, headers);
        assert.equal(r.status, 200);
        assert.match(String(r.headers['content-type']), /^application\/json/);
        assert.equal(r.headers['access-control-allow-origin'], '*');
        assert.deepEqual(r.body, {
          resource: PUBLIC_URL,
          authorization_servers: [ISSUER],
          bearer_methods_supported: ['header'],
          scopes_supported: ['tasks'],
          resource_name: 'mcp-task-service',
        });
      }
    });
  }

  it('POST /mcp without credentials: 401, WWW-Authenticate: Bearer resource_metadata (no error), JSON-RPC body with the id', async () => {
    for (const headers of [{}, FORGED]) {
      const r = await call(server.port, 'POST', '/mcp', headers, RPC);
      assert.equal(r.status, 401);
      assert.equal(r.headers['www-authenticate'], `Bearer resource_metadata="${META_URL}"`);
      assert.deepEqual(r.body, {
        jsonrpc: '2.0',
        id: 42,
        error: { code: -32600, message: 'Unauthorized: authentication required' },
      });
    }
  });

  it('the advertised metadata URL is served by this app (path-suffixed form)', async () => {
    const r = await call(server.port, 'GET', new URL(META_URL).pathname);
    assert.equal(r.status, 200);
    assert.equal(r.body.resource, PUBLIC_URL);
  });

  it('a wrong token: 401 with error="invalid_token" and the same resource_metadata', async () => {
    const r = await call(
      server.port,
      'POST',
      '/mcp',
      { authorization: 'Bearer wrong-key-0123456789abcdef', ...FORGED },
      RPC,
    );
    assert.equal(r.status, 401);
    assert.equal(
      r.headers['www-authenticate'],
      `Bearer error="invalid_token", error_description="unknown credentials", resource_metadata="${META_URL}"`,
    );
    assert.equal(r.body.error.code, -32600);
    assert.equal(r.body.error.data.error, 'invalid_token');
    assert.equal(r.body.id, 42);
  });

  it('a token for another audience: 401 invalid_token (N-04)', async () => {
    const t = await accessToken({
      key: k1,
      issuer: ISSUER,
      audience: 'https://other.example.com',
      claims: { scope: 'tasks' },
    });
    const r = await call(server.port, 'POST', '/mcp', { authorization: `Bearer ${t}` }, RPC);
    assert.equal(r.status, 401);
    assert.match(
      String(r.headers['www-authenticate']),
      /^Bearer error="invalid_token", error_description="token audience is not this resource"/,
    );
    assert.ok(!JSON.stringify(r.body).includes(t.split('.')[1]!), 'the body does not echo the token');
  });

  it('a valid token without the required scope: 403 insufficient_scope with scope="tasks"', async () => {
    const t = await accessToken({ key: k1, issuer: ISSUER, audience: PUBLIC_URL, claims: { scope: 'other' } });
    const r = await call(server.port, 'POST', '/mcp', { authorization: `Bearer ${t}` }, RPC);
    assert.equal(r.status, 403);
    assert.equal(
      r.headers['www-authenticate'],
      `Bearer error="insufficient_scope", error_description="token lacks a required scope", scope="tasks", resource_metadata="${META_URL}"`,
    );
    assert.equal(r.body.error.data.scope, 'tasks');
  });

  it('a valid token with the scope, and the API key in the .mcp.json header shape, are served', async () => {
    const t = await accessToken({ key: k1, issuer: ISSUER, audience: PUBLIC_URL, claims: { scope: 'tasks' } });
    const jwt = await call(server.port, 'POST', '/mcp', { authorization: `Bearer ${t}` }, RPC);
    assert.equal(jwt.status, 200);
    assert.deepEqual(jwt.body.result, { principal: `jwt:${ISSUER}#user-1`, kind: 'jwt' });
    // .mcp.json: "headers": {"Authorization": "Bearer ${MCP_TASKS_TOKEN}"} with MCP_TASKS_TOKEN an API key.
    const key = await call(server.port, 'POST', '/mcp', { Authorization: `Bearer ${API_KEY}` }, RPC);
    assert.equal(key.status, 200);
    assert.deepEqual(key.body.result, { principal: 'key:claude', kind: 'apikey' });
  });
});

describe('HTTP: API keys without PUBLIC_URL', () => {
  let server: { app: FastifyInstance; port: number };
  before(async () => {
    server = await app(
      loadConfig({
        HOST: '0.0.0.0',
        REQUEST_STATE_KEYS: 'k1:ring-secret-0123456789abcdefghijklmnop',
        AUTH_API_KEYS: `claude:${API_KEY}`,
      }),
    );
  });
  after(async () => {
    await server.app.close();
  });

  it('no metadata document is served, and the challenge is a bare Bearer', async () => {
    assert.equal((await call(server.port, 'GET', '/.well-known/oauth-protected-resource')).status, 404);
    const r = await call(server.port, 'POST', '/mcp', {}, RPC);
    assert.equal(r.status, 401);
    assert.equal(r.headers['www-authenticate'], 'Bearer');
    const ok = await call(server.port, 'POST', '/mcp', { authorization: `Bearer ${API_KEY}` }, RPC);
    assert.equal(ok.body.result.principal, 'key:claude');
  });
});
