/**
 * `mcp-tasks call <tool> [--args JSON] [--arg k=v …] [--json]`: calls a tool the way a
 * task-aware client does (the Tasks extension and form elicitation declared, T-01). The server
 * decides (T-02, D1): a task handle → followed with `tasks/get` at `pollIntervalMs` under a
 * progress bar, its questions prompted and sent with `tasks/update`; a tool that runs without a
 * task (`taskSupport: 'forbidden'`) → answered on the request itself, with
 * `notifications/progress` on the bar and MRTR rounds (`input_required` + `requestState`)
 * prompted and retried. Ctrl-C on a task asks whether to cancel it or leave it running.
 */
import type { CallOutcome, TaskClient, ToolInfo } from '@mcp-tasks/client';
import { buildArguments } from '../args.js';
import { clientFor, CliError, EXIT } from '../context.js';
import { answerInputRequests, describeInputRequests, isPromptExit } from '../elicit.js';
import { follow } from '../follow.js';
import { Interrupts } from '../interrupt.js';
import { ProgressView } from '../progress.js';
import { endingForResult, endingForTask, type Ending } from '../render.js';
import { pollingSource } from '../sources.js';

export interface CallFlags {
  args?: string;
  arg: string[];
  json?: boolean;
}

/** True when this process can prompt (keys in, a screen out). */
export const interactive = () => process.stdin.isTTY === true && process.stderr.isTTY === true;

/** What an MRTR retry sends: the answers and the server's `requestState` (none on the first call). */
interface Retry {
  inputResponses?: Record<string, unknown>;
  requestState?: string;
}

/** Runs `call`; returns how the process ends. */
export async function runCall(url: string, tool: string, flags: CallFlags): Promise<Ending> {
  const client = clientFor(url);
  const tools = await client.listTools();
  const info = tools.find((t) => t.name === tool);
  if (!info) throw new CliError(`no tool named "${tool}" at ${url}; \`mcp-tasks tools\` lists them`, EXIT.usage);
  const args = buildArguments(info.inputSchema, flags.args, flags.arg);
  const json = flags.json === true;
  const interrupts = new Interrupts();
  const view = new ProgressView(tool);
  try {
    let retry: Retry = {};
    for (;;) {
      const ac = new AbortController();
      const call = startCall(client, info, args, retry, ac.signal, view);
      const r = await interrupts.race(call);
      if (r.interrupted) {
        // No task to leave running: closing the request cancels the call (C-01).
        ac.abort();
        call.catch(() => undefined);
        view.stop();
        return { stderr: `Stopped: closing the request cancelled the ${tool} call.`, exitCode: EXIT.cancelled };
      }
      const out = r.value;
      // Awaited here, so that `finally` disposes of the interrupts only once the task is followed.
      if (out.resultType === 'task') return await followTask(client, tool, out, view, interrupts, json);
      if (out.resultType === 'input_required') {
        const next = await answerRound(tool, out, view);
        if ('exitCode' in next) return next;
        retry = next;
        continue;
      }
      view.stop();
      return endingForResult(out, json);
    }
  } finally {
    interrupts.dispose();
    view.stop();
  }
}

/** Sends one `tools/call` of `info` (a retry carries `retry`), its progress on `view`. */
function startCall(
  client: TaskClient,
  info: ToolInfo,
  args: Record<string, unknown>,
  retry: Retry,
  signal: AbortSignal,
  view: ProgressView,
): Promise<CallOutcome> {
  const { inputResponses, requestState } = retry;
  view.update({ status: 'calling' });
  return client.callTool(info.name, args, {
    inputSchema: info.inputSchema,
    signal,
    ...(inputResponses ? { inputResponses } : {}),
    ...(requestState !== undefined ? { requestState } : {}),
    onProgress: (p) =>
      view.update({
        status: 'running',
        progress: p.progress,
        ...(p.total !== undefined ? { total: p.total } : {}),
        ...(p.message ? { message: p.message } : {}),
      }),
  });
}

/**
 * The server answered with a task handle: follows it to its end (questions prompted when this
 * terminal can), or to the user leaving it running, or to a question it cannot prompt.
 */
async function followTask(
  client: TaskClient,
  tool: string,
  out: Extract<CallOutcome, { resultType: 'task' }>,
  view: ProgressView,
  interrupts: Interrupts,
  json: boolean,
): Promise<Ending> {
  const taskId = out.taskId;
  view.pause();
  process.stderr.write(`Task ${taskId} (${tool}) started; Ctrl-C to cancel it or leave it running.\n`);
  const end = await follow({
    client,
    taskId,
    source: pollingSource(client, taskId, out),
    view,
    interrupts,
    onQuestion: interactive() ? 'prompt' : 'return',
  });
  if (end.kind === 'done') return endingForTask(end.task, json);
  if (end.kind === 'detached')
    return {
      stdout: taskId,
      stderr: `Left task ${taskId} running. Follow it with: mcp-tasks watch ${taskId}`,
      exitCode: EXIT.detached,
    };
  const questions = describeInputRequests(end.task.inputRequests ?? {}).map((q) => `  ${q}`);
  return {
    stdout: taskId,
    stderr: [
      `Task ${taskId} waits for an answer:`,
      ...questions,
      `Answer it from a terminal with: mcp-tasks watch ${taskId}`,
    ].join('\n'),
    exitCode: EXIT.needsInput,
  };
}

/**
 * MRTR (a tool that runs without a task asks first): prompts the answers.
 * @returns what to retry with, or how the process ends (no terminal to prompt in, or the user
 * left the prompt).
 */
async function answerRound(
  tool: string,
  out: Extract<CallOutcome, { resultType: 'input_required' }>,
  view: ProgressView,
): Promise<Retry | Ending> {
  view.pause();
  if (!interactive()) {
    const questions = describeInputRequests(out.inputRequests).map((q) => `  ${q}`);
    return {
      stderr: [`${tool} asks:`, ...questions, 'This terminal cannot prompt (stdin is not a TTY).'].join('\n'),
      exitCode: EXIT.needsInput,
    };
  }
  let inputResponses: Record<string, unknown>;
  try {
    inputResponses = await answerInputRequests(out.inputRequests);
  } catch (e) {
    if (isPromptExit(e)) return { stderr: `Stopped: nothing was sent to ${tool}.`, exitCode: EXIT.cancelled };
    throw e;
  }
  return { inputResponses, requestState: out.requestState };
}
