/**
 * Tool kit and registries. A tool set module (`toolsets/*.ts`, a `ToolsetModule`) contributes
 * tools and, optionally, prompts and resources; `MCP_TOOLSETS` enables tool sets by name.
 * `createRegistry(toolsets)` returns the tools, `createPromptRegistry` / `createResourceRegistry`
 * the prompts and resources, each in a fixed order (lists are deterministic, K-01).
 */
import type { Toolset } from '@mcp-tasks/config';
import { z } from 'zod';
import type { ToolDefinition } from './kit.js';
import { PromptRegistry, type PromptDefinition } from './prompts.js';
import { ResourceRegistry, type ResourceDefinition, type ResourceTemplateDefinition } from './resources.js';
import { scanXMcpHeaderDeclarations, type XMcpHeaderDeclaration } from './x-mcp-header.js';
import { demoTools } from './toolsets/demo.js';
import { conformanceToolset } from './toolsets/conformance.js';
import { testingTools } from './toolsets/testing.js';

export * from './kit.js';
export * from './prompts.js';
export * from './resources.js';
export * from './x-mcp-header.js';

/** What one tool set contributes. Prompts and resources are served by the gateway. */
export interface ToolsetModule {
  tools: readonly ToolDefinition[];
  prompts?: readonly PromptDefinition[];
  resources?: readonly ResourceDefinition[];
  resourceTemplates?: readonly ResourceTemplateDefinition[];
}

const SETS: Record<Toolset, ToolsetModule> = {
  demo: { tools: demoTools as unknown as ToolDefinition[] },
  conformance: conformanceToolset,
  testing: { tools: testingTools as unknown as ToolDefinition[] },
};

/**
 * The enabled tools by name, in a fixed order (builtins first, then each tool set in
 * `MCP_TOOLSETS` order, each in its module's order): `tools/list` is the same on every call and
 * every replica (K-01).
 */
export class ToolRegistry {
  private readonly byName = new Map<string, ToolDefinition>();
  private readonly schemas = new Map<string, Record<string, unknown>>();
  private readonly headers = new Map<string, XMcpHeaderDeclaration[]>();
  private listCache: Record<string, unknown>[] | undefined;

  /**
   * @throws Error (at start, never on a request) on a duplicate name, an `inputJsonSchema` whose
   * root is not `type: "object"`, or an invalid `x-mcp-header` declaration (H-18; the message
   * names the tool and the rule).
   */
  constructor(tools: ToolDefinition[]) {
    for (const t of tools) {
      if (this.byName.has(t.name)) throw new Error(`duplicate tool name: ${t.name}`);
      this.byName.set(t.name, t);
      // `io: 'input'`: describes what is accepted (unknown keys are ignored, not refused).
      const schema = t.inputJsonSchema ?? (z.toJSONSchema(t.inputSchema, { target: 'draft-2020-12', io: 'input' }) as Record<string, unknown>);
      if (schema.type !== 'object') throw new Error(`tool ${t.name}: inputSchema must have type "object" at its root`);
      const scan = scanXMcpHeaderDeclarations(schema);
      if (!scan.valid) throw new Error(`tool ${t.name}: invalid x-mcp-header declaration: ${scan.reason}`);
      this.schemas.set(t.name, schema);
      this.headers.set(t.name, scan.declarations);
    }
  }

  get(name: string): ToolDefinition | undefined {
    return this.byName.get(name);
  }

  get size(): number {
    return this.byName.size;
  }

  /** The tool's `x-mcp-header` declarations (empty when none, or for an unknown tool). */
  headerDeclarations(name: string): readonly XMcpHeaderDeclaration[] {
    return this.headers.get(name) ?? [];
  }

  /** `tools/list` entries (name, title, description, JSON Schema 2020-12 `inputSchema`); computed once. */
  list(): Record<string, unknown>[] {
    this.listCache ??= [...this.byName.values()].map((t) => {
      const entry: Record<string, unknown> = { name: t.name, description: t.description, inputSchema: this.schemas.get(t.name) };
      if (t.title) entry.title = t.title;
      return entry;
    });
    return this.listCache;
  }
}

/** Builds the registry for the given tool sets, plus `builtins` (listed first). */
export function createRegistry(toolsets: readonly Toolset[], builtins: readonly ToolDefinition[] = []): ToolRegistry {
  return new ToolRegistry([...builtins, ...toolsets.flatMap((s) => SETS[s].tools)]);
}

/** The prompts of the given tool sets. */
export function createPromptRegistry(toolsets: readonly Toolset[]): PromptRegistry {
  return new PromptRegistry(toolsets.flatMap((s) => SETS[s].prompts ?? []));
}

/** The resources and resource templates of the given tool sets. */
export function createResourceRegistry(toolsets: readonly Toolset[]): ResourceRegistry {
  return new ResourceRegistry(
    toolsets.flatMap((s) => SETS[s].resources ?? []),
    toolsets.flatMap((s) => SETS[s].resourceTemplates ?? []),
  );
}
