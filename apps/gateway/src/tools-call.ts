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
import { unexpectedToolError } from '@mcp-tasks/errors';
import { toCreateTaskResult } from '@mcp-tasks/task-store';
import {
  isInputRequired,
  ToolCancelled,
  ToolProtocolError,
  abortableSleep,
  NEVER_ABORTED,
  unreadableFacts,
  type InputRequired,
  type InputResponse,
  type ToolContext,
  type ToolDefinition,
} from '@mcp-tasks/tools';
import { randomUUID } from 'node:crypto';
import type { Call, Gateway, LegacyChannel } from './context.js';
import { acceptedAnswers } from './answers.js';
import { askAndWait } from './legacy-ask.js';
import { classify, type Classification } from './classify.js';
import { invalidParams, missingCapability, tasksExtensionRequired } from './errors.js';
import { askRound, continuationOf, continueRound, digest, spend } from './mrtr.js';
import { resumeSync, waitSync } from './sync-call.js';
import { handedOffResult } from './handoff.js';
import { startTask } from './task-create.js';
import { TASK_STATUS_TOOL, taskStatus } from './task-status.js';

/** The context of a step run in the gateway (inline tools, pre-task rounds). */
function inlineContext(
  gw: Gateway,
  call: Call,
  tool: string,
  step: number,
  state: unknown,
  responses: Record<string, unknown>,
): ToolContext {
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
    sleep: (ms) => abortableSleep(ms, signal),
    progress: async () => undefined,
    // Nothing to resume in the gateway: a checkpoint is dropped, and it never drains a run.
    checkpoint: async () => undefined,
    lastCheckpoint: undefined,
    drainSignal: NEVER_ABORTED,
    draining: false,
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

/** An `isError` result carrying one text: what a model reads instead of a JSON-RPC error. */
type ErrorResult = { content: { type: 'text'; text: string }[]; isError: true };

const errorResult = (text: string): ErrorResult => ({ content: [{ type: 'text', text }], isError: true });

/** Serves one `tools/call` (see the module docstring). */
export async function toolsCall(
  gw: Gateway,
  call: Call,
  params: { name: string; arguments?: Record<string, unknown> },
) {
  // Classified by the route; requests that reach the SDK another way are classified here.
  let c = call.exchange.classification;
  if (c.method !== 'tools/call') c = classify({ method: 'tools/call', params }, gw.registry);
  const admitted = admitCall(call, c, params.name);
  if ('isError' in admitted) return admitted;
  const { tool } = admitted;
  let { args } = admitted;
  const rs = continuationOf(call);
  if (rs && (rs.tool !== tool.name || rs.args !== digest(args)))
    throw invalidParams('requestState does not belong to this tool call');
  const responses = call.ctx.mcpReq.inputResponses ?? {};

  // MRTR retry of a synchronous call whose task is waiting for input.
  if (rs?.k === 'sync') {
    await spend(gw, rs.nonce);
    return resumeSync(gw, call, rs.taskId, tool, args, responses);
  }
  if (tool.name === TASK_STATUS_TOOL) return taskStatus(gw, call, args as { taskId: string }, responses);

  if (c.lane === 'inline') {
    if (call.legacy && call.caps.elicitation !== undefined)
      return pushedRounds(gw, call, call.legacy, tool.name, (step, state, answers) =>
        tool.run(args, inlineContext(gw, call, tool.name, step, state, answers)),
      );
    return runInline(gw, call, tool, args, responses);
  }

  if (tool.preTask) {
    const pre = await preTaskRounds(gw, call, tool, args, responses);
    if (!pre || !('args' in pre)) return pre;
    args = (pre as { args: Record<string, unknown> }).args;
  }

  if (c.lane === 'task') {
    const rec = await startTask(gw, call, tool, args, 'task');
    call.exchange.createdTaskId = rec.taskId;
    return toCreateTaskResult(rec);
  }
  return holdSync(gw, call, tool, args);
}

/**
 * The checks of a call before its lane runs (see the module docstring).
 * @returns the tool and its arguments (as the tool's schema parsed them), or the `isError`
 *          result a model reads: arguments the schema refuses (SEP-1303), and on the 2025 lane a
 *          task-only tool or a missing capability.
 * @throws ProtocolError `-32602` for an unknown tool or arguments over MAX_ARGUMENTS_BYTES;
 *         `-32021` for a task-only tool without the extension (T-04) or a missing capability (B-07).
 */
function admitCall(
  call: Call,
  c: Classification,
  name: string,
): { tool: ToolDefinition; args: Record<string, unknown> } | ErrorResult {
  const tool = c.tool;
  if (!tool) throw invalidParams(`Unknown tool: ${name}`);
  if (c.argsTooLarge) throw invalidParams(`Invalid arguments for tool ${tool.name}: ${c.argsTooLarge}`);
  // SEP-1303: arguments the tool's schema refuses are a tool execution error, so the model
  // reads what is wrong and can call again.
  if (!c.args) return errorResult(`Invalid arguments for tool ${tool.name}: ${c.argsError ?? 'invalid'}`);
  if (tool.taskSupport === 'required' && !call.declaresTasks) {
    // A 2025 client cannot declare the 2026 extension: tell it (and its model) in a result.
    if (call.era === 'legacy')
      return errorResult(
        `${tool.name} runs only as a task, which needs a client that speaks MCP 2026-07-28 with the Tasks extension.`,
      );
    throw tasksExtensionRequired(`tool ${tool.name}`);
  }
  if (c.missingCaps) {
    if (call.era === 'legacy')
      return errorResult(
        `${tool.name} needs to ask the user questions. Over a 2025 protocol connection this server can ask only a client that declared form elicitation at initialize and sends its Mcp-Session-Id; this connection did not. Use such a client, or one that speaks MCP 2026-07-28.`,
      );
    throw missingCapability(
      c.missingCaps,
      `Missing required client capability: ${tool.name} needs ${Object.keys(c.missingCaps).join(', ')}`,
    );
  }
  return { tool, args: c.args };
}

/**
 * The pre-task rounds of a tool that asks before its task exists (T-16): pushed to a 2025 client
 * with a session and form elicitation (`pushedRounds`), MRTR rounds otherwise (mrtr.ts).
 * @returns `{ args }` to create the task with, or the answer to send now (an `input_required`
 *          round, a cancelled call's `isError` result).
 */
async function preTaskRounds(
  gw: Gateway,
  call: Call,
  tool: ToolDefinition,
  args: Record<string, unknown>,
  responses: Record<string, unknown>,
) {
  if (call.legacy && call.caps.elicitation !== undefined)
    return pushedRounds(gw, call, call.legacy, tool.name, (step, state, answers) =>
      tool.preTask!(args, inlineContext(gw, call, tool.name, step, state, answers)),
    );
  const round = await continueRound(gw, call, 'pre', tool.name, args, responses);
  if ('again' in round) return round.again;
  const pre = await tool.preTask!(args, inlineContext(gw, call, tool.name, round.step, round.state, round.responses));
  if ('kind' in pre && pre.kind === 'input_required')
    return askRound(gw, call, 'pre', tool.name, args, round.step, pre);
  return pre as { args: Record<string, unknown> };
}

/**
 * A call on the `sync` lane: a task in `sync` mode, the request held until its result
 * (sync-call.ts). A 2025 session's call is in flight in the session meanwhile.
 */
async function holdSync(gw: Gateway, call: Call, tool: ToolDefinition, args: Record<string, unknown>) {
  const rec = await startTask(gw, call, tool, args, 'sync');
  // A retry with the Idempotency-Key of a call handed off earlier (budget, shutdown) gets the
  // hand-off result again; any other holds the same call (docs/architecture.md).
  if (rec.mode === 'task') return handedOffResult(rec, tool, 'earlier');
  if (!call.legacy) return waitSync(gw, call, rec.taskId, tool, args);
  // A 2025 session's call: its notifications/cancelled may reach any gateway (legacy-session.ts).
  const { session, requestId } = call.legacy;
  await gw.sessions.setInflight(session.id, requestId, { taskId: rec.taskId }, rec.ttlMs).catch(() => undefined);
  try {
    return await waitSync(gw, call, rec.taskId, tool, args);
  } finally {
    await gw.sessions.clearInflight(session.id, requestId).catch(() => undefined);
  }
}

/**
 * The rounds of a gateway-run step for a 2025 client with a session (legacy-ask.ts): each time
 * the step asks, its questions go to the client as `elicitation/create` on this call's stream
 * and the next round runs with the answers. The call is in flight in the session meanwhile, so
 * the client's `notifications/cancelled` (on any gateway) ends it: no response, the stream ends.
 * @returns the step's final output (a result, or a pre-task round's `{args}`).
 */
async function pushedRounds<T>(
  gw: Gateway,
  call: Call,
  ch: LegacyChannel,
  name: string,
  run: (step: number, state: unknown, answers: Record<string, unknown>) => Promise<T | InputRequired>,
): Promise<T | { content: { type: 'text'; text: string }[]; isError: true }> {
  const token = randomUUID();
  const ttlMs = gw.config.requestState.ttlSeconds * 1000;
  await gw.sessions.setInflight(ch.session.id, ch.requestId, { inline: token }, ttlMs).catch(() => undefined);
  try {
    let step = 1;
    let state: unknown;
    let answers: Record<string, unknown> = {};
    for (;;) {
      const out = await run(step, state, answers);
      if (!isInputRequired(out)) return out;
      const got = await askAndWait(gw, call, ch, token, out.inputRequests);
      if (got === 'cancelled') {
        gw.log.info({ tool: name, step }, 'legacy.call_cancelled');
        ch.endStream();
        return { content: [{ type: 'text', text: 'Cancelled by the client.' }], isError: true };
      }
      answers = acceptedAnswers(out.inputRequests, got, gw.config.limits.maxInputResponsesBytes);
      state = out.state;
      step++;
    }
  } catch (e) {
    if (e instanceof ToolCancelled) return { content: [{ type: 'text', text: e.message }], isError: true };
    throw toProtocolError(gw, e, name);
  } finally {
    await gw.sessions.clearInflight(ch.session.id, ch.requestId).catch(() => undefined);
  }
}

/** A gateway tool, with its MRTR rounds. */
async function runInline(
  gw: Gateway,
  call: Call,
  tool: ToolDefinition,
  args: Record<string, unknown>,
  responses: Record<string, unknown>,
) {
  const round = await continueRound(gw, call, 'inline', tool.name, args, responses);
  if ('again' in round) return round.again;
  try {
    const out = await tool.run(args, inlineContext(gw, call, tool.name, round.step, round.state, round.responses));
    if (isInputRequired(out)) return askRound(gw, call, 'inline', tool.name, args, round.step, out);
    // D11: see the worker's step.result_unreadable.
    const unreadable = unreadableFacts(out).length;
    if (unreadable > 0)
      gw.log.warn(
        { tool: tool.name, unreadable },
        'tool.result_unreadable: put the facts of content into structuredContent (structuredResult)',
      );
    return out;
  } catch (e) {
    if (e instanceof ToolCancelled) return { content: [{ type: 'text', text: e.message }], isError: true };
    throw toProtocolError(gw, e, tool.name);
  }
}
