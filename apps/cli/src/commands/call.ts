/**
 * `mcp-tasks call <tool> [--args JSON] [--arg k=v …] [--json]`: calls a tool the way a
 * task-aware client does (the Tasks extension and form elicitation declared, T-01). The server
 * decides (T-02, D1): a task handle → followed with `tasks/get` at `pollIntervalMs` under a
 * progress bar, its questions prompted and sent with `tasks/update`; a tool that runs without a
 * task (`taskSupport: 'forbidden'`) → answered on the request itself, with
 * `notifications/progress` on the bar and MRTR rounds (`input_required` + `requestState`)
 * prompted and retried. Ctrl-C on a task asks whether to cancel it or leave it running.
 */
import type { CallOutcome } from '@mcp-tasks/client';
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
    let inputResponses: Record<string, unknown> | undefined;
    let requestState: string | undefined;
    for (;;) {
      const ac = new AbortController();
      view.update({ status: 'calling' });
      const call: Promise<CallOutcome> = client.callTool(tool, args, {
        inputSchema: info.inputSchema,
        signal: ac.signal,
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
      const r = await interrupts.race(call);
      if (r.interrupted) {
        // No task to leave running: closing the request cancels the call (C-01).
        ac.abort();
        call.catch(() => undefined);
        view.stop();
        return { stderr: `Stopped: closing the request cancelled the ${tool} call.`, exitCode: EXIT.cancelled };
      }
      const out = r.value;
      if (out.resultType === 'task') {
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
      if (out.resultType === 'input_required') {
        // MRTR (a tool that runs without a task asks first): answer, then retry with requestState.
        view.pause();
        if (!interactive()) {
          const questions = describeInputRequests(out.inputRequests).map((q) => `  ${q}`);
          return {
            stderr: [`${tool} asks:`, ...questions, 'This terminal cannot prompt (stdin is not a TTY).'].join('\n'),
            exitCode: EXIT.needsInput,
          };
        }
        try {
          inputResponses = await answerInputRequests(out.inputRequests);
        } catch (e) {
          if (isPromptExit(e)) return { stderr: `Stopped: nothing was sent to ${tool}.`, exitCode: EXIT.cancelled };
          throw e;
        }
        requestState = out.requestState;
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
