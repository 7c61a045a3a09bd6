/**
 * 2025-11-25 tasks (experimental in that revision; LG-10..LG-14) for sessions that negotiated
 * 2025-11-25 and declared the client `tasks` capability at `initialize`: the same Redis task
 * records and workers as the 2026 extension's tasks (mode `task`), shown in that revision's
 * shapes, on any replica.
 *
 *  - `initialize` answers `capabilities.tasks` = `{list, cancel, requests: {tools: {call}}}` to
 *    such a client (server-factory.ts), never to another (T-07, T-08 stand for everyone else);
 *  - `tools/call` with `params.task` (`{ttl?}`) of a worker tool → a task, answered at once with
 *    `CreateTaskResult {task}` (LG-10); its `ttl` is the service's TASK_TTL_MS (the `ttl` returned
 *    says so); a `params.task` on a tool listed `forbidden` (a tool run in the gateway, one that
 *    asks before its task exists, or one that refuses tasks) is refused `-32601` (LG-15);
 *  - `tasks/get` → the `Task` (LG-11); `tasks/cancel` → the cancelled `Task`, `-32602` for a task
 *    already terminal (LG-12); `tasks/list` → the caller's tasks, 50 a page, opaque cursor (LG-13);
 *  - `tasks/result` blocks until the task ends (legacy-task-result.ts, LG-14).
 * Another principal's task, an unknown, expired or malformed id: `-32602` "Task not found", like
 * the 2026 methods (T-44). A tool result with `isError` shows as `failed` (the revision's rule).
 */
import type { FastifyReply } from 'fastify';
import { ProtocolError } from '@modelcontextprotocol/server';
import { isoTime, isWellFormedTaskId, type TaskRecord } from '@mcp-tasks/task-store';
import type { ToolDefinition } from '@mcp-tasks/tools';
import type { Classification } from './classify.js';
import type { Exchange, Gateway } from './context.js';
import { clientErrorOf, ErrorCode, jsonRpcErrorBody, StoreUnavailableError, taskNotFound } from './errors.js';
import { newErrorId } from '@mcp-tasks/observability';
import { legacyCallCapabilities } from './legacy-ask.js';
import { indexLegacyTask, listLegacyTasks } from './legacy-task-index.js';
import { legacyTaskSupport } from './legacy-tool-list.js';
import type { Session } from './sessions.js';
import { startTask } from './task-create.js';
import { cancelTask } from './tasks-methods.js';
import { withWorkerNotice } from './workers.js';

/** The revision whose (experimental) tasks are served here. */
export const LEGACY_TASKS_VERSION = '2025-11-25';

/** The `_meta` key relating a message to its task (2025-11-25). */
export const RELATED_TASK = 'io.modelcontextprotocol/related-task';

/** The server `tasks` capability answered to a client that may use them (LG-10). */
export const LEGACY_TASKS_CAPABILITY = { list: {}, cancel: {}, requests: { tools: { call: {} } } };

/** The methods this module answers for such a session. */
export const LEGACY_TASK_METHODS = new Set(['tasks/get', 'tasks/list', 'tasks/cancel', 'tasks/result']);

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Whether a client that negotiated `protocolVersion` with `capabilities` gets 2025-11-25 tasks. */
export function offersLegacyTasks(protocolVersion: unknown, capabilities: unknown): boolean {
  return protocolVersion === LEGACY_TASKS_VERSION && isObject(capabilities) && isObject(capabilities.tasks);
}

/**
 * Whether a 2025 `tools/call` becomes a 2025-11-25 task (LG-10): `params.task` is an object, the
 * session has tasks, and the call would run on a worker from its first step (not a gateway tool,
 * not a retry, not a tool that asks before its task exists or that refuses tasks, arguments valid,
 * nothing missing).
 */
export function becomesLegacyTask(
  session: Session | undefined,
  c: Classification,
  params: Record<string, unknown> | undefined,
): session is Session {
  return (
    sessionHasTasks(session) &&
    c.method === 'tools/call' &&
    isObject(params?.task) &&
    c.lane === 'sync' &&
    !c.continues &&
    !c.rejected &&
    !!c.tool &&
    !c.tool.preTask &&
    c.tool.taskSupport !== 'forbidden' &&
    !!c.args &&
    !c.missingCaps
  );
}

/** Whether a 2025 request asks for a 2025-11-25 task (`params.task` an object) in a session that has them. */
export const asksLegacyTask = (session: Session | undefined, params: Record<string, unknown> | undefined) =>
  sessionHasTasks(session) && isObject(params?.task);

/**
 * Whether a 2025 `tools/call` asks for a task (`params.task` an object) of a tool this session's
 * `tools/list` shows `execution.taskSupport: "forbidden"` (legacy-tool-list.ts): refused `-32601`
 * (LG-15). A continuation is never one (it answers a question of work already started).
 */
export function asksForbiddenTask(
  session: Session | undefined,
  c: Classification,
  params: Record<string, unknown> | undefined,
): boolean {
  return (
    sessionHasTasks(session) &&
    c.method === 'tools/call' &&
    isObject(params?.task) &&
    !c.continues &&
    !!c.tool &&
    legacyTaskSupport(c.tool) === 'forbidden'
  );
}

/** Whether `session` may use 2025-11-25 tasks. */
export const sessionHasTasks = (session: Session | undefined): session is Session =>
  !!session && offersLegacyTasks(session.protocolVersion, session.capabilities);

/** The 2025-11-25 `Task` of a record (ISO times, ttl and pollInterval in ms; `isError` → failed). */
export function legacyTask(rec: TaskRecord, workersAlive?: number): Record<string, unknown> {
  const r = withWorkerNotice(rec, workersAlive);
  const failedResult = r.status === 'completed' && r.result?.isError === true;
  const statusMessage = r.statusMessage ?? (r.status === 'failed' ? r.error?.message : undefined);
  return {
    taskId: r.taskId,
    status: failedResult ? 'failed' : r.status,
    ...(statusMessage ? { statusMessage } : {}),
    createdAt: isoTime(r.createdAt),
    lastUpdatedAt: isoTime(r.lastUpdatedAt),
    ttl: r.ttlMs,
    pollInterval: r.pollIntervalMs,
  };
}

const send = (reply: FastifyReply, id: unknown, result: unknown) =>
  reply.code(200).header('content-type', 'application/json').send({ jsonrpc: '2.0', id, result });

/**
 * Creates the task of a task-augmented `tools/call` (LG-10) and answers `CreateTaskResult`.
 * The route reserved its slot (`exchange.reservation`); the task is listed for `tasks/list`.
 */
export async function createLegacyTask(
  gw: Gateway,
  exchange: Exchange,
  session: Session,
  tool: ToolDefinition,
  args: unknown,
  reply: FastifyReply,
): Promise<FastifyReply> {
  const id = exchange.classification.id;
  try {
    const creator = { principal: exchange.principal, caps: legacyCallCapabilities(session), exchange };
    const rec = await startTask(gw, creator, tool, args, 'task');
    await indexLegacyTask(gw, rec).catch((e: Error) =>
      gw.log.warn({ err: e.message, taskId: rec.taskId }, 'legacy.task_index_failed'),
    );
    exchange.createdTaskId = rec.taskId;
    gw.log.info({ taskId: rec.taskId, tool: tool.name, principal: exchange.principal }, 'legacy.task_created');
    return send(reply, id, { task: legacyTask(rec, gw.presence?.alive) });
  } catch (e) {
    return sendError(gw, reply, id, 'tools/call', e);
  }
}

/** Answers a thrown error as the client may see it (no Redis text), with its HTTP status (errors.ts). */
export function sendError(gw: Gateway, reply: FastifyReply, id: unknown, method: string, e: unknown) {
  const err = clientErrorOf(e, gw.log, method, newErrorId);
  // The error table (errors.ts): Redis away 503, a per-principal limit 429, both with Retry-After.
  if (err instanceof StoreUnavailableError) reply.code(503).header('retry-after', '5');
  else if (err.code === ErrorCode.LimitExceeded)
    reply.code(429).header('retry-after', String(Math.max(1, Math.ceil(gw.config.task.pollIntervalMs / 1000))));
  else reply.code(200);
  return reply.send(jsonRpcErrorBody(id, err.code, err.message, err.data));
}

/** A task of `principal` (mode `task`), or `-32602` "Task not found" (T-44). */
export async function ownLegacyTask(gw: Gateway, principal: string, taskId: unknown): Promise<TaskRecord> {
  if (!isWellFormedTaskId(taskId)) throw taskNotFound();
  const rec = await gw.store.get(taskId);
  if (!rec || rec.mode !== 'task' || rec.owner !== principal) throw taskNotFound();
  return rec;
}

/** How long `tasks/cancel` waits for the worker running the task to end it (ms). */
const CANCEL_WAIT_MS = 3000;

/**
 * The task after a cancel: the revision wants it `cancelled` before the response. A task a
 * worker runs is ended by that worker within milliseconds (the cancel is announced on the task's
 * channel); this waits for it, at most CANCEL_WAIT_MS, then answers the record as it is.
 */
async function untilCancelled(gw: Gateway, principal: string, taskId: string): Promise<TaskRecord> {
  const watch = await gw.events.watch(gw.store.channel(taskId));
  try {
    const until = Date.now() + CANCEL_WAIT_MS;
    for (;;) {
      const rec = await ownLegacyTask(gw, principal, taskId);
      if (rec.status !== 'working' && rec.status !== 'input_required') return rec;
      if (Date.now() >= until) return rec;
      await watch.wait(Math.min(250, until - Date.now()));
    }
  } finally {
    await watch.close();
  }
}

/**
 * Answers `tasks/get`, `tasks/list` or `tasks/cancel` of a session with tasks (LG-11..LG-13).
 * `tasks/result` is legacy-task-result.ts.
 */
export async function serveLegacyTaskMethod(
  gw: Gateway,
  principal: string,
  body: { id?: unknown; method?: string; params?: Record<string, unknown> },
  reply: FastifyReply,
): Promise<FastifyReply> {
  const params = isObject(body.params) ? body.params : {};
  try {
    switch (body.method) {
      case 'tasks/get':
        return send(reply, body.id, legacyTask(await ownLegacyTask(gw, principal, params.taskId), gw.presence?.alive));
      case 'tasks/list': {
        const page = await listLegacyTasks(gw, principal, params.cursor);
        return send(reply, body.id, {
          tasks: page.records.map((r) => legacyTask(r, gw.presence?.alive)),
          ...(page.nextCursor ? { nextCursor: page.nextCursor } : {}),
        });
      }
      case 'tasks/cancel': {
        const rec = await ownLegacyTask(gw, principal, params.taskId);
        // A terminal task cannot be cancelled (the revision: -32602).
        if (['completed', 'failed', 'cancelled'].includes(rec.status))
          throw new ProtocolError(
            ErrorCode.InvalidParams,
            `Cannot cancel task: already in terminal status '${rec.status}'`,
          );
        await cancelTask(gw, principal, rec.taskId);
        return send(reply, body.id, legacyTask(await untilCancelled(gw, principal, rec.taskId)));
      }
      default:
        throw new ProtocolError(ErrorCode.MethodNotFound, `Method not found: ${String(body.method)}`);
    }
  } catch (e) {
    return sendError(gw, reply, body.id, String(body.method), e);
  }
}
