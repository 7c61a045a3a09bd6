/**
 * `@mcp-tasks/tools/internal`: what the gateway and the worker use to assemble the tools at
 * start, not part of the tool author's kit (index.ts): the registries (registry.ts:
 * `ToolRegistry`, `createRegistry`, `createPromptRegistry`, `createResourceRegistry`,
 * `PromptRegistry`, `ResourceRegistry`), module loading and clash checks (modules.ts:
 * `loadToolModules`, `assertNoClashes`, `ToolModuleError`), and the `x-mcp-header` scan
 * (x-mcp-header.ts, H-18).
 */
export * from './registry.js';
export * from './modules.js';
export { PromptRegistry } from './prompts.js';
export { ResourceRegistry } from './resources.js';
export * from './x-mcp-header.js';
