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
import Fastify, { type FastifyInstance } from 'fastify';
import type { RedisClient } from '@mcp-tasks/jobs';
import { evictionGuard, type RedisHealth } from '@mcp-tasks/jobs';
import type { Gateway, GatewayDeps } from './context.js';
import { clientErrorHandler } from './client-errors.js';
import { ErrorCode, jsonRpcErrorBody } from './errors.js';
import { registerHealth } from './health.js';
import { registerLimits } from './limits.js';
import { registerObservation } from './metrics.js';
import { createMcpRoute } from './mcp-route.js';
import type { Continuation } from './mrtr.js';
import { createAuthenticator } from './auth/authenticator.js';
import { authHooks } from './auth/hooks.js';
import { metadataOptionsFromAuth, protectedResourceMetadataRoutes, protectedResourceMetadataUrl } from './auth/metadata-route.js';
import { createRequestStateRing } from './request-state.js';

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
};

export async function buildApp(deps: AppDeps): Promise<GatewayApp> {
  const { config, log, redis, redisHealth } = deps;
  const app = Fastify({
    // Per-request access logs are off (level warn); the MCP handlers log task events.
    loggerInstance: log.child({ component: 'http' }, { level: 'warn' }),
    bodyLimit: config.maxBodyBytes,
    // A request (headers and body) must arrive within BODY_READ_TIMEOUT_MS (slow clients are cut
    // with 408, checked every second). Node applies it to receiving the request only: long SSE
    // responses are never cut by the server (case B-10); no idle-socket timeout either; keep-alive
    // above common load balancer idle timeouts (60 s).
    requestTimeout: config.limits.bodyReadTimeoutMs,
    http: { headersTimeout: Math.min(60_000, config.limits.bodyReadTimeoutMs), connectionsCheckingInterval: 1000 },
    connectionTimeout: 0,
    keepAliveTimeout: 72_000,
    // While closing, requests still read are served (in-flight work finishes); new
    // connections are refused by the closed listener.
    clientErrorHandler: clientErrorHandler(config.limits.bodyReadTimeoutMs),
    return503OnClosing: false,
    forceCloseConnections: 'idle',
  }) as unknown as FastifyInstance;

  // Draining (SIGTERM): readiness fails so the load balancer stops sending, and every
  // response asks the client to reconnect elsewhere, before the listener closes.
  let draining = false;
  app.addHook('onRequest', async (_req, reply) => {
    if (draining) reply.header('connection', 'close');
  });

  // Body parse errors and oversized bodies as JSON-RPC errors, per the error table.
  app.setErrorHandler((err: Error & { statusCode?: number; code?: string }, _req, reply) => {
    if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE' || err.statusCode === 413) {
      return reply.code(413).send(jsonRpcErrorBody(null, ErrorCode.InvalidRequest, `Request body larger than ${config.maxBodyBytes} bytes`));
    }
    if (err.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE' || err.statusCode === 415) {
      return reply.code(415).send(jsonRpcErrorBody(null, ErrorCode.InvalidRequest, 'Content-Type must be application/json'));
    }
    if (err.statusCode === 400) {
      return reply.code(400).send(jsonRpcErrorBody(null, ErrorCode.ParseError, `Parse error: ${err.message}`));
    }
    log.error({ err }, 'http.error');
    return reply.code(500).send(jsonRpcErrorBody(null, ErrorCode.InternalError, 'Internal error'));
  });

  // METRICS_ENABLED=false: no route and no per-request hooks (nothing would read them).
  registerObservation(app, {
    ...(config.metrics.enabled && deps.metrics ? { metrics: deps.metrics } : {}),
    serveMetrics: config.metrics.enabled && !config.metrics.listen,
    ...(deps.tracer ? { tracer: deps.tracer } : {}),
  });
  registerHealth(app, {
    redis,
    redisHealth,
    draining: () => draining,
    eviction: evictionGuard(redis),
    ...(deps.presence ? { workersAlive: () => deps.presence!.count() } : {}),
  });
  const metadata = metadataOptionsFromAuth(config.auth, 'mcp-task-service');
  if (metadata) await app.register(protectedResourceMetadataRoutes, metadata);

  const shutdown = new AbortController();
  // Continuations expire by Redis time, like the tasks (case N-11): `store.clock`.
  const codec = createRequestStateRing<Continuation>({ keys: config.requestState.keys, ttlSeconds: config.requestState.ttlSeconds, now: () => deps.store.clock.now() });
  const gw: Gateway = { ...deps, codec, shutdown: shutdown.signal };
  const limits = await registerLimits(app, redis, config);
  const auth = authHooks(await createAuthenticator(config.auth), log, config.auth.publicUrl ? protectedResourceMetadataUrl(config.auth.publicUrl) : undefined);
  const mcp = createMcpRoute(gw, redisHealth, limits, auth);
  mcp.register(app);

  return Object.assign(app, {
    closeMcp: () => mcp.close(),
    closeListens: () => mcp.closeListens(),
    handOffSync: () => {
      if (!shutdown.signal.aborted) log.info('sync.hand_off_all');
      shutdown.abort();
    },
    startDrain: () => {
      draining = true;
    },
  });
}
