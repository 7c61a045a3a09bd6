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
 * The refusals are written by mcp-refusals.ts; what the end of an exchange gives back (an unused
 * slot, an undelivered task handle) by exchange-release.ts.
 */
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { createMcpHandler, SUPPORTED_PROTOCOL_VERSIONS } from '@modelcontextprotocol/server';
import type { RedisHealth } from '@mcp-tasks/jobs';
import { classify, eraOf, toolNeedsRedis, type Classification, type McpBody } from './classify.js';
import type { Exchange, Gateway } from './context.js';
import type { AuthHooks } from './auth/hooks.js';
import { echoableId, isStoreError } from './errors.js';
import { replyStoreUnavailable } from './store-unavailable-reply.js';
import { refuseToolsCallShape } from './tools-call-shape.js';
import { fillMissingMcpName } from './header-refusals.js';
import { legacyCallCapabilities } from './legacy-ask.js';
import { sessionStep, type SessionStep } from './legacy-session.js';
import { serveLegacyTaskResult } from './legacy-task-result.js';
import {
  asksForbiddenTask,
  asksLegacyTask,
  becomesLegacyTask,
  createLegacyTask,
  LEGACY_TASK_METHODS,
  serveLegacyTaskMethod,
  sessionHasTasks,
} from './legacy-tasks.js';
import type { Session } from './sessions.js';
import { withoutHandleContent } from './task-handle.js';
import { sendRefusal, type Limits } from './limits.js';
import { IDEMPOTENCY_KEY_HEADER, parseIdempotencyKey, resolveIdempotent } from './idempotency.js';
import { createTaskListen, type TaskListen } from './listen.js';
import { serveHot, servesHot } from './hot-path.js';
import { canCreateInOneScript, takeCreationSlot } from './creation-slot.js';
import { requestGuards } from './request-guards.js';
import { registerMethodNotAllowed } from './method-not-allowed.js';
import { createServerFactory } from './server-factory.js';
import { serveThrough } from './sse.js';
import { requestSpan } from './tracing.js';
import { releaseOnClose } from './exchange-release.js';
import {
  refuseBadKey,
  refuseForbiddenTask,
  refuseMalformedMessage,
  refuseRejected,
  refuseUndeclaredListen,
  refuseUnreserved,
} from './mcp-refusals.js';

/** Protocol versions the SDK's stateless 2025 lane accepts in `MCP-Protocol-Version`. */
const LEGACY_VERSIONS = new Set<string>(SUPPORTED_PROTOCOL_VERSIONS);

/** Methods whose handling needs Redis: answered 503 + Retry-After while it is unreachable (D10). */
const NEEDS_REDIS = new Set(['tasks/get', 'tasks/update', 'tasks/cancel']);

const needsRedis = (c: Classification) => (c.method !== undefined && NEEDS_REDIS.has(c.method)) || toolNeedsRedis(c);

export interface McpRoute {
  /** Registers `/mcp` on `app`. */
  register(app: FastifyInstance): void;
  /** Aborts every in-flight SDK exchange (last step of shutdown). */
  close(): Promise<void>;
  /** Ends every task listen stream with its final result (shutdown). */
  closeListens(): void;
}

/** What the route's handler uses, built once per process by `createMcpRoute`. */
interface RouteParts {
  gw: Gateway;
  redisHealth: RedisHealth;
  limits: Limits;
  taskListen: TaskListen;
  /** The SDK's handler answering JSON (unless it streams notifications). */
  json: ReturnType<typeof createMcpHandler>;
  /** The SDK's handler answering `text/event-stream` at once (a held 2026 `sync` call). */
  stream: ReturnType<typeof createMcpHandler>;
  adapterOptions: { maxRequestBodySize: number; onerror: (e: Error) => void };
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
  const r: RouteParts = {
    gw,
    redisHealth,
    limits,
    taskListen: createTaskListen(gw),
    json: createMcpHandler(factory, handlerOptions),
    stream: createMcpHandler(factory, { ...handlerOptions, responseMode: 'sse' }),
    adapterOptions: {
      maxRequestBodySize: config.maxBodyBytes,
      onerror: (e: Error) => log.error({ err: e }, 'mcp.adapter_error'),
    },
  };
  const guards = requestGuards(config);

  return {
    register(app) {
      if (!app.hasRequestDecorator('principal')) app.decorateRequest('principal', '');
      app.route({
        method: ['POST', 'GET', 'DELETE'],
        url: '/mcp',
        // One hook per phase, in callback style: a step decided at once (the guards, an API key
        // matched a moment ago) costs no promise; only what waits (a first authentication, the
        // rate count) does. A hook that sent a refusal never calls `done` (Fastify's rule for
        // callback hooks): the refusal may still be running the onSend hooks (body-drain.ts
        // reads the rest of the body first), so `reply.sent` cannot tell yet, and a `done` then
        // would have Fastify read and parse the refused body and answer it a second time.
        onRequest: (req, reply, done) => {
          if (guards(req, reply)) return;
          const authPending = auth.onRequest(req, reply);
          if (authPending === undefined) return done();
          authPending.then((refused) => {
            if (!refused) done();
          }, done);
        },
        preHandler: (req, reply, done) => {
          const authPending = auth.preHandler(req, reply);
          if (authPending === undefined) return countRequest(req, reply, done);
          authPending.then((refused) => {
            if (!refused) countRequest(req, reply, done);
          }, done);
        },
        handler: (req: FastifyRequest, reply) => serveMcp(r, req, reply),
      });
      registerMethodNotAllowed(app, '/mcp');
    },
    close: async () => {
      await Promise.allSettled([r.json.close(), r.stream.close()]);
    },
    closeListens: () => r.taskListen.closeAll(),
  };

  /**
   * The route's request count (limits.ts, 429): a tools/call is counted once classified (a call
   * that starts work counts against the creation rate only); a poll in this process; an
   * unauthenticated server/discover against its address.
   */
  function countRequest(req: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
    const method = (req.body as McpBody | undefined)?.method;
    if (method === 'tools/call' && req.principal) return done();
    const refused =
      method === 'tasks/get' && req.principal
        ? limits.poll(req, req.principal)
        : limits.request(req, req.principal || `ip:${req.ip}`);
    refused.then((r) => {
      if (!r) return done();
      try {
        sendRefusal(reply, echoableId(req.body), r);
      } catch (e) {
        done(e as FastifyError);
      }
    }, done);
  }
}

/**
 * The route's handler: the steps after the hooks, in the order of the module docstring. A
 * `tasks/get` of the usual shape goes through the synchronous checks only (no await before
 * `serveHot`).
 */
async function serveMcp(r: RouteParts, req: FastifyRequest, reply: FastifyReply) {
  const { gw, limits } = r;
  const { config, log } = gw;
  // Nesting and key count were bounded while the body was parsed (body-parser.ts).
  const body = req.body as McpBody | undefined;
  const malformed = refuseMalformedMessage(body, reply);
  if (malformed) return malformed;
  const principal = req.principal;
  // 2025-era sessions (legacy-session.ts): opened at initialize, resolved for the
  // principal (404 when unknown or someone else's), ended by DELETE; a client's answer to
  // our question and its notifications/cancelled are handled here. A 2026 request's
  // Mcp-Session-Id is ignored (LG-06).
  let session: Session | undefined;
  let offersLegacyTasks = false;
  if (req.method === 'DELETE' || (body && typeof body === 'object' && eraOf(body) === 'legacy')) {
    const step = await legacySessionStep(gw, req, reply, body, principal);
    if (step.answered) return reply;
    session = step.session;
    offersLegacyTasks = sessionHasTasks(step.opened);
  }
  // 2025-11-25 tasks of a session that declared them (legacy-tasks.ts, LG-11..LG-14).
  if (sessionHasTasks(session) && typeof body?.method === 'string' && LEGACY_TASK_METHODS.has(body.method)) {
    return body.method === 'tasks/result'
      ? serveLegacyTaskResult(gw, session, body, reply)
      : serveLegacyTaskMethod(gw, principal, body, reply);
  }
  const c = classifyRequest(gw, req, body, session);
  // A call that starts work on a worker counts against the creation rate (below), not
  // the request rate; any other tools/call against the request rate, here.
  const startsWork = (c.lane === 'task' || c.lane === 'sync') && !c.continues && !c.rejected;
  if (c.method === 'tools/call' && !startsWork) {
    const refused = await limits.request(req, principal);
    if (refused) return sendRefusal(reply, echoableId(body), refused);
  }
  // The validation ladder's verdict, answered before anything is counted, reserved or run.
  if (c.rejected) return refuseRejected(log, reply, body, c, c.rejected, principal);
  if (c.method === 'tools/call') {
    const refused = refuseToolsCallShape(reply, c.id, body?.params);
    if (refused) return refused;
  }
  if (asksForbiddenTask(session, c, body?.params)) return refuseForbiddenTask(reply, c.id, c.tool!.name);
  // Idempotency-Key (idempotency.ts): a malformed one is refused before anything is counted.
  const maxKeyChars = config.limits.idempotencyKeyMaxChars;
  const parsedKey =
    c.method === 'tools/call' ? parseIdempotencyKey(req.headers[IDEMPOTENCY_KEY_HEADER], maxKeyChars) : undefined;
  if (parsedKey && 'error' in parsedKey) return refuseBadKey(reply, c.id, parsedKey.error, maxKeyChars);
  if (needsRedis(c) && !r.redisHealth.ok) return replyStoreUnavailable(reply, c.id);
  // A call that starts work on a worker counts against the creation rate (not a retry
  // continuing earlier work, and not a request the SDK's ladder refuses).
  // It also takes a slot among the principal's unfinished tasks (MAX_OUTSTANDING_TASKS),
  // reserved here so a full principal gets 429 before anything runs. The two are
  // independent, so they go to Redis together (one round trip); a slot
  // reserved for a call the rate refuses is given back at once.
  let reservation: Exchange['reservation'];
  let idempotency: Exchange['idempotency'];
  if (startsWork) {
    // Keyed: a replay (no creation counted, no slot), or the key claimed with the slot.
    // Unkeyed, on a single Redis or Sentinel, a call the hot path serves has its record written
    // with its slot, in the same round trip as the rate count (creation-slot.ts).
    const res =
      parsedKey && !c.tool?.preTask
        ? await resolveIdempotent(gw, limits, req, c, principal, parsedKey.key)
        : await takeCreationSlot(gw, limits, req, principal, c, createsInOneScript(gw, req, c, body!));
    if (res.kind === 'reserved') reservation = res.reservation;
    else if (res.kind === 'replay' || res.kind === 'claimed') {
      idempotency = res.idem;
      if (res.kind === 'claimed') reservation = { taskId: res.taskId, priority: res.priority, used: false, at: res.at };
    } else return refuseUnreserved(reply, c.id, res);
  }
  // T-49: asking for task notifications requires declaring the extension on the request.
  if (c.listensToTasks && c.era === 'modern')
    return c.declaresTasks ? r.taskListen.serve(req, reply, body!, principal, c) : refuseUndeclaredListen(reply, c.id);
  dropUnknownLegacyVersion(gw, req, body, c);
  const span = requestSpan(req.raw);
  const exchange: Exchange = {
    principal,
    receivedAt: Date.now() - reply.elapsedTime,
    classification: c,
    rawInputResponses: body?.params?.inputResponses,
  };
  if (reservation) exchange.reservation = reservation;
  if (idempotency) exchange.idempotency = idempotency;
  if (span) exchange.span = span;
  if (session) exchange.session = session;
  if (offersLegacyTasks) exchange.offersLegacyTasks = offersLegacyTasks;
  // Only a tools/call may create a task or hold a reservation: what the end of any other exchange
  // would give back is nothing (exchange-release.ts).
  if (c.method === 'tools/call' || reservation)
    reply.raw.once('close', () => releaseOnClose(gw, exchange, principal, reply.raw));
  // A 2025-11-25 task-augmented tools/call (LG-10): a task, answered CreateTaskResult.
  if (becomesLegacyTask(session, c, body?.params))
    return createLegacyTask(gw, exchange, session, c.tool!, c.args, reply);
  // tasks/get|update|cancel and a tools/call that becomes a task, of the usual shapes:
  // answered without the SDK's per-request server, with the same validation and the same
  // bytes (hot-path.ts, D8).
  if (config.hotPath && servesHot(c, body!)) return serveHot(gw, c, body!, exchange, reply);
  await serveSdk(r, req, reply, exchange);
}

/**
 * The session step of a 2025-era request or a DELETE (legacy-session.ts), with the session
 * store away answered 503 + Retry-After (D10) as `{ answered: true }`.
 */
async function legacySessionStep(
  gw: Gateway,
  req: FastifyRequest,
  reply: FastifyReply,
  body: McpBody | undefined,
  principal: string,
): Promise<SessionStep> {
  try {
    return await sessionStep(gw, req, reply, body, principal);
  } catch (e) {
    if (!isStoreError(e)) throw e;
    gw.log.warn({ err: (e as Error).message }, 'session.store_unavailable');
    replyStoreUnavailable(reply, echoableId(body));
    return { answered: true };
  }
}

/** Classifies the request once (classify.ts) and logs it at debug level. */
function classifyRequest(gw: Gateway, req: FastifyRequest, body: McpBody | undefined, session: Session | undefined) {
  const { config, log } = gw;
  // ACCEPT_MISSING_MCP_NAME: a tasks/get|update|cancel without Mcp-Name gets the header
  // its body implies, before either validator (ours, the SDK's) sees it; a mismatching
  // header is never touched, so it is still refused (H-15).
  if (config.acceptMissingMcpName) fillMissingMcpName(req, body, log);
  const c = classify(body, gw.registry, {
    maxArgumentsBytes: config.limits.maxArgumentsBytes,
    bodyBytes: Number(req.headers['content-length']) || undefined,
    http: { method: req.method, headers: req.headers, bodyText: req.bodyText },
    legacyCaps: legacyCallCapabilities(session),
    legacyTask: asksLegacyTask(session, body?.params),
  });
  if (log.isLevelEnabled('debug'))
    log.debug(
      { method: c.method, id: c.id, lane: c.lane, principal: req.principal, headers: req.headers },
      'mcp.request',
    );
  return c;
}

/**
 * The `create` argument of `takeCreationSlot`: on a single Redis or Sentinel, a call the hot
 * path serves has its record written with its slot (creation-slot.ts); otherwise undefined.
 */
function createsInOneScript(gw: Gateway, req: FastifyRequest, c: Classification, body: McpBody) {
  const oneScript = gw.config.hotPath && canCreateInOneScript(gw) && !c.listensToTasks && servesHot(c, body);
  return oneScript ? { span: requestSpan(req.raw) } : undefined;
}

/**
 * A known client bug (seen in real clients): after negotiating an older revision, the client
 * sends a newer MCP-Protocol-Version header. On the 2025 lane the negotiated version is what
 * counts, so an unknown pre-2026 value there is dropped rather than refused with 400. A header
 * naming a 2026 (or later) revision on a body without the `_meta` envelope never gets here: the
 * ladder refused it (-32602, HTTP 400, B-05).
 */
function dropUnknownLegacyVersion(gw: Gateway, req: FastifyRequest, body: McpBody | undefined, c: Classification) {
  const headerVersion = req.headers['mcp-protocol-version'];
  if (
    body &&
    typeof body === 'object' &&
    c.era === 'legacy' &&
    typeof headerVersion === 'string' &&
    !LEGACY_VERSIONS.has(headerVersion)
  ) {
    gw.log.debug({ headerVersion, method: c.method }, 'mcp.legacy_header_version_ignored');
    delete req.raw.headers['mcp-protocol-version'];
  }
}

/**
 * Hands the exchange to the SDK's handler (through `@modelcontextprotocol/node`'s adapter,
 * sse.ts): the streaming one for a held 2026 `sync` call (D1, D6), the JSON one otherwise.
 */
function serveSdk(r: RouteParts, req: FastifyRequest, reply: FastifyReply, exchange: Exchange): Promise<void> {
  const c = exchange.classification;
  const authInfo = { token: '', clientId: exchange.principal, scopes: [], extra: { exchange } };
  reply.hijack();
  const held = c.era === 'modern' && c.lane === 'sync';
  const end = new AbortController();
  exchange.endStream = () => end.abort();
  return serveThrough(held ? r.stream : r.json, req.raw, reply.raw, req.body, authInfo, {
    ...r.adapterOptions,
    headers: reply.getHeaders(),
    end: end.signal,
    // The task handle exactly as the extension's schema has it: the SDK adds the
    // CallToolResult's `content: []` to every tools/call result (hot-path.ts writes none).
    rewriteJson: () => (exchange.createdTaskId && c.method === 'tools/call' ? withoutHandleContent : undefined),
  });
}
