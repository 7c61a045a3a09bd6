/**
 * `POST /mcp` (and GET/DELETE, which the SDK answers 405): the one route of the MCP endpoint.
 *
 *   onRequest:  Origin, Host, Content-Type (request-guards.ts: 403 / 400 / 415) →
 *               authentication (auth/hooks.ts: 401 / 403; principal)
 *   preHandler: authentication of a body that is not what its header said → the
 *               per-principal request rate (limits.ts: 429; a `tasks/get` counted in this
 *               process, a `tools/call` in the handler once classified)
 *   (body:      read and parsed within its limits: body-parser.ts, 400 / 413)
 *   handler:    classify once (classify.ts) → for a `tools/call` that
 *               starts no work, the request rate (429) → 503 while Redis is away for
 *               methods that need it (D10) → a malformed `Idempotency-Key` (400) → for a call
 *               that starts work, the creation rate (instead of the request rate) and a slot
 *               among the principal's unfinished tasks, together (429) — with an
 *               `Idempotency-Key`, first the task it names (idempotency.ts: a replay counts as
 *               a request; another call's key is 422) → the lane:
 *                - `subscriptions/listen` for `taskIds` → listen.ts (T-39, T-49);
 *                - `tasks/get|update|cancel`, and a `tools/call` that becomes a task, of the
 *                  usual shapes → hot-path.ts, without the SDK's per-request server (D8);
 *                - a 2026 `tools/call` held open while a worker runs it (lane `sync`) → the SDK
 *                  handler that answers `text/event-stream` at once (D1, D6);
 *                - everything else → the SDK handler answering JSON unless it streams
 *                  notifications (through `@modelcontextprotocol/node`'s `toNodeHandler`), which
 *                  builds a fresh `Server` per request (server-factory.ts).
 * The classification and the principal travel to the handlers in `authInfo.extra.exchange`.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { createMcpHandler, SUPPORTED_PROTOCOL_VERSIONS } from '@modelcontextprotocol/server';
import type { RedisHealth } from '@mcp-tasks/jobs';
import { classify, eraOf, toolNeedsRedis, type Classification, type McpBody } from './classify.js';
import type { Exchange, Gateway } from './context.js';
import type { AuthHooks } from './auth/hooks.js';
import { echoableId, ErrorCode, isStoreError, jsonRpcErrorBody, TASKS_EXTENSION } from './errors.js';
import { replyStoreUnavailable } from './store-unavailable-reply.js';
import { fillMissingMcpName, logRefusal } from './header-refusals.js';
import { legacyCallCapabilities } from './legacy-ask.js';
import { sessionStep } from './legacy-session.js';
import { serveLegacyTaskResult } from './legacy-task-result.js';
import {
  becomesLegacyTask,
  createLegacyTask,
  LEGACY_TASK_METHODS,
  serveLegacyTaskMethod,
  sessionHasTasks,
} from './legacy-tasks.js';
import type { Session } from './sessions.js';
import { withoutHandleContent } from './task-handle.js';
import { sendRefusal, type Limits } from './limits.js';
import { badKeyMessage, IDEMPOTENCY_KEY_HEADER, parseIdempotencyKey, resolveIdempotent } from './idempotency.js';
import { createTaskListen } from './listen.js';
import { serveHot, servesHot } from './hot-path.js';
import { canCreateInOneScript, takeCreationSlot, undoSlot } from './creation-slot.js';
import { requestGuards } from './request-guards.js';
import { createServerFactory } from './server-factory.js';
import { serveThrough } from './sse.js';
import { requestSpan } from './tracing.js';

/** Protocol versions the SDK's stateless 2025 lane accepts in `MCP-Protocol-Version`. */
const LEGACY_VERSIONS = new Set<string>(SUPPORTED_PROTOCOL_VERSIONS);

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

  const guards = requestGuards(config);
  const needsRedis = (c: Classification) => (c.method !== undefined && NEEDS_REDIS.has(c.method)) || toolNeedsRedis(c);

  return {
    register(app) {
      if (!app.hasRequestDecorator('principal')) app.decorateRequest('principal', '');
      app.route({
        method: ['POST', 'GET', 'DELETE'],
        url: '/mcp',
        // One hook per phase (each extra async hook costs a promise and a turn per request).
        onRequest: async (req, reply) => (await guards(req, reply)) ?? auth.onRequest(req, reply),
        preHandler: async (req, reply) => {
          const authRefused = await auth.preHandler(req, reply);
          if (authRefused !== undefined) return authRefused;
          // A tools/call is counted once classified (a call that starts work counts against the
          // creation rate only); a poll in this process (limits.ts); an unauthenticated
          // server/discover against its address.
          const method = (req.body as McpBody | undefined)?.method;
          if (method === 'tools/call' && req.principal) return undefined;
          const refused =
            method === 'tasks/get' && req.principal
              ? await limits.poll(req, req.principal)
              : await limits.request(req, req.principal || `ip:${req.ip}`);
          if (refused) return sendRefusal(reply, echoableId(req.body), refused);
        },
        handler: async (req: FastifyRequest, reply) => {
          // Nesting and key count were bounded while the body was parsed (body-parser.ts).
          const body = req.body as McpBody | undefined;
          // One message per POST (H-07): a batch would run every element past the per-request
          // limits, so it is refused as a whole (N-07).
          if (Array.isArray(body)) {
            return reply
              .code(400)
              .send(
                jsonRpcErrorBody(
                  null,
                  ErrorCode.InvalidRequest,
                  'Invalid Request: batches are not supported; send one JSON-RPC message per request',
                ),
              );
          }
          // B-01: an id is a string or an integer; `null`, fractions, booleans and objects are
          // refused before anything runs (a `null` id is not a notification, N-07).
          if (
            body &&
            typeof body === 'object' &&
            'id' in body &&
            !(typeof body.id === 'string' || Number.isSafeInteger(body.id))
          ) {
            return reply
              .code(400)
              .send(
                jsonRpcErrorBody(null, ErrorCode.InvalidRequest, 'Invalid Request: id must be a string or an integer'),
              );
          }
          const principal = req.principal;
          // 2025-era sessions (legacy-session.ts): opened at initialize, resolved for the
          // principal (404 when unknown or someone else's), ended by DELETE; a client's answer to
          // our question and its notifications/cancelled are handled here. A 2026 request's
          // Mcp-Session-Id is ignored (LG-06).
          let session: Session | undefined;
          let offersLegacyTasks = false;
          if (req.method === 'DELETE' || (body && typeof body === 'object' && eraOf(body) === 'legacy')) {
            try {
              const step = await sessionStep(gw, req, reply, body, principal);
              if (step.answered) return reply;
              session = step.session;
              offersLegacyTasks = sessionHasTasks(step.opened);
            } catch (e) {
              if (!isStoreError(e)) throw e;
              log.warn({ err: (e as Error).message }, 'session.store_unavailable');
              return replyStoreUnavailable(reply, echoableId(body));
            }
          }
          // 2025-11-25 tasks of a session that declared them (legacy-tasks.ts, LG-11..LG-14).
          if (sessionHasTasks(session) && typeof body?.method === 'string' && LEGACY_TASK_METHODS.has(body.method)) {
            return body.method === 'tasks/result'
              ? serveLegacyTaskResult(gw, session, body, reply)
              : serveLegacyTaskMethod(gw, principal, body, reply);
          }
          // ACCEPT_MISSING_MCP_NAME: a tasks/get|update|cancel without Mcp-Name gets the header
          // its body implies, before either validator (ours, the SDK's) sees it; a mismatching
          // header is never touched, so it is still refused (H-15).
          if (config.acceptMissingMcpName) fillMissingMcpName(req, body, log);
          const c = classify(body, gw.registry, {
            maxArgumentsBytes: config.limits.maxArgumentsBytes,
            bodyBytes: Number(req.headers['content-length']) || undefined,
            http: { method: req.method, headers: req.headers },
            legacyCaps: legacyCallCapabilities(session),
          });
          if (log.isLevelEnabled('debug'))
            log.debug(
              { method: c.method, id: c.id, lane: c.lane, principal: req.principal, headers: req.headers },
              'mcp.request',
            );
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
            logRefusal(log, c, body, principal);
            return reply
              .code(c.rejected.httpStatus)
              .send(jsonRpcErrorBody(echoableId(body), c.rejected.code, c.rejected.message, c.rejected.data));
          }
          // Idempotency-Key (idempotency.ts): a malformed one is refused before anything is counted.
          const parsedKey =
            c.method === 'tools/call'
              ? parseIdempotencyKey(req.headers[IDEMPOTENCY_KEY_HEADER], config.limits.idempotencyKeyMaxChars)
              : undefined;
          if (parsedKey && 'error' in parsedKey)
            return reply
              .code(400)
              .send(
                jsonRpcErrorBody(
                  c.id,
                  ErrorCode.InvalidParams,
                  badKeyMessage(parsedKey.error, config.limits.idempotencyKeyMaxChars),
                ),
              );
          if (needsRedis(c) && !redisHealth.ok) {
            return replyStoreUnavailable(reply, c.id);
          }
          // A call that starts work on a worker counts against the creation rate (not a retry
          // continuing earlier work, and not a request the SDK's ladder refuses).
          // It also takes a slot among the principal's unfinished tasks (MAX_OUTSTANDING_TASKS),
          // reserved here so a full principal gets 429 before anything runs. The two are
          // independent, so they go to Redis together (one round trip); a slot
          // reserved for a call the rate refuses is given back at once.
          let reservation: Exchange['reservation'];
          let idempotency: Exchange['idempotency'];
          if (startsWork && parsedKey && !c.tool?.preTask) {
            // Keyed: a replay (no creation counted, no slot), or the key claimed with the slot.
            const r = await resolveIdempotent(gw, limits, req, c, principal, parsedKey.key);
            if (r.kind === 'limit') return sendRefusal(reply, c.id, r.refusal);
            if (r.kind === 'unavailable') return replyStoreUnavailable(reply, c.id);
            if (r.kind === 'reused')
              return reply.code(422).send(jsonRpcErrorBody(c.id, ErrorCode.InvalidParams, r.message));
            idempotency = r.idem;
            if (r.kind === 'claimed') reservation = { taskId: r.taskId, priority: r.priority, used: false, at: r.at };
          } else if (startsWork) {
            // On a single Redis or Sentinel, a call the hot path serves has its record written
            // with its slot, in the same round trip as the rate count (creation-slot.ts).
            const oneScript = config.hotPath && canCreateInOneScript(gw) && !c.listensToTasks && servesHot(c, body!);
            const r = await takeCreationSlot(
              gw,
              limits,
              req,
              principal,
              c,
              oneScript ? { span: requestSpan(req.raw) } : undefined,
            );
            if (r.kind === 'refused') return sendRefusal(reply, c.id, r.refusal);
            if (r.kind === 'unavailable') return replyStoreUnavailable(reply, c.id);
            reservation = r.reservation;
          }
          // T-49: asking for task notifications requires declaring the extension on the request.
          if (c.listensToTasks && c.era === 'modern') {
            if (!c.declaresTasks) {
              return reply
                .code(400)
                .send(
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
          // A known client bug (seen in real clients): after negotiating an older revision, the client
          // sends a newer MCP-Protocol-Version header. On the 2025 lane the negotiated version is
          // what counts, so an unknown pre-2026 value there is dropped rather than refused with
          // 400. A header naming a 2026 (or later) revision on a body without the `_meta`
          // envelope never gets here: the ladder refused it above (-32602, HTTP 400, B-05).
          const headerVersion = req.headers['mcp-protocol-version'];
          if (
            body &&
            typeof body === 'object' &&
            c.era === 'legacy' &&
            typeof headerVersion === 'string' &&
            !LEGACY_VERSIONS.has(headerVersion)
          ) {
            log.debug({ headerVersion, method: c.method }, 'mcp.legacy_header_version_ignored');
            delete req.raw.headers['mcp-protocol-version'];
          }
          const span = requestSpan(req.raw);
          const exchange: Exchange = {
            principal,
            classification: c,
            rawInputResponses: body?.params?.inputResponses,
            ...(reservation ? { reservation } : {}),
            ...(idempotency ? { idempotency } : {}),
            ...(span ? { span } : {}),
            ...(session ? { session } : {}),
            ...(offersLegacyTasks ? { offersLegacyTasks } : {}),
          };
          reply.raw.once('close', () => {
            // A slot reserved for a task this request did not create (an error, a pre-task
            // question) is given back.
            const r = exchange.reservation;
            if (r && !r.used) {
              void undoSlot(gw, principal, r.taskId, r.created !== undefined);
              // Its Idempotency-Key too: it must never name a task that was not created.
              if (exchange.idempotency)
                gw.store.idempotency.release(principal, exchange.idempotency.key, r.taskId).catch(() => undefined);
            }
            // D4: a client that vanished before the handle reached it cannot know the task —
            // unless it sent an Idempotency-Key: its retry finds the task (idempotency.ts).
            const id = exchange.createdTaskId;
            if (id && !reply.raw.writableFinished && !exchange.idempotency) {
              log.info({ taskId: id }, 'task.handle_undelivered');
              gw.store
                .requestCancel(id, 'Cancelled: the task handle could not be delivered')
                .then((o) => (o.code === 'cancelled' ? gw.store.releaseOutstanding(principal, id) : undefined))
                .catch(() => undefined);
            }
          });
          // A 2025-11-25 task-augmented tools/call (LG-10): a task, answered CreateTaskResult.
          if (becomesLegacyTask(session, c, body?.params))
            return createLegacyTask(gw, exchange, session, c.tool!, c.args, reply);
          // tasks/get|update|cancel and a tools/call that becomes a task, of the usual shapes:
          // answered without the SDK's per-request server, with the same validation and the same
          // bytes (hot-path.ts, D8).
          if (config.hotPath && servesHot(c, body!)) return serveHot(gw, c, body!, exchange, reply);
          const authInfo = { token: '', clientId: principal, scopes: [], extra: { exchange } };
          reply.hijack();
          const held = c.era === 'modern' && c.lane === 'sync';
          const end = new AbortController();
          exchange.endStream = () => end.abort();
          await serveThrough(held ? streamHandler : handler, req.raw, reply.raw, req.body, authInfo, {
            ...adapterOptions,
            headers: reply.getHeaders(),
            end: end.signal,
            // The task handle exactly as the extension's schema has it: the SDK adds the
            // CallToolResult's `content: []` to every tools/call result (hot-path.ts writes none).
            rewriteJson: () => (exchange.createdTaskId && c.method === 'tools/call' ? withoutHandleContent : undefined),
          });
        },
      });
    },
    close: async () => {
      await Promise.allSettled([handler.close(), streamHandler.close()]);
    },
    closeListens: () => taskListen.closeAll(),
  };
}
