/**
 * `task_status`: the built-in tool that follows work a synchronous call handed off when its
 * budget ran out (design D1). Clients without the Tasks extension get, instead of a result
 * lost to a client timeout, a normal `CallToolResult` naming this tool and the `taskId`.
 *
 * `task_status({taskId})` (served in the gateway, owner-checked like `tasks/get`, T-44):
 *  - `working`: the status and latest `statusMessage`;
 *  - `completed`: the tool's own `CallToolResult`, as the call would have returned it;
 *  - `failed` / `cancelled`: an `isError` result saying so;
 *  - `input_required`: MRTR `input_required` with the task's `inputRequests` when the request
 *    declares what they need (elicitation); the retry's `inputResponses` are applied to the task
 *    (validated as in `tasks/update`) and it resumes;
 *  - unknown, expired or someone else's id: an `isError` result (spec transport §11: an unknown
 *    handle is a tool execution error).
 * Every result with `structuredContent` carries its sentence in `structuredContent.summary` too
 * (D11: Claude Code shows the model only `structuredContent`).
 */
import { z } from 'zod';
import { inputRequired as sdkInputRequired } from '@modelcontextprotocol/server';
import { isWellFormedTaskId, type TaskRecord } from '@mcp-tasks/task-store';
import { defineTool, structuredResult, textResult, type ToolDefinition } from '@mcp-tasks/tools';
import type { Call, Gateway } from './context.js';
import { storeUnavailable } from './errors.js';
import { continuationOf, digest, spend } from './mrtr.js';
import { answerTask, notePolled } from './tasks-methods.js';
import { withWorkerNotice } from './workers.js';

export const TASK_STATUS_TOOL = 'task_status';

export const taskStatusTool = defineTool({
  name: TASK_STATUS_TOOL,
  title: 'Task status',
  description:
    'Checks on work that a tool call moved to the background ("continues in the background as task …"): returns its status and latest progress message, asks you any question the task needs answered, and returns the final result once it has finished. Call it with the taskId from that message.',
  inputSchema: z.object({ taskId: z.string().min(1).max(200) }),
  taskSupport: 'forbidden',
  runsIn: 'gateway',
  async run() {
    // Served by the gateway's tools/call handler (it needs the task store); never dispatched here.
    throw new Error('task_status is served by the gateway');
  },
}) as unknown as ToolDefinition;

/** The answer for an id that is unknown, expired, malformed or someone else's (no structuredContent). */
export const noSuchTaskResult = (taskId: string) =>
  textResult(`There is no task ${taskId} for you: the id is wrong, or the task expired.`, { isError: true });

/**
 * What `task_status` answers for a task in `rec`'s state, when it does not ask the task's
 * question through MRTR (see the module docstring): `completed` → the tool's own result;
 * `failed` / `cancelled` → `isError`; `input_required` → says the client cannot show the
 * question; `working` → the latest progress and to call again.
 */
export function statusResult(rec: TaskRecord) {
  const { taskId } = rec;
  const label = `Task ${taskId} (${rec.tool})`;
  const msg = rec.statusMessage ? `: ${rec.statusMessage}` : '';
  const fields = { taskId, status: rec.status, ...(rec.statusMessage ? { statusMessage: rec.statusMessage } : {}) };
  switch (rec.status) {
    case 'completed':
      return { ...(rec.result ?? { content: [] }) };
    case 'failed':
      return structuredResult(
        { summary: `${label} failed: ${rec.error?.message ?? 'unknown error'}`, ...fields },
        { isError: true },
      );
    case 'cancelled':
      return structuredResult({ summary: `${label} was cancelled${msg}`, ...fields }, { isError: true });
    case 'input_required':
      return structuredResult({
        summary: `${label} is waiting for an answer from the user${msg}, but this client cannot show the question (it needs MCP 2026-07-28 with elicitation).`,
        ...fields,
      });
    default:
      return structuredResult({
        summary: `${label} is still working${msg}. Call ${TASK_STATUS_TOOL} with {"taskId":"${taskId}"} again in a little while.`,
        ...fields,
        pollIntervalMs: rec.pollIntervalMs,
      });
  }
}

/** Serves one `task_status` call (see the module docstring). */
export async function taskStatus(
  gw: Gateway,
  call: Call,
  args: { taskId: string },
  responses: Record<string, unknown>,
) {
  const { store, log } = gw;
  const { taskId } = args;
  const notFound = noSuchTaskResult(taskId);
  if (!isWellFormedTaskId(taskId)) return notFound;
  let rec = await store.get(taskId).catch(() => {
    throw storeUnavailable();
  });
  if (!rec || rec.mode !== 'task' || rec.owner !== call.principal) return notFound;
  notePolled(gw, rec);
  const rs = continuationOf(call);
  if (rs?.k === 'status' && rs.taskId === taskId && rec.status === 'input_required') {
    await spend(gw, rs.nonce);
    const r = await answerTask(gw, rec, responses, call.principal);
    log.info({ taskId, outcome: r.code }, 'task_status.answered');
    rec = (await store.get(taskId)) ?? rec;
  }
  if (rec.status === 'input_required') {
    const needsElicitation = Object.values(rec.inputRequests).some(
      (q) => (q as { method?: string }).method === 'elicitation/create',
    );
    if (call.era === 'modern' && (!needsElicitation || call.caps.elicitation !== undefined)) {
      return sdkInputRequired({
        inputRequests: rec.inputRequests as never,
        requestState: await gw.codec.mint(
          { k: 'status', tool: TASK_STATUS_TOOL, args: digest(args), taskId },
          call.principal,
        ),
      });
    }
  }
  return statusResult(withWorkerNotice(rec, gw.presence?.alive));
}
