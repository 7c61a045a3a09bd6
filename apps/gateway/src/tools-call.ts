/**
 * `tools/call` (design D1): dispatched here rather than through `registerTool`, which cannot
 * answer a JSON-RPC error such as `-32021`. The request was classified once by the route
 * (classify.ts); this runs its lane:
 *  - `inline`: the tool runs in the gateway, with MRTR rounds (mrtr.ts) — or `task_status`;
 *  - `task`: pre-task MRTR rounds if the tool has them (T-16), then a task and its handle
 *    (`CreateTaskResult`, T-11, T-15);
 *  - `sync`: a task in `sync` mode, the request held until the result (sync-call.ts);
 *    an MRTR retry of such a call resumes it.
 * Calls without a lane are answered here with their error: unknown tool or arguments over
 * MAX_ARGUMENTS_BYTES (`-32602`), arguments the tool's schema refuses (an `isError` result with
 * the validation message: SEP-1303, spec 2025-11-25 "input validation errors are tool execution
 * errors"), a task-only tool without the extension (`-32021`, T-04), a missing capability
 * (`-32021`, B-07; on the 2025 lane an `isError` result).
 */
import { ProtocolError } from '@modelcontextprotocol/server';
import { newErrorId } from '@mcp-tasks/observability';
import { toCreateTaskResult, unexpectedToolError } from '@mcp-tasks/task-store';
import { isInputRequired, ToolCancelled, ToolProtocolError, abortableSleep, unreadableFacts, type InputResponse, type ToolContext, type ToolDefinition } from '@mcp-tasks/tools';
import type { Call, Gateway } from './context.js';
import { classify } from './classify.js';
import { invalidParams, missingCapability, tasksExtensionRequired } from './errors.js';
import { askRound, continuationOf, continueRound, digest, spend } from './mrtr.js';
import { resumeSync, waitSync } from './sync-call.js';
import { startTask } from './task-create.js';
import { TASK_STATUS_TOOL, taskStatus } from './task-status.js';

/** The context of a step run in the gateway (inline tools, pre-task rounds). */
function inlineContext(gw: Gateway, call: Call, tool: string, step: number, state: unknown, responses: Record<string, unknown>): ToolContext {
  const signal = call.ctx.mcpReq.signal;
  return {
    signal,
    mode: 'inline',
    step,
    attempt: 1,
    state,
    inputResponses: responses as Record<string, InputResponse>,
    clientCapabilities: call.caps,
    principal: call.principal,
    settings: { researchPhaseMs: gw.config.demo.researchPhaseMs, ...gw.config.testing },
    sleep: (ms) => abortableSleep(ms, signal),
    progress: async () => undefined,
    // `notifications/message` on this request's stream when it set a log level at or below
    // `level` (the SDK applies L-01); otherwise nothing is sent.
    log: async (level, data) => {
      await call.ctx.mcpReq.log(level, data, tool).catch(() => undefined);
    },
  };
}

/**
 * Maps a thrown tool error to the JSON-RPC error of a call run in the gateway: a deliberate
 * protocol error keeps its code and message; anything else is a generic `-32603` with an error
 * id, and the details go to the log only.
 */
export function toProtocolError(gw: Gateway, e: unknown, tool: string): ProtocolError {
  if (e instanceof ProtocolError) return e;
  if (e instanceof ToolProtocolError) return new ProtocolError(e.code, e.message, e.data);
  const errorId = newErrorId();
  gw.log.error({ err: e, tool, errorId }, 'tool.inline_failed');
  const { code, message, data } = unexpectedToolError(tool, errorId);
  return new ProtocolError(code, message, data);
}

/** Serves one `tools/call` (see the module docstring). */
export async function toolsCall(gw: Gateway, call: Call, params: { name: string; arguments?: Record<string, unknown> }) {
  // Classified by the route; requests that reach the SDK another way are classified here.
  let c = call.exchange.classification;
  if (c.method !== 'tools/call') c = classify({ method: 'tools/call', params }, gw.registry);
  const tool = c.tool;
  if (!tool) throw invalidParams(`Unknown tool: ${params.name}`);
  if (c.argsTooLarge) throw invalidParams(`Invalid arguments for tool ${tool.name}: ${c.argsTooLarge}`);
  // SEP-1303: arguments the tool's schema refuses are a tool execution error, so the model
  // reads what is wrong and can call again.
  if (!c.args) return { content: [{ type: 'text', text: `Invalid arguments for tool ${tool.name}: ${c.argsError ?? 'invalid'}` }], isError: true };
  let args = c.args;
  if (tool.taskSupport === 'required' && !call.declaresTasks) {
    // A 2025 client cannot declare the 2026 extension: tell it (and its model) in a result.
    if (call.era === 'legacy') {
      return { content: [{ type: 'text', text: `${tool.name} runs only as a task, which needs a client that speaks MCP 2026-07-28 with the Tasks extension.` }], isError: true };
    }
    throw tasksExtensionRequired(`tool ${tool.name}`);
  }
  if (c.missingCaps) {
    if (call.era === 'legacy') {
      return { content: [{ type: 'text', text: `${tool.name} needs to ask the user questions, which this server cannot do over a 2025 protocol connection. Use a client that speaks MCP 2026-07-28.` }], isError: true };
    }
    throw missingCapability(c.missingCaps, `Missing required client capability: ${tool.name} needs ${Object.keys(c.missingCaps).join(', ')}`);
  }
  const rs = continuationOf(call);
  if (rs && (rs.tool !== tool.name || rs.args !== digest(args))) throw invalidParams('requestState does not belong to this tool call');
  const responses = call.ctx.mcpReq.inputResponses ?? {};

  // MRTR retry of a synchronous call whose task is waiting for input.
  if (rs?.k === 'sync') {
    await spend(gw, rs.nonce);
    return resumeSync(gw, call, rs.taskId, tool, args, responses);
  }
  if (tool.name === TASK_STATUS_TOOL) return taskStatus(gw, call, args as { taskId: string }, responses);

  if (c.lane === 'inline') return runInline(gw, call, tool, args, responses);

  if (tool.preTask) {
    const round = await continueRound(gw, call, 'pre', tool.name, args, responses);
    if ('again' in round) return round.again;
    const pre = await tool.preTask(args, inlineContext(gw, call, tool.name, round.step, round.state, round.responses));
    if ('kind' in pre && pre.kind === 'input_required') return askRound(gw, call, 'pre', tool.name, args, round.step, pre);
    args = (pre as { args: Record<string, unknown> }).args;
  }

  if (c.lane === 'task') {
    const rec = await startTask(gw, call, tool, args, 'task');
    call.exchange.createdTaskId = rec.taskId;
    return toCreateTaskResult(rec);
  }
  const rec = await startTask(gw, call, tool, args, 'sync');
  return waitSync(gw, call, rec.taskId, tool, args);
}

/** A gateway tool, with its MRTR rounds. */
async function runInline(gw: Gateway, call: Call, tool: ToolDefinition, args: Record<string, unknown>, responses: Record<string, unknown>) {
  const round = await continueRound(gw, call, 'inline', tool.name, args, responses);
  if ('again' in round) return round.again;
  try {
    const out = await tool.run(args, inlineContext(gw, call, tool.name, round.step, round.state, round.responses));
    if (isInputRequired(out)) return askRound(gw, call, 'inline', tool.name, args, round.step, out);
    // D11: see the worker's step.result_unreadable.
    const unreadable = unreadableFacts(out).length;
    if (unreadable > 0) gw.log.warn({ tool: tool.name, unreadable }, 'tool.result_unreadable: put the facts of content into structuredContent (structuredResult)');
    return out;
  } catch (e) {
    if (e instanceof ToolCancelled) return { content: [{ type: 'text', text: e.message }], isError: true };
    throw toProtocolError(gw, e, tool.name);
  }
}
