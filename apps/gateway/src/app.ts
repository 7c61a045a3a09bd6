/**
 * The Fastify app: a few plugins, each registering only its own routes and hooks.
 *  - health: `GET /healthz` (liveness, no I/O), `GET /readyz` (Redis answers PING);
 *  - mcp: `POST /mcp` (and GET/DELETE → 405 by the SDK), handed to the SDK's
 *    `createMcpHandler` through `toNodeHandler` (sdk-notes §1.5). Two handlers share one
 *    server factory: a synchronous `tools/call` that runs on a worker goes to the one answering
 *    `text/event-stream` at once (D1, D6), everything else to the one that answers JSON unless
 *    the handler sends notifications. `subscriptions/listen` for `taskIds` is served by
 *    listen.ts (T-39), the rest of `subscriptions/listen` by the SDK.
 *
 * Every SSE response starts with a comment line the moment its headers are written, so a client
 * sees its first byte at once (Claude Code aborts a request with no byte in 60 s), and carries
 * `: keepalive` comments every SSE_KEEPALIVE_MS (H-22, B-10).
 */
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify';
import type { ServerResponse } from 'node:http';
import { createMcpHandler, SUPPORTED_PROTOCOL_VERSIONS, validateOriginHeader } from '@modelcontextprotocol/server';
import { toNodeHandler } from '@modelcontextprotocol/node';
import type { Redis } from 'ioredis';
import { createServerFactory, type Exchange, type GatewayDeps } from './mcp.js';
import { ErrorCode, jsonRpcErrorBody, TASKS_EXTENSION } from './errors.js';
import { createTaskListen } from './listen.js';

export type McpBody = {
  id?: unknown;
  method?: string;
  params?: { name?: string; arguments?: unknown; notifications?: { taskIds?: unknown }; inputResponses?: unknown; _meta?: Record<string, any> };
};

/** Protocol versions the SDK's stateless 2025 lane accepts in `MCP-Protocol-Version`. */
const LEGACY_VERSIONS = new Set<string>(SUPPORTED_PROTOCOL_VERSIONS);

/** A body without the 2026 per-request envelope is served on the 2025 lane (sdk-notes §1.4). */
const isLegacyBody = (b: McpBody) => typeof b.params?._meta?.['io.modelcontextprotocol/protocolVersion'] !== 'string';

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

export function buildApp(deps: AppDeps): FastifyInstance & { closeMcp(): Promise<void>; closeListens(): void; handOffSync(): void; startDrain(): void } {
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
  const factory = createServerFactory(deps);
  const handlerOptions = {
    legacy: 'stateless' as const,
    maxRequestBodySize: config.maxBodyBytes,
    keepAliveMs: config.sync.keepAliveMs,
    onerror: (e: Error) => log.debug({ err: e.message }, 'mcp.rejected'),
  };
  const adapterOptions = {
    maxRequestBodySize: config.maxBodyBytes,
    onerror: (e: Error) => log.error({ err: e }, 'mcp.adapter_error'),
  };
  const handler = createMcpHandler(factory, handlerOptions);
  const streamHandler = createMcpHandler(factory, { ...handlerOptions, responseMode: 'sse' });
  const mcp = toNodeHandler(handler, adapterOptions);
  const mcpStream = toNodeHandler(streamHandler, adapterOptions);
  const taskListen = createTaskListen(deps);

  /**
   * True for a 2026 `tools/call` that will be held open while a worker runs the tool (D1): the
   * tool runs on a worker, the request does not get a task (no extension, or a `forbidden`
   * tool), and nothing makes it an immediate error (`-32021` keeps its HTTP 400; bad arguments
   * keep their plain JSON answer).
   */
  const isSyncCall = (b: McpBody): boolean => {
    if (b.method !== 'tools/call' || isLegacyBody(b)) return false;
    const tool = registry.get(String(b.params?.name ?? ''));
    if (!tool || tool.runsIn === 'gateway') return false;
    const declares = declaresTasksIn(b);
    if (declares && tool.taskSupport !== 'forbidden') return false;
    if (!declares && tool.taskSupport === 'required') return false;
    const caps = (b.params?._meta?.['io.modelcontextprotocol/clientCapabilities'] ?? {}) as Record<string, unknown>;
    if (Object.keys(tool.requiresCapabilities ?? {}).some((k) => caps[k] === undefined)) return false;
    return tool.inputSchema.safeParse(b.params?.arguments ?? {}).success;
  };
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
        if (body?.method === 'subscriptions/listen' && listensToTasks(body) && !isLegacyBody(body)) {
          if (!declaresTasksIn(body)) {
            return reply.code(400).send(jsonRpcErrorBody(body.id, ErrorCode.MissingRequiredClientCapability,
              'Missing required client capability: notifications.taskIds needs the io.modelcontextprotocol/tasks extension declared on the request',
              { requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } } }));
          }
          return taskListen.serve(req, reply, body, 'anonymous');
        }
        // A known client bug (clients.md 5c): after negotiating an older revision, the client
        // sends a newer MCP-Protocol-Version header. On the 2025 lane the negotiated version is
        // what counts, so an unknown value there is dropped rather than refused with 400.
        const headerVersion = req.headers['mcp-protocol-version'];
        if (body && typeof body === 'object' && isLegacyBody(body) && typeof headerVersion === 'string' && !LEGACY_VERSIONS.has(headerVersion)) {
          log.debug({ headerVersion, method: body.method }, 'mcp.legacy_header_version_ignored');
          delete req.raw.headers['mcp-protocol-version'];
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
        primeSse(reply.raw);
        await (body && typeof body === 'object' && isSyncCall(body) ? mcpStream : mcp)(req.raw, reply.raw, req.body);
      },
    });
  });

  return Object.assign(app as unknown as FastifyInstance, {
    closeMcp: async () => {
      await Promise.allSettled([handler.close(), streamHandler.close()]);
    },
    closeListens: () => taskListen.closeAll(),
    handOffSync: () => factory.handOffAll(),
    startDrain: () => {
      draining = true;
    },
  });
}

/**
 * Makes an SSE response send its headers and a first comment line the moment they are written
 * (Node otherwise holds the headers until the first body chunk, which for a quiet tool can be
 * the keep-alive 15 s later). Applies to every `text/event-stream` response on this exchange.
 */
function primeSse(res: ServerResponse): void {
  const writeHead = res.writeHead;
  res.writeHead = function (this: ServerResponse, ...args: Parameters<ServerResponse['writeHead']>) {
    const out = writeHead.apply(this, args);
    const type = this.getHeader('content-type') ?? headerIn(args);
    if (typeof type === 'string' && type.startsWith('text/event-stream')) this.write(': stream open\n\n');
    return out;
  } as ServerResponse['writeHead'];
}

/** The content-type passed to `writeHead(status, headers)` as an object, if any. */
function headerIn(args: unknown[]): unknown {
  const h = args.find((a) => typeof a === 'object' && a !== null && !Array.isArray(a)) as Record<string, unknown> | undefined;
  if (!h) return undefined;
  const k = Object.keys(h).find((n) => n.toLowerCase() === 'content-type');
  return k ? h[k] : undefined;
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
