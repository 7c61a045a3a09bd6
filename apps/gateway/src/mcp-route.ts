/**
 * `POST /mcp` (and GET/DELETE, which the SDK answers 405): the one route of the MCP endpoint.
 *
 *   onRequest:  Origin, Host, Content-Type (request-guards.ts: 403 / 400 / 415) →
 *               authentication (auth/hooks.ts: 401 / 403; principal)
 *   preHandler: authentication of a body that is not what its header said → the
 *               per-principal request rate (limits.ts: 429; a `tasks/get` counted in this
 *               process, a `tools/call` in the handler once classified)
 *   handler:    body depth (400) → classify once (classify.ts) → for a `tools/call` that
 *               starts no work, the request rate (429) → 503 while Redis is away for
 *               methods that need it (D10) → for a call that starts work, the creation rate
 *               (instead of the request rate) and a slot among the principal's unfinished
 *               tasks, together (429) → the lane:
 *                - `subscriptions/listen` for `taskIds` → listen.ts (T-39, T-49);
 *                - `tasks/get|update|cancel`, and a `tools/call` that becomes a task, of the
 *                  usual shapes → hot-path.ts, without the SDK's per-request server (D8);
 *                - a 2026 `tools/call` held open while a worker runs it (lane `sync`) → the SDK
 *                  handler that answers `text/event-stream` at once (D1, D6);
 *                - everything else → the SDK handler answering JSON unless it streams
 *                  notifications (sdk-notes §1.5), which builds a fresh `Server` per request
 *                  (server-factory.ts).
 * The classification and the principal travel to the handlers in `authInfo.extra.exchange`.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { createMcpHandler, SUPPORTED_PROTOCOL_VERSIONS } from '@modelcontextprotocol/server';
import type { RedisHealth } from '@mcp-tasks/jobs';
import { newTaskId } from '@mcp-tasks/task-store';
import { classify, toolNeedsRedis, type Classification, type McpBody } from './classify.js';
import type { Exchange, Gateway } from './context.js';
import type { AuthHooks } from './auth/hooks.js';
import { echoableId, ErrorCode, jsonRpcErrorBody, TASKS_EXTENSION } from './errors.js';
import { sendRefusal, type Limits } from './limits.js';
import { createTaskListen } from './listen.js';
import { serveHot, servesHot } from './hot-path.js';
import { requestGuards } from './request-guards.js';
import { createServerFactory } from './server-factory.js';
import { serveThrough } from './sse.js';
import { requestSpan } from './tracing.js';

/** Protocol versions the SDK's stateless 2025 lane accepts in `MCP-Protocol-Version`. */
const LEGACY_VERSIONS = new Set<string>(SUPPORTED_PROTOCOL_VERSIONS);

/** Deepest JSON nesting accepted; deeper bodies cannot be re-serialised by the SDK (stack). */
const MAX_JSON_DEPTH = 64;

/** Methods whose handling needs Redis: answered 503 + Retry-After while it is unreachable (D10). */
const NEEDS_REDIS = new Set(['tasks/get', 'tasks/update', 'tasks/cancel']);

export interface McpRoute {
  /** Registers `/mcp` on `app`. */
  register(app: FastifyInstance): void;
  /** Aborts every in-flight SDK exchange (last step of shutdown). */
  close(): Promise<void>;
  /** Ends every task listen stream with its final result (shutdown). */
  closeListens(): void;
}

export function createMcpRoute(gw: Gateway, redisHealth: RedisHealth, limits: Limits, auth: AuthHooks): McpRoute {
  const { config, log } = gw;
  const factory = createServerFactory(gw);
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
  const taskListen = createTaskListen(gw);

  const needsRedis = (c: Classification) => (c.method !== undefined && NEEDS_REDIS.has(c.method)) || toolNeedsRedis(c);

  return {
    register(app) {
      if (!app.hasRequestDecorator('principal')) app.decorateRequest('principal', '');
      app.route({
        method: ['POST', 'GET', 'DELETE'],
        url: '/mcp',
        onRequest: [requestGuards(config), auth.onRequest],
        preHandler: [
          auth.preHandler,
          async (req, reply) => {
            // A tools/call is counted once classified (a call that starts work counts against the
            // creation rate only); a poll in this process (limits.ts); an unauthenticated
            // server/discover against its address.
            const method = (req.body as McpBody | undefined)?.method;
            if (method === 'tools/call' && req.principal) return undefined;
            const refused = method === 'tasks/get' && req.principal ? await limits.poll(req, req.principal) : await limits.request(req, req.principal || `ip:${req.ip}`);
            if (refused) return sendRefusal(reply, echoableId(req.body), refused);
          },
        ],
        handler: async (req: FastifyRequest, reply) => {
          const body = req.body as McpBody | undefined;
          if (jsonDepthExceeds(body, MAX_JSON_DEPTH)) {
            return reply.code(400).send(jsonRpcErrorBody(null, ErrorCode.InvalidRequest, `Request nested deeper than ${MAX_JSON_DEPTH} levels`));
          }
          // One message per POST (H-07): a batch would run every element past the per-request
          // limits, so it is refused as a whole (N-07).
          if (Array.isArray(body)) {
            return reply.code(400).send(jsonRpcErrorBody(null, ErrorCode.InvalidRequest, 'Invalid Request: batches are not supported; send one JSON-RPC message per request'));
          }
          // B-01: an id is a string or an integer; `null`, fractions, booleans and objects are
          // refused before anything runs (a `null` id is not a notification, N-07).
          if (body && typeof body === 'object' && 'id' in body && !(typeof body.id === 'string' || Number.isSafeInteger(body.id))) {
            return reply.code(400).send(jsonRpcErrorBody(null, ErrorCode.InvalidRequest, 'Invalid Request: id must be a string or an integer'));
          }
          const c = classify(body, gw.registry, {
            maxArgumentsBytes: config.limits.maxArgumentsBytes,
            bodyBytes: Number(req.headers['content-length']) || undefined,
            http: { method: req.method, headers: req.headers },
          });
          if (log.isLevelEnabled('debug')) log.debug({ method: c.method, id: c.id, lane: c.lane, principal: req.principal, headers: req.headers }, 'mcp.request');
          const principal = req.principal;
          // A call that starts work on a worker counts against the creation rate (below), not
          // the request rate; any other tools/call against the request rate, here.
          const startsWork = (c.lane === 'task' || c.lane === 'sync') && !c.continues && !c.rejected;
          if (c.method === 'tools/call' && !startsWork) {
            const refused = await limits.request(req, principal);
            if (refused) return sendRefusal(reply, echoableId(body), refused);
          }
          // The validation ladder's verdict (classify.ts): the `_meta` envelope (B-05), the
          // version (H-11, H-12), the standard headers and the `Mcp-Param-*` headers (H-15,
          // H-17), answered before anything is counted, reserved or run.
          if (c.rejected) {
            log.debug({ cell: c.rejected.cell, method: c.method }, 'mcp.rejected');
            return reply.code(c.rejected.httpStatus).send(jsonRpcErrorBody(echoableId(body), c.rejected.code, c.rejected.message, c.rejected.data));
          }
          if (needsRedis(c) && !redisHealth.ok) {
            return reply.code(503).header('retry-after', '5').send(jsonRpcErrorBody(c.id, ErrorCode.InternalError, 'Task store unavailable; retry later'));
          }
          // A call that starts work on a worker counts against the creation rate (not a retry
          // continuing earlier work, and not a request the SDK's ladder refuses).
          // It also takes a slot among the principal's unfinished tasks (MAX_OUTSTANDING_TASKS),
          // reserved here so a full principal gets 429 before anything runs. The two are
          // independent, so they go to Redis together (one round trip, issue 8 §3); a slot
          // reserved for a call the rate refuses is given back at once.
          let reservation: Exchange['reservation'];
          if (startsWork) {
            const taskId = newTaskId();
            const now = gw.store.clock.now();
            const max = config.maxOutstandingTasks;
            const [refused, r] = await Promise.all([
              limits.creation(req, principal),
              // A refused write (Redis full under noeviction: OOM, case B-15) or an unreachable
              // Redis: 503 below, nothing written (the script runs whole or not at all). The
              // Redis error goes to the log only.
              gw.store.reserveOutstanding(principal, taskId, max, now + config.task.ttlMs, now).catch((e: Error) => {
                log.error({ err: e.message, tool: c.tool?.name }, 'task.reserve_failed');
                return undefined;
              }),
            ]);
            if (refused) {
              if (r?.ok) gw.store.releaseOutstanding(principal, taskId).catch(() => undefined);
              return sendRefusal(reply, c.id, refused);
            }
            if (!r) return reply.code(503).header('retry-after', '5').send(jsonRpcErrorBody(c.id, ErrorCode.InternalError, 'Task store unavailable; retry later'));
            if (!r.ok) return sendRefusal(reply, c.id, { limit: 'outstanding_tasks', max, retryAfterS: Math.max(1, Math.ceil(config.task.pollIntervalMs / 1000)) });
            reservation = { taskId, priority: r.count, used: false };
          }
          // T-49: asking for task notifications requires declaring the extension on the request.
          if (c.listensToTasks && c.era === 'modern') {
            if (!c.declaresTasks) {
              return reply.code(400).send(
                jsonRpcErrorBody(
                  c.id,
                  ErrorCode.MissingRequiredClientCapability,
                  'Missing required client capability: notifications.taskIds needs the io.modelcontextprotocol/tasks extension declared on the request',
                  { requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } } },
                ),
              );
            }
            return taskListen.serve(req, reply, body!, principal, c);
          }
          // A known client bug (clients.md 5c): after negotiating an older revision, the client
          // sends a newer MCP-Protocol-Version header. On the 2025 lane the negotiated version is
          // what counts, so an unknown pre-2026 value there is dropped rather than refused with
          // 400. A header naming a 2026 (or later) revision on a body without the `_meta`
          // envelope never gets here: the ladder refused it above (-32602, HTTP 400, B-05).
          const headerVersion = req.headers['mcp-protocol-version'];
          if (body && typeof body === 'object' && c.era === 'legacy' && typeof headerVersion === 'string' && !LEGACY_VERSIONS.has(headerVersion)) {
            log.debug({ headerVersion, method: c.method }, 'mcp.legacy_header_version_ignored');
            delete req.raw.headers['mcp-protocol-version'];
          }
          const span = requestSpan(req.raw);
          const exchange: Exchange = { principal, classification: c, rawInputResponses: body?.params?.inputResponses, ...(reservation ? { reservation } : {}), ...(span ? { span } : {}) };
          reply.raw.once('close', () => {
            // A slot reserved for a task this request did not create (an error, a pre-task
            // question) is given back.
            const r = exchange.reservation;
            if (r && !r.used) gw.store.releaseOutstanding(principal, r.taskId).catch(() => undefined);
            // D4: a client that vanished before the handle reached it cannot know the task.
            const id = exchange.createdTaskId;
            if (id && !reply.raw.writableFinished) {
              log.info({ taskId: id }, 'task.handle_undelivered');
              gw.store
                .requestCancel(id, 'Cancelled: the task handle could not be delivered')
                .then((o) => (o.code === 'cancelled' ? gw.store.releaseOutstanding(principal, id) : undefined))
                .catch(() => undefined);
            }
          });
          // tasks/get|update|cancel and a tools/call that becomes a task, of the usual shapes:
          // answered without the SDK's per-request server, with the same validation and the same
          // bytes (hot-path.ts, D8).
          if (config.hotPath && servesHot(c, body!)) return serveHot(gw, c, body!, exchange, reply);
          const authInfo = { token: '', clientId: principal, scopes: [], extra: { exchange } };
          reply.hijack();
          const held = c.era === 'modern' && c.lane === 'sync';
          await serveThrough(held ? streamHandler : handler, req.raw, reply.raw, req.body, authInfo, { ...adapterOptions, headers: reply.getHeaders() });
        },
      });
    },
    close: async () => {
      await Promise.allSettled([handler.close(), streamHandler.close()]);
    },
    closeListens: () => taskListen.closeAll(),
  };
}

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
