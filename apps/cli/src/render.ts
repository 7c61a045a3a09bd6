/**
 * Text for people: a tool result (D11: `structuredContent.summary` when the tool gave one, else
 * the text of `content`), a task's state for `get`, and the way a finished task ends the
 * process (what is printed, the exit code). `--json` callers print the raw objects instead.
 */
import type { CallToolResult, Task } from '@mcp-tasks/client';
import { EXIT } from './context.js';
import { describeInputRequests } from './elicit.js';

/** A result as text: `structuredContent.summary`, else the `content` texts, else the structured JSON. */
export function resultText(result: CallToolResult | undefined): string {
  if (!result) return '(no result)';
  const sc = result.structuredContent;
  if (sc && typeof sc.summary === 'string') return sc.summary;
  const parts = (result.content ?? []).map((c) => {
    if (c.type === 'text' && typeof c.text === 'string') return c.text;
    if (c.type === 'resource_link' || c.type === 'resource') {
      const uri = (c as { uri?: unknown }).uri ?? (c as { resource?: { uri?: unknown } }).resource?.uri;
      return `[${c.type}: ${typeof uri === 'string' ? uri : ''}]`;
    }
    return `[${c.type}${typeof c.mimeType === 'string' ? `: ${c.mimeType}` : ''}]`;
  });
  if (parts.length) return parts.join('\n');
  if (sc) return JSON.stringify(sc, null, 2);
  return '(empty result)';
}

/** How a finished call or task leaves the process. */
export interface Ending {
  /** Printed on stdout (the result), or undefined. */
  stdout?: string;
  /** Printed on stderr (why it did not succeed), or undefined. */
  stderr?: string;
  exitCode: number;
}

/** The ending of a tool result that arrived without a task (synchronous call). */
export function endingForResult(result: CallToolResult, json: boolean): Ending {
  const text = json ? JSON.stringify(result, null, 2) : resultText(result);
  return result.isError
    ? { ...(json ? { stdout: text } : { stderr: `The tool reported an error:\n${text}` }), exitCode: EXIT.error }
    : { stdout: text, exitCode: EXIT.ok };
}

/** The ending of a task in a terminal status (T-13): its result, its error, or that it was cancelled. */
export function endingForTask(task: Task, json: boolean): Ending {
  if (task.status === 'completed') return endingForResult(task.result ?? {}, json);
  if (json)
    return {
      stdout: JSON.stringify(task, null, 2),
      exitCode: task.status === 'cancelled' ? EXIT.cancelled : EXIT.error,
    };
  if (task.status === 'failed') {
    const e = task.error;
    return {
      stderr: `Task ${task.taskId} failed: ${e ? `${e.message} (${e.code})` : (task.statusMessage ?? 'no reason given')}`,
      exitCode: EXIT.error,
    };
  }
  return {
    stderr: `Task ${task.taskId} was cancelled${task.statusMessage ? `: ${task.statusMessage}` : ''}`,
    exitCode: EXIT.cancelled,
  };
}

const ago = (iso: string) => {
  const s = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000));
  return s < 120 ? `${s} s ago` : s < 7200 ? `${Math.round(s / 60)} min ago` : `${Math.round(s / 3600)} h ago`;
};

/** A task for `get`: status line, message, times, and its questions, result or error. */
export function taskText(task: Task): string {
  const lines = [`${task.taskId}  ${task.status}`];
  if (task.statusMessage) lines.push(`  message:  ${task.statusMessage}`);
  lines.push(
    `  created:  ${task.createdAt} (${ago(task.createdAt)})`,
    `  updated:  ${task.lastUpdatedAt} (${ago(task.lastUpdatedAt)})`,
  );
  if (task.ttlMs !== null && task.ttlMs !== undefined)
    lines.push(`  expires:  ${new Date(Date.parse(task.createdAt) + task.ttlMs).toISOString()}`);
  if (task.inputRequests) for (const q of describeInputRequests(task.inputRequests)) lines.push(`  asks:     ${q}`);
  if (task.status === 'completed')
    lines.push(
      `  result${task.result?.isError ? ' (error)' : ''}:`,
      ...resultText(task.result)
        .split('\n')
        .map((l) => `    ${l}`),
    );
  if (task.status === 'failed' && task.error) lines.push(`  error:    ${task.error.message} (${task.error.code})`);
  return lines.join('\n');
}
