/**
 * The tasks extension of MCP 2026-07-28: its capability name, and whether a request declared it
 * (only a modern request can: `_meta["io.modelcontextprotocol/clientCapabilities"].extensions`
 * names it; a legacy session never does). Decided once, here, for the classifier and the
 * server factory.
 */
export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';

/** True when `era` is modern and the client capabilities `caps` declare the tasks extension. */
export function declaresTasksExtension(era: 'legacy' | 'modern', caps: Record<string, unknown>): boolean {
  const ext = caps.extensions;
  return (
    era === 'modern' &&
    typeof ext === 'object' &&
    ext !== null &&
    !Array.isArray(ext) &&
    (ext as Record<string, unknown>)[TASKS_EXTENSION] !== undefined
  );
}
