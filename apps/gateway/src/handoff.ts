/**
 * The hand-off of a synchronous call (design D1): when its budget runs out, or the gateway
 * holding it shuts down, the work continues as a task bound to the same principal and the
 * call ends with a normal result that tells the model which tool to call with which id
 * (`task_status`). A client that knows nothing of tasks never loses a long result.
 */
import { ProtocolError } from '@modelcontextprotocol/server';
import type { TaskRecord } from '@mcp-tasks/task-store';
import { structuredResult, type ToolDefinition } from '@mcp-tasks/tools';
import type { Call, Gateway } from './context.js';
import { ErrorCode, handOffUnavailable, storeUnavailable } from './errors.js';
import { TASK_STATUS_TOOL } from './task-status.js';

/**
 * Detaches the call's task (`detachSync`: mode `sync` → `task`, holders dropped) and builds the
 * hand-off result.
 * @returns the result, or undefined when the task ended meanwhile (answer it normally).
 * @throws `-32603` when Redis is unreachable (at shutdown: `handOffUnavailable`) or the record expired.
 */
export async function handOff(
  gw: Gateway,
  call: Call,
  rec: TaskRecord,
  tool: ToolDefinition,
  budgetMs: number,
  why: 'budget' | 'shutdown',
) {
  const d = await gw.store.detachSync(rec.taskId).catch(() => {
    throw why === 'shutdown' ? handOffUnavailable() : storeUnavailable();
  });
  if (d.code === 'terminal') return undefined;
  // `not_sync`: another request holding the same call (a retry sent twice) handed it off.
  if (d.code === 'gone')
    throw new ProtocolError(ErrorCode.InternalError, 'The task record expired before the tool finished');
  // D4: if this result never reaches the client, nobody knows the id: cancel then (not when
  // another request handed it off: that one carries the id).
  if (d.code === 'ok') call.exchange.createdTaskId = rec.taskId;
  gw.log.info({ taskId: rec.taskId, tool: tool.name, budgetMs, why, detached: d.code }, 'sync.handed_off');
  // The record read before the budget ran out may predate progress already relayed on the
  // stream: the hand-off carries the task's state as the detach found it.
  const now = { ...rec, status: d.status, statusMessage: d.statusMessage ?? rec.statusMessage };
  return handedOffResult(now, tool, why, budgetMs);
}

/** Why a call was handed off: its budget ran out, its gateway is shutting down, or an earlier request of the same call handed it off. */
export type HandOffReason = 'budget' | 'shutdown' | 'earlier';

const BECAUSE: Record<HandOffReason, (budgetMs: number) => string> = {
  budget: (ms) => `is still running after ${Math.round(ms / 1000)} s`,
  shutdown: () => 'is still running and the server holding this call is restarting',
  earlier: () => 'was handed off to the background by an earlier request',
};

/**
 * The result that hands a running call over to `task_status` (D1). The instruction is in
 * `structuredContent.summary` as well as in `content` (D11: Claude Code shows the model only
 * `structuredContent`), next to the machine-readable `taskId`, `status`, `statusMessage`,
 * `pollIntervalMs` and `next` ({tool, arguments}).
 * @param budgetMs the call's budget (ms), named in the `budget` sentence.
 */
export function handedOffResult(rec: TaskRecord, tool: ToolDefinition, why: HandOffReason, budgetMs = 0) {
  const latest = rec.statusMessage ? ` Latest progress: ${rec.statusMessage}.` : '';
  return structuredResult({
    summary:
      `${tool.name} ${BECAUSE[why](budgetMs)}, so it continues in the background as task ${rec.taskId}.${latest} ` +
      `To check on it and get its result when it is done, call the tool ${TASK_STATUS_TOOL} with {"taskId":"${rec.taskId}"}. ` +
      `Its result is kept until ${new Date(rec.createdAt + rec.ttlMs).toISOString()}.`,
    taskId: rec.taskId,
    status: rec.status,
    ...(rec.statusMessage ? { statusMessage: rec.statusMessage } : {}),
    pollIntervalMs: rec.pollIntervalMs,
    next: { tool: TASK_STATUS_TOOL, arguments: { taskId: rec.taskId } },
  });
}
