/**
 * Checks on the HTTP envelope of `/mcp` before anything else reads the request:
 *  - `Origin`: a present Origin that is not allowed → 403 (H-03, DNS rebinding defence).
 *    ALLOWED_ORIGINS lists origins (`https://app.example.com`: scheme, host and port must
 *    match) and bare host names (`localhost`: any scheme and port, the SDK's check); by default
 *    the loopback names outside production and nothing in production;
 *  - `Host`: missing or malformed → 400; not one of ALLOWED_HOSTS (when configured, or by
 *    default when the gateway binds a loopback address) → 403 (DNS rebinding defence);
 *  - `Content-Type` of a POST: not `application/json` → 415 (H-07); on a body-less GET or
 *    DELETE it is dropped (clients such as the Python SDK send it on the session's DELETE, and
 *    an empty body is no JSON parse error);
 *  - `Content-Encoding` of a POST other than `identity` (a gzip body, say) → 415 with
 *    `Accept-Encoding: identity` (RFC 9110 §15.5.16): the gateway does not decompress, and
 *    parsing compressed bytes as JSON would answer a parse error quoting them.
 * Each answers with an id-less JSON-RPC error body (errors.ts table).
 *
 * A client sends the same `Host` on every request, so the Host verdict (a URL parse, twice with
 * ALLOWED_HOSTS) is remembered per header value, for the first HOST_VERDICTS values a gateway
 * sees (a bounded `lru-cache`); a refused value is checked again each time.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { LRUCache } from 'lru-cache';
import { isJsonContentType, validateHostHeader, validateOriginHeader } from '@modelcontextprotocol/server';
import type { Config } from '@mcp-tasks/config';
import { ErrorCode, jsonRpcErrorBody } from './errors.js';

/** Parses a `Host` header value (`name[:port]`, `[v6][:port]`); undefined when malformed. */
function hostnameOf(host: string | undefined): string | undefined {
  if (!host || host.length > 255 || /[\s/?#@\\]/.test(host)) return undefined;
  try {
    return new URL(`http://${host}`).hostname || undefined;
  } catch {
    return undefined;
  }
}

/** `Host` header values whose accepted verdict is remembered (per gateway process). */
const HOST_VERDICTS = 1000;

/**
 * Why a `Host` header value is refused, or undefined when it is accepted: missing or malformed
 * → 400; not one of `allowedHosts` (when set) → 403.
 */
function hostRefusal(
  host: string | undefined,
  allowedHosts: string[] | undefined,
): { status: 400 | 403; message: string } | undefined {
  if (hostnameOf(host) === undefined) return { status: 400, message: 'Bad Request: missing or malformed Host header' };
  if (allowedHosts) {
    const v = validateHostHeader(host, allowedHosts);
    if (!v.ok) return { status: 403, message: `Forbidden: ${v.message}` };
  }
  return undefined;
}

/** The serialized origin of an `Origin` header value (`''` when it is none). */
function originOf(value: string): string {
  try {
    return new URL(value).origin;
  } catch {
    return '';
  }
}

/**
 * The Origin, Host, Content-Encoding and Content-Type checks of `config` for the route's
 * `onRequest` hook, synchronous (no promise per request): the reply it sent when it refused the
 * request, else undefined.
 */
export function requestGuards(config: Config): (req: FastifyRequest, reply: FastifyReply) => FastifyReply | undefined {
  const origins = new Set(config.allowedOrigins.filter((e) => e.includes('://')));
  const hostnames = config.allowedOrigins.filter((e) => !e.includes('://'));
  const acceptedHosts = new LRUCache<string, true>({ max: HOST_VERDICTS });
  return (req, reply) => {
    const origin = req.headers.origin;
    if (origin !== undefined && !(origins.size && origins.has(originOf(origin)))) {
      const v = validateOriginHeader(origin, hostnames);
      if (!v.ok)
        return reply.code(403).send(jsonRpcErrorBody(null, ErrorCode.InvalidRequest, `Forbidden: ${v.message}`));
    }
    const host = req.headers.host;
    if (host === undefined || !acceptedHosts.has(host)) {
      const refused = hostRefusal(host, config.allowedHosts);
      if (refused)
        return reply.code(refused.status).send(jsonRpcErrorBody(null, ErrorCode.InvalidRequest, refused.message));
      acceptedHosts.set(host!, true);
    }
    if ((req.method === 'DELETE' || req.method === 'GET') && !Number(req.headers['content-length'] ?? 0)) {
      delete req.headers['content-type'];
      delete req.raw.headers['content-type'];
    }
    const encoding = req.headers['content-encoding']?.trim().toLowerCase();
    if (req.method === 'POST' && encoding && encoding !== 'identity') {
      return reply
        .code(415)
        .header('accept-encoding', 'identity')
        .send(
          jsonRpcErrorBody(
            null,
            ErrorCode.InvalidRequest,
            'Unsupported Media Type: Content-Encoding is not supported; send the body uncompressed',
          ),
        );
    }
    if (req.method === 'POST' && !isJsonContentType(req.headers['content-type'] ?? null)) {
      return reply
        .code(415)
        .send(
          jsonRpcErrorBody(
            null,
            ErrorCode.InvalidRequest,
            'Unsupported Media Type: Content-Type must be application/json',
          ),
        );
    }
    return undefined;
  };
}
