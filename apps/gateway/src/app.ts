/**
 * The Fastify app: a few plugins, each registering only its own routes and hooks.
 *  - health: `GET /healthz` (liveness, no I/O), `GET /readyz` (Redis answers PING);
 *  - mcp: `POST /mcp` (and GET/DELETE → 405 by the SDK), handed to the SDK's
 *    `createMcpHandler` through `toNodeHandler` (sdk-notes §1.5).
 */
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify';
import { createMcpHandler, validateOriginHeader } from '@modelcontextprotocol/server';
import { toNodeHandler } from '@modelcontextprotocol/node';
import type { Redis } from 'ioredis';
import { createServerFactory, type Exchange, type GatewayDeps } from './mcp.js';
import { ErrorCode, jsonRpcErrorBody, TASKS_EXTENSION } from './errors.js';

type McpBody = {
  id?: unknown;
  method?: string;
  params?: { name?: string; notifications?: { taskIds?: unknown }; inputResponses?: unknown; _meta?: Record<string, any> };
};

const listensToTasks = (b: McpBody) => b.params?.notifications?.taskIds !== undefined;
const declaresTasksIn = (b: McpBody) =>
  b.params?._meta?.['io.modelcontextprotocol/clientCapabilities']?.extensions?.[TASKS_EXTENSION] !== undefined;

export interface AppDeps extends GatewayDeps {
  redis: Redis;
  /** Connected and answering (a hung Redis is not healthy). */
  redisHealth: { readonly ok: boolean };
}

/** Methods whose handling needs Redis: answered 503 + Retry-After while it is unreachable (D10). */
const NEEDS_REDIS = new Set(['tasks/get', 'tasks/update', 'tasks/cancel']);

export function buildApp(deps: AppDeps): FastifyInstance & { closeMcp(): Promise<void>; startDrain(): void } {
  const { config, log, redis, registry, redisHealth } = deps;
  const app = Fastify({
    // Per-request access logs are off (level warn); the MCP handlers log task events.
    loggerInstance: log.child({ component: 'http' }, { level: 'warn' }),
    bodyLimit: config.maxBodyBytes,
    // Long SSE responses must never be cut by the server (B-10): no request/connection
    // timeout; keep-alive above common load balancer idle timeouts (60 s).
    requestTimeout: 0,
    connectionTimeout: 0,
    keepAliveTimeout: 72_000,
    // While closing, requests still read are served (in-flight work finishes); new
    // connections are refused by the closed listener.
    return503OnClosing: false,
    forceCloseConnections: 'idle',
  });

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

  // health plugin
  app.register(async (scope) => {
    scope.get('/healthz', async () => ({ status: 'ok' }));
    scope.get('/readyz', async (_req, reply) => {
      try {
        if (draining) throw new Error('draining');
        if (!redisHealth.ok) throw new Error(`redis ${redis.status === 'ready' ? 'not answering' : redis.status}`);
        await redis.ping();
        return { status: 'ready' };
      } catch (e) {
        return reply.code(503).header('retry-after', '5').send({ status: 'unavailable', reason: (e as Error).message });
      }
    });
  });

  // mcp plugin
  const handler = createMcpHandler(createServerFactory(deps), {
    legacy: 'stateless',
    maxRequestBodySize: config.maxBodyBytes,
    onerror: (e) => log.debug({ err: e.message }, 'mcp.rejected'),
  });
  const mcp = toNodeHandler(handler, {
    maxRequestBodySize: config.maxBodyBytes,
    onerror: (e) => log.error({ err: e }, 'mcp.adapter_error'),
  });
  app.register(async (scope) => {
    scope.route({
      method: ['POST', 'GET', 'DELETE'],
      url: '/mcp',
      // H-03: a present Origin that is not allowed → 403 (DNS rebinding defence).
      onRequest: async (req, reply) => {
        const origin = req.headers.origin;
        if (origin === undefined) return;
        const v = validateOriginHeader(origin, config.allowedOrigins);
        if (!v.ok) return reply.code(403).send(jsonRpcErrorBody(null, ErrorCode.InvalidRequest, `Forbidden: ${v.message}`));
      },
      handler: async (req: FastifyRequest, reply) => {
        const body = req.body as McpBody | undefined;
        if (jsonDepthExceeds(body, MAX_JSON_DEPTH)) {
          return reply.code(400).send(jsonRpcErrorBody(null, ErrorCode.InvalidRequest, `Request nested deeper than ${MAX_JSON_DEPTH} levels`));
        }
        if (body && typeof body === 'object' && needsRedis(body, registry) && !redisHealth.ok) {
          return reply
            .code(503)
            .header('retry-after', '5')
            .send(jsonRpcErrorBody(body.id, ErrorCode.InternalError, 'Task store unavailable; retry later'));
        }
        // T-49: asking for task notifications requires declaring the extension on the request.
        // (Task notifications themselves are not offered yet: the acknowledgement omits taskIds.)
        if (body?.method === 'subscriptions/listen' && listensToTasks(body) && !declaresTasksIn(body)) {
          return reply.code(400).send(jsonRpcErrorBody(body.id, ErrorCode.MissingRequiredClientCapability,
            'Missing required client capability: notifications.taskIds needs the io.modelcontextprotocol/tasks extension declared on the request',
            { requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } } }));
        }
        // Until authentication lands every caller is the `anonymous` principal (D9).
        const exchange: Exchange = { principal: 'anonymous', rawInputResponses: body?.params?.inputResponses };
        (req.raw as unknown as { auth: unknown }).auth = { token: '', clientId: 'anonymous', scopes: [], extra: { exchange } };
        reply.raw.once('close', () => {
          // D4: a client that vanished before the handle reached it cannot know the task.
          if (exchange.createdTaskId && !reply.raw.writableFinished) {
            log.info({ taskId: exchange.createdTaskId }, 'task.handle_undelivered');
            deps.store.requestCancel(exchange.createdTaskId, 'Cancelled: the task handle could not be delivered').catch(() => undefined);
          }
        });
        reply.hijack();
        await mcp(req.raw, reply.raw, req.body);
      },
    });
  });

  return Object.assign(app as unknown as FastifyInstance, {
    closeMcp: () => handler.close(),
    startDrain: () => {
      draining = true;
    },
  });
}

/** Deepest JSON nesting accepted; deeper bodies cannot be re-serialised by the SDK (stack). */
const MAX_JSON_DEPTH = 64;

/** True when `value` nests objects/arrays deeper than `max` (iterative: no recursion). */
function jsonDepthExceeds(value: unknown, max: number): boolean {
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length) {
    const [v, depth] = stack.pop()!;
    if (typeof v !== 'object' || v === null) continue;
    if (depth > max) return true;
    for (const child of Array.isArray(v) ? v : Object.values(v)) {
      if (typeof child === 'object' && child !== null) stack.push([child, depth + 1]);
    }
  }
  return false;
}

function needsRedis(body: McpBody, registry: GatewayDeps['registry']): boolean {
  if (!body.method) return false;
  if (NEEDS_REDIS.has(body.method)) return true;
  if (body.method === 'tools/call') {
    const tool = registry.get(String(body.params?.name ?? ''));
    return !!tool && tool.runsIn !== 'gateway';
  }
  return false;
}
