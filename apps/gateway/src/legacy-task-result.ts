/**
 * `tasks/result` for 2025-11-25 sessions with tasks (LG-14, legacy-tasks.ts): a terminal task is
 * answered at once with exactly what its `tools/call` would have returned — the tool's
 * `CallToolResult` with `_meta["io.modelcontextprotocol/related-task"] = {taskId}`, or the
 * JSON-RPC error it failed with; a cancelled task's result is an `isError` result saying so.
 * A task still running blocks the response: the answer is an SSE stream that
 *  - carries `notifications/tasks/status` (the `Task`) at each change of status (LG-14);
 *  - asks the task's questions as `elicitation/create` requests (with the related-task `_meta`)
 *    when the session declared elicitation; the client's response, POSTed to any gateway, is
 *    applied to the record like any answer (legacy-session.ts), and the worker runs on;
 *  - ends with the final response once the task is terminal.
 * The wait re-reads the record on each message of the task's channel and at least once a second
 * (D5); a read that fails (Redis away) is retried. Closing the stream ends the wait only: the
 * task goes on (a disconnection is not a cancellation, LG-08; `tasks/cancel` cancels).
 */
import type { FastifyReply } from 'fastify';
import type { TaskRecord } from '@mcp-tasks/task-store';
import type { Gateway, LegacyChannel } from './context.js';
import { ErrorCode, jsonRpcErrorBody } from './errors.js';
import { elicitationModes, TaskQuestions } from './legacy-ask.js';
import { SESSION_HEADER } from './legacy-session.js';
import { legacyTask, ownLegacyTask, RELATED_TASK, sendError } from './legacy-tasks.js';
import type { Session } from './sessions.js';
import { SSE_HEADERS, SSE_OPEN_COMMENT } from './sse.js';

const TERMINAL = new Set(['completed', 'failed', 'cancelled']);
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The final JSON-RPC message of `tasks/result` for terminal task `rec`. */
export function finalMessage(id: unknown, rec: TaskRecord): Record<string, unknown> {
  const related = { [RELATED_TASK]: { taskId: rec.taskId } };
  if (rec.status === 'failed') {
    const e = rec.error ?? { code: ErrorCode.InternalError, message: 'Tool failed' };
    return jsonRpcErrorBody(id, e.code, e.message, e.data);
  }
  const result: Record<string, unknown> =
    rec.status === 'completed'
      ? { ...(rec.result ?? { content: [] }) }
      : { content: [{ type: 'text', text: rec.statusMessage ?? 'The task was cancelled.' }], isError: true };
  const meta = isObject(result._meta) ? result._meta : {};
  return { jsonrpc: '2.0', id, result: { ...result, _meta: { ...meta, ...related } } };
}

/** Answers `tasks/result` (see the module docstring). */
export async function serveLegacyTaskResult(
  gw: Gateway,
  session: Session,
  body: { id?: unknown; params?: Record<string, unknown> },
  reply: FastifyReply,
): Promise<FastifyReply> {
  let rec: TaskRecord;
  try {
    rec = await ownLegacyTask(gw, session.principal, body.params?.taskId);
  } catch (e) {
    return sendError(gw, reply, body.id, 'tasks/result', e);
  }
  if (TERMINAL.has(rec.status)) return reply.code(200).send(finalMessage(body.id, rec));
  reply.hijack();
  const res = reply.raw;
  res.writeHead(200, { ...SSE_HEADERS, [SESSION_HEADER]: session.id });
  res.write(SSE_OPEN_COMMENT);
  const gone = new AbortController();
  res.once('close', () => gone.abort());
  const write = (message: unknown) => {
    if (!res.writableEnded && !res.destroyed) res.write(`event: message\ndata: ${JSON.stringify(message)}\n\n`);
  };
  const taskId = rec.taskId;
  const channel: LegacyChannel = {
    session,
    requestId: body.id as string | number,
    push: async (m) => {
      const params = isObject(m.params) ? m.params : {};
      const meta = isObject(params._meta) ? params._meta : {};
      write({ ...m, params: { ...params, _meta: { ...meta, [RELATED_TASK]: { taskId } } } });
    },
    endStream: () => res.end(),
  };
  const questions = elicitationModes(session).size ? new TaskQuestions(gw, channel, taskId) : undefined;
  const watch = await gw.events.watch(gw.store.channel(taskId));
  let lastStatus = rec.status;
  let lastBeat = Date.now();
  try {
    for (;;) {
      if (gone.signal.aborted) return reply;
      let read: TaskRecord | null;
      try {
        await questions?.refresh();
        read = await gw.store.get(taskId);
      } catch {
        await watch.wait(250, gone.signal); // Redis away: read again
        continue;
      }
      if (!read) {
        write(jsonRpcErrorBody(body.id, ErrorCode.InvalidParams, 'Failed to retrieve task: Task not found or expired'));
        break;
      }
      if (read.status !== lastStatus) {
        lastStatus = read.status;
        write({ jsonrpc: '2.0', method: 'notifications/tasks/status', params: legacyTask(read, gw.presence?.alive) });
      }
      if (TERMINAL.has(read.status)) {
        write(finalMessage(body.id, read));
        break;
      }
      if (read.status === 'input_required' && questions) {
        const why = await questions.ask(read).catch((e: Error) => e.message);
        if (why) gw.log.info({ taskId, why }, 'legacy.task_question_not_sent');
      }
      if (Date.now() - lastBeat >= gw.config.sync.keepAliveMs) {
        res.write(': keepalive\n\n');
        lastBeat = Date.now();
      }
      await watch.wait(1000, gone.signal);
    }
    res.end();
    return reply;
  } finally {
    await watch.close();
  }
}
