/**
 * `@mcp-tasks/tools`, what a tool module imports (docs/writing-tools.md): the kit (kit.ts:
 * `defineTool`, results, input requests, `ToolContext`), prompts (`definePrompt`), resources
 * (`defineResource`, `defineResourceTemplate`), hand-over and retries (durable.ts), `testContext` for a tool's own tests, the
 * `ToolsetModule` shape a module exports, and zod's `z` (re-exported so a module's schemas use
 * the service's own zod).
 *
 * The service's own parts (registries, module loading, `x-mcp-header` scanning) are in
 * `@mcp-tasks/tools/internal` (internal.ts); a tool module has no use for them.
 */
import { z } from 'zod';

export { z };
export * from './kit.js';
export * from './durable.js';
export * from './checkpoint-json.js';
export type { ToolsetModule } from './modules.js';
export {
  definePrompt,
  type PromptArgumentSpec,
  type PromptContext,
  type PromptDefinition,
  type PromptMessage,
  type PromptResult,
} from './prompts.js';
export {
  defineResource,
  defineResourceTemplate,
  type ResourceContents,
  type ResourceContext,
  type ResourceDefinition,
  type ResourceTemplateDefinition,
} from './resources.js';
export * from './test-context.js';
