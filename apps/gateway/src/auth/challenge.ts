/**
 * The HTTP answer to a refused request (H-04; RFC 6750 §3, RFC 9728 §5.1; design D10).
 *
 * | refusal                     | HTTP | WWW-Authenticate                                                        | JSON-RPC |
 * |-----------------------------|------|--------------------------------------------------------------------------|----------|
 * | no credentials              | 401  | `Bearer resource_metadata="…"`                                           | -32600   |
 * | invalid, expired, wrong aud | 401  | `Bearer error="invalid_token", error_description="…", resource_metadata="…"` | -32600 |
 * | missing a required scope    | 403  | `Bearer error="insufficient_scope", error_description="…", scope="…", resource_metadata="…"` | -32600 |
 * | issuer's JWKS unreachable   | 503  | none; `Retry-After: 5`                                                   | -32603   |
 *
 * `resource_metadata` is the RFC 9728 document URL derived from `PUBLIC_URL` alone (never from
 * `Host` or `X-Forwarded-*`); without `PUBLIC_URL` (API keys only) the challenge is a bare
 * `Bearer`. Parameters come in the SDK's order (error, error_description, scope,
 * resource_metadata) and are quoted the SDK's way, so our challenges and the SDK's per-operation
 * scope challenges read alike.
 *
 * The body is a JSON-RPC error, not the OAuth error JSON the SDK's `bearerAuthChallengeResponse`
 * sends: MCP clients read `WWW-Authenticate` to act on a 401/403 (OAuth discovery, re-running a
 * headers helper), and the body only for what to show; every other refusal of `POST /mcp`
 * (Origin 403, 413, 415, 429, 503) is a JSON-RPC error carrying the request id when known, and
 * a client (or the fuzz test) can rely on one body shape for every status. The OAuth fields are
 * kept in `error.data` (`error`, `error_description`, `scope`), so nothing is lost.
 */
import { ErrorCode, jsonRpcErrorBody } from '../errors.js';
import type { AuthRefusal } from './authenticator.js';

export interface BearerChallengeParams {
  /** RFC 9728 metadata URL (from `PUBLIC_URL`). */
  resourceMetadataUrl?: string;
  /** RFC 6750 error code; omitted when the request carried no credentials. */
  error?: string;
  errorDescription?: string;
  /** Scopes needed (with `insufficient_scope`). */
  scope?: readonly string[];
}

/** RFC 7230 quoted-string content: `\` and `"` escaped, anything not printable ASCII replaced by a space. */
const quoted = (v: string) => `"${v.replaceAll(/[\\"]/g, (c) => `\\${c}`).replaceAll(/[^\u0020-\u007E]/g, ' ')}"`;

/**
 * Builds a `WWW-Authenticate` value, e.g. `Bearer resource_metadata="https://h/.well-known/oauth-protected-resource/mcp"`
 * or `Bearer error="invalid_token", error_description="token expired", resource_metadata="…"`. Pure.
 */
export function bearerChallenge(p: BearerChallengeParams): string {
  const params: string[] = [];
  if (p.error) params.push(`error=${quoted(p.error)}`);
  if (p.error && p.errorDescription) params.push(`error_description=${quoted(p.errorDescription)}`);
  if (p.scope?.length) params.push(`scope=${quoted(p.scope.join(' '))}`);
  if (p.resourceMetadataUrl) params.push(`resource_metadata=${quoted(p.resourceMetadataUrl)}`);
  return params.length ? `Bearer ${params.join(', ')}` : 'Bearer';
}

/** A reply to write as is: `reply.code(r.status).headers(r.headers).send(r.body)`. */
export interface AuthReply {
  status: 401 | 403 | 503;
  headers: Record<string, string>;
  body: ReturnType<typeof jsonRpcErrorBody>;
}

/**
 * The complete HTTP answer for a refusal. Pure.
 * @param opts.resourceMetadataUrl the RFC 9728 URL (metadata-route.ts `protectedResourceMetadataUrl`), when PUBLIC_URL is set
 * @param opts.requestId the JSON-RPC id of the request when the body was already read (else `null`)
 */
export function authRefusalReply(
  refusal: AuthRefusal,
  opts: { resourceMetadataUrl?: string; requestId?: unknown } = {},
): AuthReply {
  const id = opts.requestId ?? null;
  const meta = opts.resourceMetadataUrl ? { resourceMetadataUrl: opts.resourceMetadataUrl } : {};
  switch (refusal.status) {
    case 401:
      if (refusal.error === undefined) {
        return {
          status: 401,
          headers: { 'www-authenticate': bearerChallenge(meta) },
          body: jsonRpcErrorBody(id, ErrorCode.InvalidRequest, `Unauthorized: ${refusal.description}`),
        };
      }
      return {
        status: 401,
        headers: {
          'www-authenticate': bearerChallenge({ ...meta, error: refusal.error, errorDescription: refusal.description }),
        },
        body: jsonRpcErrorBody(id, ErrorCode.InvalidRequest, `Unauthorized: ${refusal.description}`, {
          error: refusal.error,
          error_description: refusal.description,
        }),
      };
    case 403:
      return {
        status: 403,
        headers: {
          'www-authenticate': bearerChallenge({
            ...meta,
            error: refusal.error,
            errorDescription: refusal.description,
            scope: refusal.scope,
          }),
        },
        body: jsonRpcErrorBody(
          id,
          ErrorCode.InvalidRequest,
          `Forbidden: ${refusal.description} (requires: ${refusal.scope.join(' ')})`,
          {
            error: refusal.error,
            error_description: refusal.description,
            scope: refusal.scope.join(' '),
          },
        ),
      };
    case 503:
      return {
        status: 503,
        headers: { 'retry-after': String(refusal.retryAfterSeconds) },
        body: jsonRpcErrorBody(id, ErrorCode.InternalError, 'Authorization server unavailable; retry later'),
      };
  }
}
