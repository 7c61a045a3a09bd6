/**
 * Authentication of `/mcp` (design D9; issue "Safe to expose" §1): every request carries
 * `Authorization: Bearer <API key or JWT>` and gets a principal, except `server/discover`
 * (a client's first probe, answered without credentials). Anonymous access exists only where
 * configuration allows it (authenticator.ts).
 *
 *  - `onRequest`: authenticates before the body is read, whenever credentials are presented
 *    (a `server/discover` with a valid key is its principal's, counted against its limits); only
 *    a request whose `Mcp-Method` header says `server/discover` and that carries no valid
 *    credentials is let through unauthenticated (a wrong token on the probe is not a 401), and its body is then read under MAX_UNAUTHENTICATED_BODY_BYTES
 *    (body-parser.ts). A refusal is 401 (`WWW-Authenticate: Bearer resource_metadata=…`,
 *    `error="invalid_token"` when a token was presented), 403 (`insufficient_scope`) or 503
 *    (the issuer's keys cannot be fetched), with a JSON-RPC error body (challenge.ts);
 *  - `preHandler`: a request that skipped authentication must really be `server/discover`
 *    (the body says so); anything else is authenticated now.
 * 401s are counted per client address (`req.ip`: the proxy's `X-Forwarded-For` when the proxy
 * is trusted, TRUST_PROXY); past RATE_LIMIT_AUTH_FAILURES_PER_MIN a failure is answered 429 +
 * `Retry-After` instead (valid credentials from that address still pass). The `auth.refused`
 * log line names the client address.
 * The principal is on `req.principal` (`''` for an unauthenticated `server/discover`).
 * An outcome known at once (an API key matched a moment ago, anonymous access) is applied
 * synchronously: the hooks then return undefined and cost no promise (a poll's case).
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from '@mcp-tasks/observability';
import type { Authenticator } from './authenticator.js';
import { authRefusalReply } from './challenge.js';
import { sendRefusal, type LimitRefusal } from '../limits.js';

/** The caller of a request, set by authentication. */
declare module 'fastify' {
  interface FastifyRequest {
    principal: string;
  }
}

const DISCOVER = 'server/discover';

/**
 * Each hook returns undefined when it decided at once (the principal is set), else a promise
 * that resolves once it decided: true when it sent a refusal (the request goes no further: the
 * caller must not continue it, even while the refusal is still being written), false when not.
 */
export interface AuthHooks {
  onRequest: (req: FastifyRequest, reply: FastifyReply) => Promise<boolean> | undefined;
  preHandler: (req: FastifyRequest, reply: FastifyReply) => Promise<boolean> | undefined;
}

/** Counts a failed authentication of a client address; a refusal once over the limit. */
export type FailureThrottle = (req: FastifyRequest, clientAddress: string) => Promise<LimitRefusal | undefined>;

export function authHooks(
  authenticator: Authenticator,
  log: Logger,
  resourceMetadataUrl: string | undefined,
  throttle?: FailureThrottle,
): AuthHooks {
  const authenticate = (req: FastifyRequest, reply: FastifyReply, requestId: unknown) => {
    const known = authenticator.known(req.headers.authorization);
    if (known?.ok) {
      req.principal = known.principal;
      return undefined;
    }
    return decide(req, reply, requestId);
  };
  const decide = async (req: FastifyRequest, reply: FastifyReply, requestId: unknown): Promise<boolean> => {
    const out = await authenticator.authenticate(req.headers.authorization);
    if (out.ok) {
      req.principal = out.principal;
      return false;
    }
    if (out.status === 401 && throttle) {
      const refused = await throttle(req, req.ip);
      if (refused) {
        log.debug({ client: req.ip, status: 429 }, 'auth.throttled');
        sendRefusal(reply, requestId, refused);
        return true;
      }
    }
    log.info({ client: req.ip, status: out.status, error: out.error, reason: out.description }, 'auth.refused');
    const r = authRefusalReply(out, { ...(resourceMetadataUrl ? { resourceMetadataUrl } : {}), requestId });
    reply.code(r.status).headers(r.headers).send(r.body);
    return true;
  };
  return {
    onRequest(req, reply) {
      req.principal = '';
      if (req.headers['mcp-method'] !== DISCOVER) return authenticate(req, reply, null);
      if (req.headers.authorization === undefined || req.headers.authorization === '') return undefined;
      return discoverWithCredentials(req);
    },
    preHandler(req, reply) {
      if (req.principal) return undefined;
      const body = req.body as { method?: unknown; id?: unknown } | undefined;
      if (body && typeof body === 'object' && !Array.isArray(body) && body.method === DISCOVER) return undefined;
      return authenticate(req, reply, body && typeof body === 'object' ? (body.id ?? null) : null);
    },
  };

  /**
   * A discover with credentials is its principal's when they are valid; when they are not, it is
   * answered as one without credentials (principal '', the small body limit), not 401: the probe
   * reveals nothing, and a client told 401 on its probe reports the server as unreachable
   * ("Failed to connect") instead of asking for new credentials on the request that needs them.
   * Not counted as an authentication failure.
   */
  async function discoverWithCredentials(req: FastifyRequest): Promise<false> {
    const out = await authenticator.authenticate(req.headers.authorization);
    if (out.ok) req.principal = out.principal;
    return false;
  }
}
