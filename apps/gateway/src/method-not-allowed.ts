/**
 * HTTP methods the MCP endpoint does not serve (PUT, PATCH, TRACE, QUERY): `405 Method Not
 * Allowed` with `Allow: POST, GET, DELETE` (RFC 9110 §15.5.6) and a JSON-RPC error body
 * (`-32600`, id null), like every other refusal of `/mcp`, instead of the framework's plain 404.
 * POST is the MCP endpoint (one JSON-RPC message per POST, H-07); GET and DELETE serve 2025
 * sessions (a dual-era server, docs/synchronous-calls.md). OPTIONS is left to the framework:
 * there is no CORS support (no CORS plugin among the dependencies), so a preflight is not
 * answered.
 */
import type { FastifyInstance } from 'fastify';
import { ErrorCode, jsonRpcErrorBody } from './errors.js';

/** The methods `/mcp` serves, as the `Allow` header names them. */
export const MCP_ALLOWED_METHODS = 'POST, GET, DELETE';

/** Methods the framework can route that `/mcp` does not serve (OPTIONS aside, see above). */
const REFUSED = ['PUT', 'PATCH', 'TRACE', 'QUERY'] as const;

/** Registers the 405 answer for `url` (the MCP endpoint). */
export function registerMethodNotAllowed(app: FastifyInstance, url: string): void {
  app.route({
    method: REFUSED.filter((m) => app.supportedMethods.includes(m)),
    url,
    handler: (req, reply) =>
      reply
        .code(405)
        .header('allow', MCP_ALLOWED_METHODS)
        .send(
          jsonRpcErrorBody(
            null,
            ErrorCode.InvalidRequest,
            `Method Not Allowed: ${req.method} ${url}; the MCP endpoint accepts ${MCP_ALLOWED_METHODS}`,
          ),
        ),
  });
}
