/**
 * The Fastify app of a gateway: a few parts, each registering only its own routes and hooks:
 *  - metrics.ts: `GET /metrics` (no credentials; unless disabled or on METRICS_PORT) and the
 *    observation of every `/mcp` exchange (metrics, spans);
 *  - health.ts: `GET /healthz`, `GET /readyz` (no credentials);
 *  - auth/metadata-route.ts: the RFC 9728 Protected Resource Metadata document at
 *    `/.well-known/oauth-protected-resource[/<path of PUBLIC_URL>]` (no credentials);
 *  - mcp-route.ts: `POST /mcp` (guards, authentication, limits, classification, lanes, the SDK
 *    handlers, task listen streams).
 * Body parse errors, oversized bodies and unsupported content types are answered here as
 * JSON-RPC errors (errors.ts table).
 */
import net from 'node:net';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { RedisClient } from '@mcp-tasks/jobs';
import { evictionGuard, type RedisHealth } from '@mcp-tasks/jobs';
import { SERVER_INFO, type Gateway, type GatewayDeps } from './context.js';
import { clientErrorHandler } from './client-errors.js';
import { BodyRefusedError, registerJsonBodyParser } from './body-parser.js';
import { registerBodyDrain } from './body-drain.js';
import { ErrorCode, jsonRpcErrorBody } from './errors.js';
import { registerHealth } from './health.js';
import { registerLimits } from './limits.js';
import { registerObservation } from './metrics.js';
import { createMcpRoute } from './mcp-route.js';
import type { Continuation } from './mrtr.js';
import { createAuthenticator } from './auth/authenticator.js';
import { watchApiKeysFile } from './auth/keys-file.js';
import { authHooks } from './auth/hooks.js';
import {
  metadataOptionsFromAuth,
  protectedResourceMetadataRoutes,
  protectedResourceMetadataUrl,
} from './auth/metadata-route.js';
import { createRequestStateRing } from './request-state.js';
import { SessionStore } from './sessions.js';

export interface AppDeps extends GatewayDeps {
  redis: RedisClient;
  /** Connected and answering (a hung Redis is not healthy). */
  redisHealth: RedisHealth;
}

export type GatewayApp = FastifyInstance & {
  /** Aborts every in-flight MCP exchange (last step of shutdown). */
  closeMcp(): Promise<void>;
  /** Ends every task listen stream with its final result. */
  closeListens(): void;
  /** Ends every synchronous call still running with the hand-off result (its work goes on). */
  handOffSync(): void;
  /** Readiness fails and responses carry `Connection: close` from now on. */
  startDrain(): void;
  /**
   * Closes the listener only: new connections are refused, while idle keep-alive connections
   * stay open (a request arriving on one is served, with `Connection: close`). `close()` later
   * closes the idle ones and waits for the rest, as usual.
   */
  stopAccepting(): void;
  /**
   * Resolves once no request has arrived for `ms` since the later of the last request and this
   * call: the proxy in front has stopped sending here (see shutdown.ts).
   */
  quietFor(ms: number): Promise<void>;
};

export async function buildApp(deps: AppDeps): Promise<GatewayApp> {
  const { config, log, redis, redisHealth } = deps;
  const app = createFastify(config, log);

  // Draining (SIGTERM): readiness fails so the load balancer stops sending, and every
  // response asks the client to reconnect elsewhere, before the listener closes.
  const drain = drainControls(app);

  // Bodies: limits checked while reading (body-parser.ts); a refused or unread body is read to
  // its end before the answer, so a proxy never sees the gateway break a request (body-drain.ts).
  registerJsonBodyParser(app, {
    maxBodyBytes: config.maxBodyBytes,
    maxUnauthenticatedBodyBytes: config.limits.maxUnauthenticatedBodyBytes,
    maxJsonKeys: config.limits.maxJsonKeys,
  });
  registerBodyDrain(app, {
    maxBodyBytes: config.maxBodyBytes,
    bodyReadTimeoutMs: config.limits.bodyReadTimeoutMs,
    closing: drain.draining,
  });

  app.setErrorHandler(jsonRpcErrorHandler(config.maxBodyBytes, log));

  // METRICS_ENABLED=false: no route and no per-request hooks (nothing would read them).
  registerObservation(app, {
    ...(config.metrics.enabled && deps.metrics ? { metrics: deps.metrics } : {}),
    serveMetrics: config.metrics.enabled && !config.metrics.listen,
    ...(deps.tracer ? { tracer: deps.tracer } : {}),
  });
  registerHealth(app, {
    redis,
    redisHealth,
    draining: drain.draining,
    eviction: evictionGuard(redis),
    ...(deps.presence ? { workersAlive: () => deps.presence!.count() } : {}),
  });
  const metadata = metadataOptionsFromAuth(config.auth, SERVER_INFO.name);
  if (metadata) await app.register(protectedResourceMetadataRoutes, metadata);

  const shutdown = new AbortController();
  // Continuations expire by Redis time, like the tasks (case N-11): `store.clock`.
  const codec = createRequestStateRing<Continuation>({
    keys: config.requestState.keys,
    ttlSeconds: config.requestState.ttlSeconds,
    now: () => deps.store.clock.now(),
  });
  const sessions = new SessionStore(
    deps.store.redis,
    config.keyPrefix,
    config.sessions.idleTimeoutMs,
    deps.store.clock,
  );
  const gw: Gateway = { ...deps, codec, sessions, shutdown: shutdown.signal };
  const limits = await registerLimits(app, redis, config);
  const auth = await authentication(app, config, log, limits.authFailure);
  const mcp = createMcpRoute(gw, redisHealth, limits, auth);
  mcp.register(app);

  return Object.assign(app, {
    closeMcp: () => mcp.close(),
    closeListens: () => mcp.closeListens(),
    handOffSync: () => {
      if (!shutdown.signal.aborted) log.info('sync.hand_off_all');
      shutdown.abort();
    },
    startDrain: drain.start,
    stopAccepting: drain.stopAccepting,
    quietFor: drain.quietFor,
  });
}

/**
 * The drain switches of a gateway (shutdown.ts): `draining()` is read by readiness and the body
 * drain; once `start()`ed every response carries `Connection: close` and the time of the last
 * request is kept for `quietFor(ms)`; `stopAccepting()` closes the listener only.
 */
function drainControls(app: FastifyInstance) {
  let draining = false;
  let lastRequestAt = 0;
  // A callback hook, not an async one: no promise per request.
  app.addHook('onRequest', (_req, reply, done) => {
    if (draining) {
      reply.header('connection', 'close');
      lastRequestAt = Date.now();
    }
    done();
  });
  return {
    draining: () => draining,
    start: () => {
      draining = true;
    },
    stopAccepting: () => {
      // http.Server#close would also close the idle keep-alive connections at once (Node >= 19);
      // net.Server#close stops the listener only. Fastify's close() later calls http.Server#close,
      // which then reports ERR_SERVER_NOT_RUNNING once every connection ended (Fastify ignores it).
      if (app.server.listening) net.Server.prototype.close.call(app.server);
    },
    quietFor: (ms: number) => {
      const since = Date.now();
      return new Promise<void>((resolve) => {
        const check = () => {
          const idleMs = Date.now() - Math.max(lastRequestAt, since);
          if (idleMs >= ms) resolve();
          else setTimeout(check, ms - idleMs).unref();
        };
        check();
      });
    },
  };
}

/** How long a connection may stay idle, after a response or before its first request (ms). */
const KEEP_ALIVE_TIMEOUT_MS = 72_000;

/**
 * The Fastify instance with the gateway's server options: body limit, proxies (TRUST_PROXY),
 * request read timeout (BODY_READ_TIMEOUT_MS, 408), keep-alive, and how a closing server treats
 * requests still being read.
 */
function createFastify(config: AppDeps['config'], log: AppDeps['log']): FastifyInstance {
  return Fastify({
    // Per-request access logs are off (level warn); the MCP handlers log task events.
    loggerInstance: log.child({ component: 'http' }, { level: 'warn' }),
    bodyLimit: config.maxBodyBytes,
    // `req.ip` is the client named by X-Forwarded-For only when the TCP peer is a configured
    // proxy (TRUST_PROXY; none by default): per-address limits and logs cannot be spoofed.
    trustProxy: config.trustProxy.length ? config.trustProxy : false,
    // A request (headers and body) must arrive within BODY_READ_TIMEOUT_MS (slow clients are cut
    // with 408, checked every second). Node applies it to receiving the request only: long SSE
    // responses are never cut by the server (case B-10); no idle-socket timeout either; keep-alive
    // above common load balancer idle timeouts (60 s).
    requestTimeout: config.limits.bodyReadTimeoutMs,
    http: { headersTimeout: Math.min(60_000, config.limits.bodyReadTimeoutMs), connectionsCheckingInterval: 1000 },
    connectionTimeout: 0,
    keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
    // While closing, requests still read are served (in-flight work finishes); new
    // connections are refused by the closed listener. A connection that has sent nothing yet
    // is idle, not slow: it is kept as long as an idle keep-alive connection (client-errors.ts).
    clientErrorHandler: clientErrorHandler(config.limits.bodyReadTimeoutMs, KEEP_ALIVE_TIMEOUT_MS),
    return503OnClosing: false,
    forceCloseConnections: 'idle',
  }) as unknown as FastifyInstance;
}

/**
 * Body parse errors, oversized bodies and unsupported content types as JSON-RPC errors, per the
 * error table (errors.ts): 400 `-32700`, 413 and 415 `-32600`, a `BodyRefusedError` as it says; any
 * other error is logged and answered 500 `-32603` (no detail).
 */
function jsonRpcErrorHandler(maxBodyBytes: number, log: AppDeps['log']) {
  return (err: Error & { statusCode?: number; code?: string }, _req: FastifyRequest, reply: FastifyReply) => {
    if (err instanceof BodyRefusedError)
      return reply.code(err.statusCode).send(jsonRpcErrorBody(null, err.rpcCode, err.message));
    if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE' || err.statusCode === 413) {
      return reply
        .code(413)
        .send(jsonRpcErrorBody(null, ErrorCode.InvalidRequest, `Request body larger than ${maxBodyBytes} bytes`));
    }
    if (err.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE' || err.statusCode === 415) {
      return reply
        .code(415)
        .send(jsonRpcErrorBody(null, ErrorCode.InvalidRequest, 'Content-Type must be application/json'));
    }
    if (err.statusCode === 400) {
      return reply.code(400).send(jsonRpcErrorBody(null, ErrorCode.ParseError, `Parse error: ${err.message}`));
    }
    log.error({ err }, 'http.error');
    return reply.code(500).send(jsonRpcErrorBody(null, ErrorCode.InternalError, 'Internal error'));
  };
}

/**
 * The authenticator (API keys, JWT) and its request hooks; AUTH_API_KEYS_FILE is watched, so
 * people are added or revoked without a restart (auth/keys-file.ts).
 */
async function authentication(
  app: FastifyInstance,
  config: AppDeps['config'],
  log: AppDeps['log'],
  authFailure: Awaited<ReturnType<typeof registerLimits>>['authFailure'],
) {
  const authenticator = await createAuthenticator(config.auth);
  const keysFile = config.auth.apiKeysFile;
  if (keysFile) {
    const watch = watchApiKeysFile({
      ...keysFile,
      fixed: config.auth.fixedApiKeys,
      rules: {
        production: config.env === 'production',
        ...(config.admin ? { adminDigests: config.admin.apiKeys.map((k) => k.digest) } : {}),
      },
      onKeys: (keys) => authenticator.setApiKeys(keys),
      log,
    });
    await watch.check();
    app.addHook('onClose', async () => watch.stop());
  }
  return authHooks(
    authenticator,
    log,
    config.auth.publicUrl ? protectedResourceMetadataUrl(config.auth.publicUrl) : undefined,
    authFailure,
  );
}
