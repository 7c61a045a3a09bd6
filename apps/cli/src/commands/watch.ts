/**
 * `mcp-tasks watch <taskId> [--notify] [--json]`: follows a task to its end through
 * `subscriptions/listen` with its id (T-39: a notification on every change of status), falling
 * back to `tasks/get` every `pollIntervalMs` when the server offers no stream (on a terminal, a
 * quiet stream is also topped up by `tasks/get` so the progress bar moves). Questions are
 * prompted on a terminal (and reported otherwise); `--notify` raises a desktop notification
 * (or a terminal bell) when the task ends and when it asks something. Ctrl-C offers to leave
 * the task running or to cancel it.
 */
import { isTerminalStatus, type Task } from '@mcp-tasks/client';
import { clientFor, EXIT } from '../context.js';
import { follow } from '../follow.js';
import { Interrupts } from '../interrupt.js';
import { notifyPerson } from '../notify.js';
import { ProgressView } from '../progress.js';
import { endingForTask, resultText, type Ending } from '../render.js';
import { getTaskRetrying, listenSource } from '../sources.js';
import { interactive } from './call.js';

export interface WatchFlags {
  notify?: boolean;
  json?: boolean;
}

/** The notification for a finished task: title with its status, message with its result or reason. */
function finishedNotice(task: Task): [string, string] {
  const what =
    task.status === 'completed'
      ? resultText(task.result).split('\n')[0]!
      : task.status === 'failed'
        ? (task.error?.message ?? task.statusMessage ?? 'failed')
        : (task.statusMessage ?? 'cancelled');
  return [`mcp-tasks: task ${task.status}`, `${what} (task ${task.taskId})`];
}

export async function runWatch(url: string, taskId: string, flags: WatchFlags): Promise<Ending> {
  const client = clientFor(url);
  const first = await getTaskRetrying(client, taskId); // an unknown id fails here, clearly (T-33)
  let task = first;
  if (!isTerminalStatus(first.status)) {
    process.stderr.write(`Watching task ${taskId} (live updates; Ctrl-C to leave it or cancel it).\n`);
    const view = new ProgressView('task');
    view.update({ status: first.status, ...(first.statusMessage ? { message: first.statusMessage } : {}) });
    const interrupts = new Interrupts();
    try {
      const source = listenSource(
        client,
        taskId,
        (reason) => {
          view.pause();
          process.stderr.write(`No live stream (${reason}); polling every ${first.pollIntervalMs ?? 1000} ms.\n`);
          view.resume();
        },
        process.stderr.isTTY === true,
      );
      const end = await follow({
        client,
        taskId,
        source,
        view,
        interrupts,
        onQuestion: interactive() ? 'prompt' : 'report',
        ...(flags.notify
          ? {
              onInputRequired: async () =>
                void (await notifyPerson('mcp-tasks: a task needs your answer', `Task ${taskId} asks a question`)),
            }
          : {}),
      });
      if (end.kind === 'detached')
        return { stdout: taskId, stderr: `Stopped watching; task ${taskId} keeps running.`, exitCode: EXIT.detached };
      if (end.kind !== 'done') throw new Error('unreachable: watch never returns on a question');
      task = end.task;
    } finally {
      interrupts.dispose();
    }
  }
  if (flags.notify) {
    const [title, message] = finishedNotice(task);
    const how = await notifyPerson(title, message);
    if (how === 'bell') process.stderr.write('(no desktop notifications here: rang the terminal bell)\n');
  }
  return endingForTask(task, flags.json === true);
}
