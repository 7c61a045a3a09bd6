/**
 * Authentication of `/mcp` (design D9; issue "Safe to expose" §1): every request carries
 * `Authorization: Bearer <API key or JWT>` and gets a principal, except `server/discover`
 * (a client's first probe, answered without credentials). Anonymous access exists only where
 * configuration allows it (authenticator.ts).
 *
 *  - `onRequest`: authenticates before the body is read, unless the `Mcp-Method` header says
 *    `server/discover`; a refusal is 401 (`WWW-Authenticate: Bearer resource_metadata=…`,
 *    `error="invalid_token"` when a token was presented), 403 (`insufficient_scope`) or 503
 *    (the issuer's keys cannot be fetched), with a JSON-RPC error body (challenge.ts);
 *  - `preHandler`: a request that skipped authentication must really be `server/discover`
 *    (the body says so); anything else is authenticated now.
 * The principal is on `req.principal` (`''` for an unauthenticated `server/discover`).
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from '@mcp-tasks/observability';
import type { Authenticator } from './authenticator.js';
import { authRefusalReply } from './challenge.js';

/** The caller of a request, set by authentication. */
declare module 'fastify' {
  interface FastifyRequest {
    principal: string;
  }
}

const DISCOVER = 'server/discover';

export interface AuthHooks {
  onRequest(req: FastifyRequest, reply: FastifyReply): Promise<unknown>;
  preHandler(req: FastifyRequest, reply: FastifyReply): Promise<unknown>;
}

export function authHooks(authenticator: Authenticator, log: Logger, resourceMetadataUrl: string | undefined): AuthHooks {
  const authenticate = async (req: FastifyRequest, reply: FastifyReply, requestId: unknown) => {
    const out = await authenticator.authenticate(req.headers.authorization);
    if (out.ok) {
      req.principal = out.principal;
      return undefined;
    }
    log.info({ status: out.status, error: out.error, reason: out.description }, 'auth.refused');
    const r = authRefusalReply(out, { ...(resourceMetadataUrl ? { resourceMetadataUrl } : {}), requestId });
    return reply.code(r.status).headers(r.headers).send(r.body);
  };
  return {
    async onRequest(req, reply) {
      req.principal = '';
      if (req.headers['mcp-method'] === DISCOVER) return undefined;
      return authenticate(req, reply, null);
    },
    async preHandler(req, reply) {
      if (req.principal) return undefined;
      const body = req.body as { method?: unknown; id?: unknown } | undefined;
      if (body && typeof body === 'object' && !Array.isArray(body) && body.method === DISCOVER) return undefined;
      return authenticate(req, reply, body && typeof body === 'object' ? (body.id ?? null) : null);
    },
  };
}
