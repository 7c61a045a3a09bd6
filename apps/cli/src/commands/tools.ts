/**
 * `mcp-tasks tools [tool] [--json]`: the server's tools (`tools/list`) with their task support,
 * or one tool's parameters (what `call --arg` accepts).
 *
 * Task support: the 2026-07-28 wire has no per-tool field for it (the server decides per
 * request, T-02, and the SDK removes the 2025 `execution.taskSupport` from 2026 answers), so it
 * is read from `execution.taskSupport` or `_meta["mcp-tasks/taskSupport"]` when a server sends
 * either, and shown as `?` otherwise.
 */
import type { ToolInfo } from '@mcp-tasks/client';
import { describeParameters } from '../args.js';
import { clientFor, CliError, EXIT } from '../context.js';
import type { Ending } from '../render.js';

/** `forbidden`, `optional`, `required`, or undefined when the server does not say. */
export function taskSupportOf(t: ToolInfo): string | undefined {
  const v = t.execution?.taskSupport ?? t._meta?.['mcp-tasks/taskSupport'];
  return typeof v === 'string' ? v : undefined;
}

/** The first sentence of a description, on one line, cut to `max` characters. */
function firstSentence(s: string | undefined, max: number): string {
  const one = (s ?? '').split(/(?<=\.)\s/)[0]!.replace(/\s+/g, ' ');
  return one.length > max ? `${one.slice(0, Math.max(10, max - 1))}…` : one;
}

export async function runTools(url: string, name: string | undefined, flags: { json?: boolean }): Promise<Ending> {
  const tools = await clientFor(url).listTools();
  if (name !== undefined) {
    const t = tools.find((x) => x.name === name);
    if (!t) throw new CliError(`no tool named "${name}" at ${url}`, EXIT.usage);
    if (flags.json) return { stdout: JSON.stringify(t, null, 2), exitCode: EXIT.ok };
    const lines = [
      `${t.name}${t.title ? ` — ${t.title}` : ''}`,
      `  tasks: ${taskSupportOf(t) ?? '? (the server decides per call)'}`,
    ];
    if (t.description) lines.push(`  ${t.description}`);
    const params = describeParameters(t.inputSchema);
    lines.push('  parameters:', ...(params.length ? params.map((p) => `    ${p}`) : ['    (none)']));
    return { stdout: lines.join('\n'), exitCode: EXIT.ok };
  }
  if (flags.json) return { stdout: JSON.stringify(tools, null, 2), exitCode: EXIT.ok };
  const width = Math.max(4, ...tools.map((t) => t.name.length));
  const rows = tools.map(
    (t) =>
      `${t.name.padEnd(width)}  ${(taskSupportOf(t) ?? '?').padEnd(9)}  ${firstSentence(t.description ?? t.title, (process.stdout.columns ?? 120) - width - 13)}`,
  );
  return {
    stdout: [`${'TOOL'.padEnd(width)}  ${'TASKS'.padEnd(9)}  DESCRIPTION`, ...rows].join('\n'),
    exitCode: EXIT.ok,
  };
}
