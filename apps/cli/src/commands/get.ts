/**
 * `mcp-tasks get <taskId> [--json]`: one `tasks/get` (T-21) shown as text (status, message,
 * times, questions, result or error) or, with `--json`, the raw `DetailedTask`. The exit code
 * follows the task, as the help's exit codes say, so a script can test it: `1` failed (or
 * completed with an error result), `3` cancelled, `0` otherwise (completed, or still going).
 */
import { clientFor, EXIT } from '../context.js';
import { taskText, type Ending } from '../render.js';

/** The exit code of `get` for a task of this status (and result). */
export function getExitCode(task: { status: string; result?: { isError?: boolean } | undefined }): number {
  if (task.status === 'failed') return EXIT.error;
  if (task.status === 'cancelled') return EXIT.cancelled;
  if (task.status === 'completed' && task.result?.isError === true) return EXIT.error;
  return EXIT.ok;
}

/** Runs `get`: the task on stdout, the exit code from its status. */
export async function runGet(url: string, taskId: string, flags: { json?: boolean }): Promise<Ending> {
  const task = await clientFor(url).getTask(taskId);
  return { stdout: flags.json ? JSON.stringify(task, null, 2) : taskText(task), exitCode: getExitCode(task) };
}
