/**
 * `tools/list` for a session with 2025-11-25 tasks (LG-15): each tool carries
 * `execution.taskSupport` (`forbidden` | `optional` | `required`), saying what legacy-tasks.ts
 * really serves — a worker tool that may become a task keeps its own `taskSupport`; a tool run in
 * the gateway, or one that asks before its task exists, is `forbidden` (it is only ever served as a
 * plain call). Other sessions and the 2026-07-28 lane get the registry's list unchanged.
 */
import type { ToolDefinition } from '@mcp-tasks/tools';

/** The `taskSupport` a 2025-11-25 client sees for `tool` (LG-15). */
export function legacyTaskSupport(tool: ToolDefinition): 'forbidden' | 'optional' | 'required' {
  if (tool.runsIn === 'gateway' || tool.preTask) return 'forbidden';
  return tool.taskSupport;
}

/**
 * The registry's `tools/list` entries with `execution: {taskSupport}` added (LG-15); `byName`
 * finds each entry's tool. Entries are copied; the registry's cached list is not changed.
 */
export function withLegacyExecution(
  entries: readonly Record<string, unknown>[],
  byName: (name: string) => ToolDefinition | undefined,
): Record<string, unknown>[] {
  return entries.map((e) => {
    const tool = byName(String(e.name));
    return tool ? { ...e, execution: { taskSupport: legacyTaskSupport(tool) } } : e;
  });
}
