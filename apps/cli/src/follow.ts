/**
 * Follows one task to its end (T-23, T-27): shows each snapshot, answers its questions with
 * `tasks/update` (each key once, T-34), and handles Ctrl-C (leave it running, cancel it with
 * `tasks/cancel`, or go on). Shared by `call` (snapshots from polling, for the progress bar)
 * and `watch` (snapshots from a listen stream).
 */
import { ErrorCode } from '@mcp-tasks/errors';
import { isTerminalStatus, RpcError, type InputRequest, type Task, type TaskClient } from '@mcp-tasks/client';
import { answerInputRequests, declineAll, describeInputRequests, isPromptExit } from './elicit.js';
import { whatNow, type Interrupts } from './interrupt.js';
import type { ProgressView } from './progress.js';
import type { Source } from './sources.js';

export interface FollowOptions {
  client: TaskClient;
  taskId: string;
  source: Source;
  view: ProgressView;
  interrupts: Interrupts;
  /**
   * What to do when the task asks something: `prompt` in this terminal, `return` (the caller
   * ends, the task waits), or `report` the question on stderr and keep following.
   */
  onQuestion: 'prompt' | 'return' | 'report';
  /** Called once for each new set of questions, before prompting (e.g. a desktop notification). */
  onInputRequired?: (task: Task) => void | Promise<void>;
}

export type FollowResult = { kind: 'done'; task: Task } | { kind: 'detached' } | { kind: 'needsInput'; task: Task };

type Asked = { responses: Record<string, unknown> } | { choice: 'detach' | 'cancel' };

/** Prompts for `open`; on Ctrl-C offers the menu (decline, cancel, leave running, back). */
async function askOrChoose(open: Record<string, InputRequest>, taskId: string): Promise<Asked> {
  for (;;) {
    try {
      return { responses: await answerInputRequests(open) };
    } catch (e) {
      if (!isPromptExit(e)) throw e;
      const choice = await whatNow(taskId, true);
      if (choice === 'continue') continue;
      if (choice === 'decline') return { responses: declineAll(open) };
      return { choice };
    }
  }
}

export async function follow(o: FollowOptions): Promise<FollowResult> {
  const { client, taskId, source, view, interrupts } = o;
  const handled = new Set<string>();
  let pending: Promise<Task> | undefined;
  const cancel = async () => {
    await client.cancelTask(taskId);
    process.stderr.write(`Cancelling task ${taskId}…\n`);
    source.soon();
  };
  try {
    for (;;) {
      pending ??= source.next();
      const r = await interrupts.race(pending);
      if (r.interrupted) {
        view.pause();
        const choice = await whatNow(taskId, false);
        if (choice === 'detach') return { kind: 'detached' };
        if (choice === 'cancel') await cancel();
        view.resume();
        continue;
      }
      pending = undefined;
      const task = r.value;
      view.update({ status: task.status, ...(task.statusMessage ? { message: task.statusMessage } : {}) });
      if (isTerminalStatus(task.status)) {
        view.stop();
        return { kind: 'done', task };
      }
      if (task.status !== 'input_required' || !task.inputRequests) continue;
      const open = Object.fromEntries(Object.entries(task.inputRequests).filter(([k]) => !handled.has(k)));
      if (Object.keys(open).length === 0) continue;
      view.pause();
      await o.onInputRequired?.(task);
      if (o.onQuestion === 'return') return { kind: 'needsInput', task };
      if (o.onQuestion === 'report') {
        for (const q of describeInputRequests(open)) process.stderr.write(`Task ${taskId} asks: ${q}\n`);
        for (const k of Object.keys(open)) handled.add(k);
        view.resume();
        continue;
      }
      const asked = await askOrChoose(open, taskId);
      if ('choice' in asked) {
        if (asked.choice === 'detach') return { kind: 'detached' };
        for (const k of Object.keys(open)) handled.add(k);
        await cancel();
        continue;
      }
      try {
        await client.updateTask(taskId, asked.responses);
        for (const k of Object.keys(open)) handled.add(k);
      } catch (e) {
        // Refused answers leave the question open (-32602): say why and ask again on the next snapshot.
        if (!(e instanceof RpcError) || e.code !== ErrorCode.InvalidParams) throw e;
        process.stderr.write(`The server refused the answer: ${e.message}\n`);
      }
      source.soon();
    }
  } finally {
    source.close();
    view.stop();
  }
}
