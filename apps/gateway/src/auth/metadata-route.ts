/**
 * OAuth 2.0 Protected Resource Metadata (RFC 9728) as a
 * Fastify plugin. Served without credentials at
 *   - `/.well-known/oauth-protected-resource`, and
 *   - the path-suffixed form for the endpoint (`PUBLIC_URL` https://h/mcp →
 *     `/.well-known/oauth-protected-resource/mcp`), the URL the 401 challenge advertises;
 * as `GET` (and `HEAD`), JSON, `Access-Control-Allow-Origin: *` (browser-based clients read it),
 * cacheable for 5 minutes.
 *
 * Document: `resource` exactly `PUBLIC_URL` (as configured: config requires the canonical
 * form), `authorization_servers` `[AUTH_JWT_ISSUER]` when JWT is configured,
 * `bearer_methods_supported` `["header"]`, `scopes_supported` the required scopes (omitted when
 * none, so clients do not request an empty scope). Every URL comes from configuration, never
 * from `Host` or `X-Forwarded-*`.
 *
 * The SDK's `buildOAuthProtectedResourceMetadata` is not used: it needs the authorization
 * server's full RFC 8414 metadata (endpoints we do not know) and always names one, which an
 * API-key-only deployment has not. The URL comes from the SDK's
 * `getOAuthProtectedResourceMetadataUrl`, the document type from the SDK.
 *
 * Register it outside any authentication hook: `app.register(protectedResourceMetadataRoutes, opts)`.
 */
import type { FastifyPluginAsync } from 'fastify';
import {
  getOAuthProtectedResourceMetadataUrl,
  type OAuthProtectedResourceMetadata,
} from '@modelcontextprotocol/server';
import type { AuthConfig } from '@mcp-tasks/config';

export interface ProtectedResourceMetadataOptions {
  /** `PUBLIC_URL`, canonical (the `resource`). */
  publicUrl: string;
  /** `[AUTH_JWT_ISSUER]` when JWT is configured. */
  authorizationServers?: readonly string[];
  /** Scopes clients should request (the required ones). */
  scopesSupported?: readonly string[];
  /** Human-readable `resource_name`. */
  resourceName?: string;
}

const WELL_KNOWN = '/.well-known/oauth-protected-resource';

/** The metadata URL a challenge advertises: `https://h/.well-known/oauth-protected-resource/mcp` for `https://h/mcp`. */
export function protectedResourceMetadataUrl(publicUrl: string): string {
  return getOAuthProtectedResourceMetadataUrl(new URL(publicUrl));
}

/** The paths the document is served at: the root form, and the path-suffixed one when the endpoint has a path. */
export function protectedResourceMetadataPaths(publicUrl: string): string[] {
  const suffixed = new URL(protectedResourceMetadataUrl(publicUrl)).pathname;
  return suffixed === WELL_KNOWN ? [WELL_KNOWN] : [WELL_KNOWN, suffixed];
}

/** The RFC 9728 document. Pure. */
export function protectedResourceMetadata(o: ProtectedResourceMetadataOptions): OAuthProtectedResourceMetadata {
  return {
    resource: o.publicUrl,
    ...(o.authorizationServers?.length ? { authorization_servers: [...o.authorizationServers] } : {}),
    bearer_methods_supported: ['header'],
    ...(o.scopesSupported?.length ? { scopes_supported: [...o.scopesSupported] } : {}),
    ...(o.resourceName ? { resource_name: o.resourceName } : {}),
  };
}

/** The plugin options for `config.auth`, or `undefined` when `PUBLIC_URL` is not set (nothing to serve). */
export function metadataOptionsFromAuth(
  auth: AuthConfig,
  resourceName?: string,
): ProtectedResourceMetadataOptions | undefined {
  if (!auth.publicUrl) return undefined;
  return {
    publicUrl: auth.publicUrl,
    ...(auth.jwt ? { authorizationServers: [auth.jwt.issuer], scopesSupported: auth.jwt.requiredScopes } : {}),
    ...(resourceName ? { resourceName } : {}),
  };
}

/** Fastify plugin serving the document at `protectedResourceMetadataPaths(publicUrl)`. */
export const protectedResourceMetadataRoutes: FastifyPluginAsync<ProtectedResourceMetadataOptions> = async (
  app,
  opts,
) => {
  const doc = protectedResourceMetadata(opts);
  for (const url of protectedResourceMetadataPaths(opts.publicUrl)) {
    app.get(url, async (_req, reply) => {
      reply.header('cache-control', 'public, max-age=300').header('access-control-allow-origin', '*');
      return doc;
    });
  }
};
