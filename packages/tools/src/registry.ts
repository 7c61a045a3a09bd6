/**
 * The registries the service builds at start: the built-in tool sets (`MCP_TOOLSETS`) and the
 * loaded modules (`MCP_TOOL_MODULES`) assembled into the tools (`ToolRegistry`), prompts and
 * resources, each in a fixed order (lists are deterministic, K-01); a name defined twice anywhere
 * is refused at start (`assertNoClashes`). Part of the service's entry (`@mcp-tasks/tools/internal`).
 */
import { MAX_TOOL_TIMEOUT_MS, type Toolset } from '@mcp-tasks/config';
import { z } from 'zod';
import type { ToolDefinition } from './kit.js';
import { assertNoClashes, type LoadedToolModule, type ToolSource, type ToolsetModule } from './modules.js';
import { PromptRegistry } from './prompts.js';
import { ResourceRegistry } from './resources.js';
import { scanXMcpHeaderDeclarations, type XMcpHeaderDeclaration } from './x-mcp-header.js';
import { demoToolset, type DemoSettings } from './toolsets/demo.js';
import { conformanceToolset } from './toolsets/conformance.js';
import { testingToolset, type TestingSettings } from './toolsets/testing.js';

/**
 * What the built-in tool sets take from configuration, given when they are built (a tool's
 * context carries none of it): `demo.researchPhaseMs` (DEMO_RESEARCH_PHASE_MS) and
 * `testing.sideEffectDir` (TESTING_SIDE_EFFECT_DIR). The service passes its `Config`.
 */
export interface ToolsetSettings {
  demo: DemoSettings;
  testing: TestingSettings;
}

const SETS: Record<Toolset, (settings: ToolsetSettings) => ToolsetModule> = {
  demo: (s) => demoToolset(s.demo),
  conformance: () => conformanceToolset,
  testing: (s) => testingToolset(s.testing),
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
   * @throws Error (at start, never on a request) on a duplicate name, a `timeoutMs` that is not an
   * integer from 1 to MAX_TOOL_TIMEOUT_MS, an `inputJsonSchema` whose
   * root is not `type: "object"`, or an invalid `x-mcp-header` declaration (H-18; the message
   * names the tool and the rule).
   */
  constructor(tools: ToolDefinition[]) {
    for (const t of tools) {
      if (this.byName.has(t.name)) throw new Error(`duplicate tool name: ${t.name}`);
      if (
        t.timeoutMs !== undefined &&
        !(Number.isInteger(t.timeoutMs) && t.timeoutMs >= 1 && t.timeoutMs <= MAX_TOOL_TIMEOUT_MS)
      )
        throw new Error(`tool ${t.name}: timeoutMs must be an integer number of ms from 1 to ${MAX_TOOL_TIMEOUT_MS}`);
      this.byName.set(t.name, t);
      // `io: 'input'`: describes what is accepted (unknown keys are ignored, not refused).
      const schema = t.inputJsonSchema ?? z.toJSONSchema(t.inputSchema, { target: 'draft-2020-12', io: 'input' });
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

  /** Names of the tools that run on workers (not `runsIn: 'gateway'`), in list order. */
  workerToolNames(): string[] {
    return [...this.byName.values()].filter((t) => t.runsIn !== 'gateway').map((t) => t.name);
  }

  get size(): number {
    return this.byName.size;
  }

  /** The tool's `x-mcp-header` declarations (empty when none, or for an unknown tool). */
  headerDeclarations(name: string): readonly XMcpHeaderDeclaration[] {
    return this.headers.get(name) ?? [];
  }

  /**
   * `tools/list` entries (name, title, description, JSON Schema 2020-12 `inputSchema`, and
   * `_meta["mcp-tasks/taskSupport"]`: `forbidden` | `optional` | `required`, because a 2026-07-28
   * tool has no field for it (T-02) and clients such as `mcp-tasks tools` want to show it);
   * computed once.
   */
  list(): Record<string, unknown>[] {
    this.listCache ??= [...this.byName.values()].map((t) => {
      const entry: Record<string, unknown> = {
        name: t.name,
        description: t.description,
        inputSchema: this.schemas.get(t.name),
        _meta: { 'mcp-tasks/taskSupport': t.taskSupport },
      };
      if (t.title) entry.title = t.title;
      return entry;
    });
    return this.listCache;
  }
}

/** The built-in tool sets and the loaded modules, in order, each with a label for messages. */
function sources(
  toolsets: readonly Toolset[],
  settings: ToolsetSettings,
  modules: readonly LoadedToolModule[],
  builtins: readonly ToolDefinition[] = [],
): ToolSource[] {
  return [
    ...(builtins.length ? [{ label: 'the service (built-in)', toolset: { tools: builtins } }] : []),
    ...toolsets.map((s) => ({ label: `tool set "${s}" (MCP_TOOLSETS)`, toolset: SETS[s](settings) })),
    ...modules.map((m) => ({ label: `module "${m.spec}" (MCP_TOOL_MODULES)`, toolset: m.toolset })),
  ];
}

/**
 * Builds the registry: `builtins` first, then the tool sets, then the modules' tools.
 * @throws ToolModuleError when a tool name is defined twice (naming both sources); Error on an
 * invalid schema or `x-mcp-header` declaration (ToolRegistry).
 */
export function createRegistry(
  toolsets: readonly Toolset[],
  settings: ToolsetSettings,
  builtins: readonly ToolDefinition[] = [],
  modules: readonly LoadedToolModule[] = [],
): ToolRegistry {
  const all = sources(toolsets, settings, modules, builtins);
  assertNoClashes(all);
  return new ToolRegistry(all.flatMap((s) => s.toolset.tools));
}

/** The prompts of the given tool sets and modules. @throws ToolModuleError on a name defined twice. */
export function createPromptRegistry(
  toolsets: readonly Toolset[],
  settings: ToolsetSettings,
  modules: readonly LoadedToolModule[] = [],
): PromptRegistry {
  const all = sources(toolsets, settings, modules);
  assertNoClashes(all);
  return new PromptRegistry(all.flatMap((s) => s.toolset.prompts ?? []));
}

/** The resources and resource templates of the given tool sets and modules. @throws ToolModuleError on a URI or name defined twice. */
export function createResourceRegistry(
  toolsets: readonly Toolset[],
  settings: ToolsetSettings,
  modules: readonly LoadedToolModule[] = [],
): ResourceRegistry {
  const all = sources(toolsets, settings, modules);
  assertNoClashes(all);
  return new ResourceRegistry(
    all.flatMap((s) => s.toolset.resources ?? []),
    all.flatMap((s) => s.toolset.resourceTemplates ?? []),
  );
}
