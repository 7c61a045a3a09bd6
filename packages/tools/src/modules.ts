/**
 * Your own tools, outside the repository: `MCP_TOOL_MODULES` names ES modules
 * that gateways and workers import at start, next to the built-in tool sets.
 *
 * A module's default export is either an array of tools (`defineTool`) or a tool set object
 * `{ tools, prompts?, resources?, resourceTemplates? }` (`ToolsetModule`). It imports the kit as
 * `@mcp-tasks/tools` (which re-exports zod's `z`, so schemas and the service share one zod).
 *
 * How a name in MCP_TOOL_MODULES is found, from `cwd` (the directory the process starts in):
 *  - `file:` URL, absolute path, or a path starting with `./` or `../`: that file; a directory
 *    means its package.json entry (`exports["."]`, else `main`, else `index.js`);
 *  - anything else is a package name (or `package/subpath`), resolved like an `import` written
 *    in a file in `cwd` (Node's ESM rules, through `import-meta-resolve`): install the package
 *    where the service runs.
 * Every failure is a `ToolModuleError` with one line naming the module and what to do; the
 * processes print it and exit 1.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { isAbsolute, join, resolve as resolvePath } from 'node:path';
import { pathToFileURL } from 'node:url';
import { resolve as esmResolve } from 'import-meta-resolve';
import type { TaskSupport, ToolDefinition } from './kit.js';
import type { PromptDefinition } from './prompts.js';
import type { ResourceDefinition, ResourceTemplateDefinition } from './resources.js';

/** What one tool set contributes (a built-in set or a module's default export). */
export interface ToolsetModule {
  tools: readonly ToolDefinition[];
  prompts?: readonly PromptDefinition[];
  resources?: readonly ResourceDefinition[];
  resourceTemplates?: readonly ResourceTemplateDefinition[];
}

/** A module of MCP_TOOL_MODULES after loading: its name as configured, its URL, what it offers. */
export interface LoadedToolModule {
  spec: string;
  url: string;
  toolset: ToolsetModule;
}

/** A module that cannot be used; `message` is one line that names it (shown at start). */
export class ToolModuleError extends Error {
  override name = 'ToolModuleError';
}

/** Tool names as MCP recommends them (SEP-986): 1-128 of letters, digits, `_`, `-`, `.`. */
export const TOOL_NAME_PATTERN = /^[A-Za-z0-9_.-]{1,128}$/;
const TASK_SUPPORT: readonly TaskSupport[] = ['forbidden', 'optional', 'required'];

const isPathLike = (spec: string) => spec.startsWith('file:') || isAbsolute(spec) || /^\.\.?([/\\]|$)/.test(spec);

/** The entry file of the package in `dir` (package.json `exports["."]`, `main`, or index.js). */
function directoryEntry(dir: string, spec: string): string {
  const pkgPath = join(dir, 'package.json');
  if (existsSync(pkgPath)) {
    let pkg: { name?: string; exports?: unknown; main?: string };
    try {
      pkg = JSON.parse(readFileSync(pkgPath, 'utf8')) as typeof pkg;
    } catch (e) {
      throw new ToolModuleError(`MCP_TOOL_MODULES: "${spec}": cannot read ${pkgPath}: ${(e as Error).message}`);
    }
    // A package with "exports" is resolved through them, as an import of itself would be.
    if (pkg.exports !== undefined && pkg.name) return esmResolve(pkg.name, pathToFileURL(pkgPath).href);
    if (pkg.main) return pathToFileURL(resolvePath(dir, pkg.main)).href;
  }
  return pathToFileURL(join(dir, 'index.js')).href;
}

/**
 * The URL to import for one MCP_TOOL_MODULES entry.
 * @throws ToolModuleError when the file or package is not found.
 */
export function resolveToolModule(spec: string, cwd: string = process.cwd()): string {
  try {
    if (isPathLike(spec)) {
      const path = spec.startsWith('file:') ? new URL(spec).pathname : resolvePath(cwd, spec);
      if (!existsSync(path))
        throw new ToolModuleError(
          `MCP_TOOL_MODULES: "${spec}": no such file or directory (${path}; relative paths start from ${cwd})`,
        );
      return statSync(path).isDirectory() ? directoryEntry(path, spec) : pathToFileURL(path).href;
    }
    return esmResolve(spec, pathToFileURL(join(cwd, 'noop.js')).href);
  } catch (e) {
    if (e instanceof ToolModuleError) throw e;
    const why = (e as Error).message.split('\n')[0];
    const hint = isPathLike(spec) ? '' : ` (a package name is resolved from ${cwd}: install it there, or give a path)`;
    throw new ToolModuleError(`MCP_TOOL_MODULES: cannot resolve "${spec}": ${why}${hint}`);
  }
}

/** Why `t` is not a usable tool, or undefined when it is. */
function toolProblem(t: unknown): string | undefined {
  if (t === null || typeof t !== 'object') return 'is not an object (define it with defineTool)';
  const d = t as Partial<ToolDefinition> & Record<string, unknown>;
  if (typeof d.name !== 'string' || !TOOL_NAME_PATTERN.test(d.name))
    return `has an invalid name ${JSON.stringify(d.name)} (1-128 of A-Z a-z 0-9 _ - .)`;
  if (typeof d.description !== 'string' || !d.description) return 'needs a description';
  const schema = d.inputSchema as { safeParse?: unknown; _zod?: { def?: { type?: string } } } | undefined;
  if (!schema || typeof schema.safeParse !== 'function' || schema._zod?.def?.type !== 'object') {
    return 'needs inputSchema: z.object({...}) (use the `z` exported by @mcp-tasks/tools)';
  }
  if (!TASK_SUPPORT.includes(d.taskSupport as TaskSupport))
    return `needs taskSupport: ${TASK_SUPPORT.map((s) => `'${s}'`).join(', ')}`;
  if (typeof d.run !== 'function') return 'needs a run(args, ctx) function';
  if (d.runsIn !== undefined && d.runsIn !== 'gateway' && d.runsIn !== 'worker')
    return "has runsIn other than 'gateway' or 'worker'";
  return undefined;
}

/**
 * Reads a module's default export as a tool set: an array of tools, or
 * `{ tools, prompts?, resources?, resourceTemplates? }`. Checks every tool's shape.
 * @throws ToolModuleError naming the module and the first problem.
 */
export function toolsetOf(spec: string, exported: unknown): ToolsetModule {
  const shape =
    'its default export must be an array of tools (defineTool) or { tools, prompts?, resources?, resourceTemplates? }';
  let set: ToolsetModule;
  if (Array.isArray(exported)) set = { tools: exported as ToolDefinition[] };
  else if (exported && typeof exported === 'object' && Array.isArray((exported as ToolsetModule).tools))
    set = exported as ToolsetModule;
  else throw new ToolModuleError(`MCP_TOOL_MODULES: "${spec}": ${shape}`);
  for (const [key, v] of Object.entries({
    prompts: set.prompts,
    resources: set.resources,
    resourceTemplates: set.resourceTemplates,
  })) {
    if (v !== undefined && !Array.isArray(v))
      throw new ToolModuleError(`MCP_TOOL_MODULES: "${spec}": ${key} must be an array`);
  }
  set.tools.forEach((t, i) => {
    const problem = toolProblem(t);
    const label = t && typeof t.name === 'string' ? `"${t.name}"` : `#${i + 1}`;
    if (problem) throw new ToolModuleError(`MCP_TOOL_MODULES: "${spec}": tool ${label} ${problem}`);
  });
  return set;
}

/** Whether a failed import was the kit itself not being found from the module's directory. */
const kitMissing = (e: unknown) =>
  /Cannot find (package|module) '@mcp-tasks\/tools'/.test(String((e as Error)?.message));

/**
 * Imports every module of MCP_TOOL_MODULES, in order.
 * @throws ToolModuleError on the first module that cannot be resolved, imported, or read.
 */
export async function loadToolModules(
  specs: readonly string[],
  cwd: string = process.cwd(),
): Promise<LoadedToolModule[]> {
  const out: LoadedToolModule[] = [];
  for (const spec of specs) {
    const url = resolveToolModule(spec, cwd);
    let mod: { default?: unknown };
    try {
      mod = (await import(url)) as { default?: unknown };
    } catch (e) {
      const why = String((e as Error)?.message ?? e).split('\n')[0];
      const hint = kitMissing(e)
        ? ': the module cannot see the tool kit; in its directory run `npm install <path of this service>/packages/tools` (docs/writing-tools.md)'
        : '';
      throw new ToolModuleError(`MCP_TOOL_MODULES: cannot load "${spec}": ${why}${hint}`);
    }
    out.push({ spec, url, toolset: toolsetOf(spec, mod.default) });
  }
  return out;
}

/** Where a tool, prompt or resource comes from, for messages: `tool set "demo"`, `module "./x.mjs"`, `built-in`. */
export interface ToolSource {
  label: string;
  toolset: ToolsetModule;
}

/**
 * Refuses two definitions of one tool name, prompt name, resource URI or resource template name
 * among `sources` (clashes are refused at start, naming both sides).
 * @throws ToolModuleError, e.g. `tool name "countdown" is defined twice: by tool set "demo" and by module "./x.mjs"; rename one`.
 */
export function assertNoClashes(sources: readonly ToolSource[]): void {
  const kinds: [string, (s: ToolsetModule) => readonly string[]][] = [
    ['tool name', (s) => s.tools.map((t) => t.name)],
    ['prompt name', (s) => (s.prompts ?? []).map((p) => p.name)],
    ['resource URI', (s) => (s.resources ?? []).map((r) => r.uri)],
    ['resource template name', (s) => (s.resourceTemplates ?? []).map((r) => r.name)],
  ];
  for (const [kind, names] of kinds) {
    const seen = new Map<string, string>();
    for (const src of sources) {
      for (const name of names(src.toolset)) {
        const first = seen.get(name);
        if (first !== undefined) {
          const where = first === src.label ? `twice by ${first}` : `twice: by ${first} and by ${src.label}`;
          throw new ToolModuleError(`${kind} "${name}" is defined ${where}; rename one`);
        }
        seen.set(name, src.label);
      }
    }
  }
}
