/**
 * Unit tests of the refusal answers (apps/gateway/src/auth/challenge.ts; RFC 6750 §3, RFC 9728
 * §5.1; H-04; design D10) and of the Protected Resource Metadata document and paths
 * (apps/gateway/src/auth/metadata-route.ts): exact `WWW-Authenticate` values, statuses and
 * JSON-RPC bodies.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { loadConfig } from '@mcp-tasks/config';
import { authRefusalReply, bearerChallenge } from '../../apps/gateway/src/auth/challenge.js';
import {
  metadataOptionsFromAuth,
  protectedResourceMetadata,
  protectedResourceMetadataPaths,
  protectedResourceMetadataUrl,
} from '../../apps/gateway/src/auth/metadata-route.js';

const META = 'https://mcp.example.com/.well-known/oauth-protected-resource/mcp';

describe('bearerChallenge', () => {
  it('no credentials: only resource_metadata (no error code, RFC 6750 §3.1)', () => {
    assert.equal(bearerChallenge({ resourceMetadataUrl: META }), `Bearer resource_metadata="${META}"`);
  });
  it('invalid token: error, error_description, resource_metadata, in the SDK order', () => {
    assert.equal(
      bearerChallenge({ resourceMetadataUrl: META, error: 'invalid_token', errorDescription: 'token expired' }),
      `Bearer error="invalid_token", error_description="token expired", resource_metadata="${META}"`,
    );
  });
  it('insufficient scope: the scopes space-separated', () => {
    assert.equal(
      bearerChallenge({
        resourceMetadataUrl: META,
        error: 'insufficient_scope',
        errorDescription: 'token lacks a required scope',
        scope: ['tasks:read', 'tasks:write'],
      }),
      `Bearer error="insufficient_scope", error_description="token lacks a required scope", scope="tasks:read tasks:write", resource_metadata="${META}"`,
    );
  });
  it('without PUBLIC_URL the challenge is a bare Bearer', () => {
    assert.equal(bearerChallenge({}), 'Bearer');
    assert.equal(bearerChallenge({ error: 'invalid_token' }), 'Bearer error="invalid_token"');
  });
  it('quotes: backslash and double quote escaped, control characters replaced (no header injection)', () => {
    assert.equal(
      bearerChallenge({ error: 'invalid_token', errorDescription: 'a"b\\c\r\nSet-Cookie: x' }),
      'Bearer error="invalid_token", error_description="a\\"b\\\\c  Set-Cookie: x"',
    );
  });
});

describe('authRefusalReply', () => {
  it('no credentials → 401, bare challenge, JSON-RPC -32600 with the request id', () => {
    const r = authRefusalReply(
      { ok: false, status: 401, description: 'authentication required' },
      { resourceMetadataUrl: META, requestId: 7 },
    );
    assert.equal(r.status, 401);
    assert.deepEqual(r.headers, { 'www-authenticate': `Bearer resource_metadata="${META}"` });
    assert.deepEqual(r.body, {
      jsonrpc: '2.0',
      id: 7,
      error: { code: -32600, message: 'Unauthorized: authentication required' },
    });
  });
  it('invalid token → 401 with error="invalid_token"; the OAuth fields in error.data; id null when unknown', () => {
    const r = authRefusalReply(
      { ok: false, status: 401, error: 'invalid_token', description: 'token audience is not this resource' },
      { resourceMetadataUrl: META },
    );
    assert.equal(r.status, 401);
    assert.equal(
      r.headers['www-authenticate'],
      `Bearer error="invalid_token", error_description="token audience is not this resource", resource_metadata="${META}"`,
    );
    assert.deepEqual(r.body, {
      jsonrpc: '2.0',
      id: null,
      error: {
        code: -32600,
        message: 'Unauthorized: token audience is not this resource',
        data: { error: 'invalid_token', error_description: 'token audience is not this resource' },
      },
    });
  });
  it('insufficient scope → 403 with error="insufficient_scope" and scope', () => {
    const r = authRefusalReply(
      {
        ok: false,
        status: 403,
        error: 'insufficient_scope',
        description: 'token lacks a required scope',
        scope: ['tasks'],
      },
      { resourceMetadataUrl: META, requestId: 'a' },
    );
    assert.equal(r.status, 403);
    assert.equal(
      r.headers['www-authenticate'],
      `Bearer error="insufficient_scope", error_description="token lacks a required scope", scope="tasks", resource_metadata="${META}"`,
    );
    assert.equal(r.body.id, 'a');
    assert.equal(r.body.error.code, -32600);
    assert.deepEqual(r.body.error.data, {
      error: 'insufficient_scope',
      error_description: 'token lacks a required scope',
      scope: 'tasks',
    });
  });
  it('issuer unavailable → 503 with Retry-After, -32603, no challenge', () => {
    const r = authRefusalReply(
      { ok: false, status: 503, error: 'temporarily_unavailable', description: 'x', retryAfterSeconds: 5 },
      { resourceMetadataUrl: META },
    );
    assert.equal(r.status, 503);
    assert.deepEqual(r.headers, { 'retry-after': '5' });
    assert.equal(r.body.error.code, -32603);
  });
});

describe('Protected Resource Metadata (RFC 9728)', () => {
  it('URL and paths derive from PUBLIC_URL: root form plus the path-suffixed form', () => {
    assert.equal(protectedResourceMetadataUrl('https://mcp.example.com/mcp'), META);
    assert.deepEqual(protectedResourceMetadataPaths('https://mcp.example.com/mcp'), [
      '/.well-known/oauth-protected-resource',
      '/.well-known/oauth-protected-resource/mcp',
    ]);
    assert.deepEqual(protectedResourceMetadataPaths('https://mcp.example.com/tools/mcp'), [
      '/.well-known/oauth-protected-resource',
      '/.well-known/oauth-protected-resource/tools/mcp',
    ]);
    assert.deepEqual(protectedResourceMetadataPaths('https://mcp.example.com/'), [
      '/.well-known/oauth-protected-resource',
    ]);
  });

  it('JWT configured: resource exactly PUBLIC_URL, the issuer, header bearer method, the required scopes', () => {
    const auth = loadConfig({
      HOST: '0.0.0.0',
      REQUEST_STATE_KEYS: 'k1:ring-secret-0123456789abcdefghijklmnop',
      AUTH_JWT_ISSUER: 'https://idp.example.com/realms/mcp',
      AUTH_JWT_JWKS_URL: 'https://idp.example.com/realms/mcp/certs',
      AUTH_JWT_REQUIRED_SCOPES: 'tasks',
      PUBLIC_URL: 'https://mcp.example.com/mcp',
    }).auth;
    const o = metadataOptionsFromAuth(auth, 'mcp-task-service')!;
    assert.deepEqual(protectedResourceMetadata(o), {
      resource: 'https://mcp.example.com/mcp',
      authorization_servers: ['https://idp.example.com/realms/mcp'],
      bearer_methods_supported: ['header'],
      scopes_supported: ['tasks'],
      resource_name: 'mcp-task-service',
    });
  });

  it('API keys only: no authorization server, no scopes; without PUBLIC_URL there is nothing to serve', () => {
    const base = {
      HOST: '0.0.0.0',
      REQUEST_STATE_KEYS: 'k1:ring-secret-0123456789abcdefghijklmnop',
      AUTH_API_KEYS: 'a:key-a-0123456789abcdef',
    };
    assert.deepEqual(
      protectedResourceMetadata(
        metadataOptionsFromAuth(loadConfig({ ...base, PUBLIC_URL: 'https://mcp.example.com/mcp' }).auth)!,
      ),
      {
        resource: 'https://mcp.example.com/mcp',
        bearer_methods_supported: ['header'],
      },
    );
    assert.equal(metadataOptionsFromAuth(loadConfig(base).auth), undefined);
  });
});
