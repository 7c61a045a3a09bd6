/**
 * `task_status`: the built-in tool that follows work a synchronous call handed off when its
 * budget ran out (design D1; issue 3 §5). Clients without the Tasks extension get, instead of a
 * result lost to a client timeout, a normal `CallToolResult` naming this tool and the `taskId`.
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
 */
import { z } from 'zod';
import { defineTool, type ToolDefinition } from '@mcp-tasks/tools';

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
