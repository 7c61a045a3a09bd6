/**
 * Tool kit and registry. `createRegistry(toolsets)` returns the tools a deployment enables
 * (`MCP_TOOLSETS`), in a fixed order (tools/list is deterministic, K-01).
 */
import type { Toolset } from '@mcp-tasks/config';
import { z } from 'zod';
import type { ToolDefinition } from './kit.js';
import { demoTools } from './toolsets/demo.js';
import { conformanceTools } from './toolsets/conformance.js';
import { testingTools } from './toolsets/testing.js';

export * from './kit.js';

const SETS: Record<Toolset, ToolDefinition[]> = {
  demo: demoTools as unknown as ToolDefinition[],
  conformance: conformanceTools as unknown as ToolDefinition[],
  testing: testingTools as unknown as ToolDefinition[],
};

/** The enabled tools by name. */
export class ToolRegistry {
  private readonly byName = new Map<string, ToolDefinition>();
  private listCache: Record<string, unknown>[] | undefined;

  constructor(tools: ToolDefinition[]) {
    for (const t of tools) {
      if (this.byName.has(t.name)) throw new Error(`duplicate tool name: ${t.name}`);
      this.byName.set(t.name, t);
    }
  }

  get(name: string): ToolDefinition | undefined {
    return this.byName.get(name);
  }

  get size(): number {
    return this.byName.size;
  }

  /** `tools/list` entries (name, title, description, JSON Schema 2020-12 `inputSchema`); computed once. */
  list(): Record<string, unknown>[] {
    this.listCache ??= [...this.byName.values()].map((t) => {
      const entry: Record<string, unknown> = {
        name: t.name,
        description: t.description,
        // `io: 'input'`: describes what is accepted (unknown keys are ignored, not refused).
        inputSchema: z.toJSONSchema(t.inputSchema, { target: 'draft-2020-12', io: 'input' }),
      };
      if (t.title) entry.title = t.title;
      return entry;
    });
    return this.listCache;
  }
}

/** Builds the registry for the given tool sets, plus `builtins` (listed first). */
export function createRegistry(toolsets: readonly Toolset[], builtins: readonly ToolDefinition[] = []): ToolRegistry {
  return new ToolRegistry([...builtins, ...toolsets.flatMap((s): ToolDefinition[] => SETS[s])]);
}
