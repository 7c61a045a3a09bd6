/**
 * `mcp-tasks get <taskId> [--json]`: one `tasks/get` (T-21) shown as text (status, message,
 * times, questions, result or error) or, with `--json`, the raw `DetailedTask`.
 */
import { clientFor, EXIT } from '../context.js';
import { taskText, type Ending } from '../render.js';

export async function runGet(url: string, taskId: string, flags: { json?: boolean }): Promise<Ending> {
  const task = await clientFor(url).getTask(taskId);
  return { stdout: flags.json ? JSON.stringify(task, null, 2) : taskText(task), exitCode: EXIT.ok };
}
