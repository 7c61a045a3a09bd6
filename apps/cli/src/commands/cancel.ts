/**
 * `mcp-tasks cancel <taskId> [--json]`: `tasks/cancel` (T-36), then `tasks/get` until the task
 * is terminal (at most 5 s: cancelling is cooperative, the tool stops at its next check) and
 * says how it ended. Exit 0 once the server acknowledged the cancel.
 */
import { isTerminalStatus, type Task } from '@mcp-tasks/client';
import { clientFor, EXIT } from '../context.js';
import type { Ending } from '../render.js';

const WAIT_MS = 5000;

export async function runCancel(url: string, taskId: string, flags: { json?: boolean }): Promise<Ending> {
  const client = clientFor(url);
  await client.cancelTask(taskId);
  const end = Date.now() + WAIT_MS;
  let task: Task = await client.getTask(taskId);
  while (!isTerminalStatus(task.status) && Date.now() < end) {
    await new Promise((r) => setTimeout(r, Math.min(250, task.pollIntervalMs ?? 250)));
    task = await client.getTask(taskId);
  }
  if (flags.json) return { stdout: JSON.stringify(task, null, 2), exitCode: EXIT.ok };
  const text =
    task.status === 'cancelled'
      ? `Task ${taskId} cancelled.`
      : isTerminalStatus(task.status)
        ? `Task ${taskId} had already ended (${task.status}); nothing to cancel.`
        : `Cancel requested; task ${taskId} is still ${task.status} (the tool stops at its next check).`;
  return { stdout: text, exitCode: EXIT.ok };
}
