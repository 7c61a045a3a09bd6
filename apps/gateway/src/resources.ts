/**
 * `resources/list`, `resources/templates/list` and `resources/read` for the resources of the
 * enabled tool sets (kit resources.ts; spec server/resources), served by the gateway:
 *  - a URI is read by the resource with exactly that URI, else by the first template (in
 *    tool-set order) whose RFC 6570 `uriTemplate` matches it (the SDK's `UriTemplate`);
 *  - a URI nothing matches → `-32602` with `data.uri` (SEP-2164; the SDK's
 *    `ResourceNotFoundError`), never an empty `contents`;
 *  - an unexpected failure → `-32603` with an error id (the details go to the log only).
 * Results carry the SDK's default cache hints (`ttlMs`, `cacheScope`, K-01). Registered only
 * when some resource or template is enabled (server-factory.ts).
 */
import { ResourceNotFoundError, UriTemplate, type Server, type ServerContext } from '@modelcontextprotocol/server';
import { newErrorId } from '@mcp-tasks/observability';
import type { ResourceContents, ResourceTemplateDefinition } from '@mcp-tasks/tools';
import type { Call, Gateway } from './context.js';
import { unexpectedFailure } from './errors.js';

/** Compiled templates, per definition (definitions live as long as the process). */
const compiled = new WeakMap<ResourceTemplateDefinition, UriTemplate>();
const templateOf = (t: ResourceTemplateDefinition) => {
  let u = compiled.get(t);
  if (!u) compiled.set(t, (u = new UriTemplate(t.uriTemplate)));
  return u;
};

/** Variables of `uri` when `t` matches it (values as strings; a list variable joined by commas). */
function matchTemplate(t: ResourceTemplateDefinition, uri: string): Record<string, string> | undefined {
  const vars = templateOf(t).match(uri);
  if (!vars) return undefined;
  return Object.fromEntries(Object.entries(vars).map(([k, v]) => [k, Array.isArray(v) ? v.join(',') : String(v)]));
}

/** Registers the resource handlers on a per-request server. */
export function registerResources(server: Server, gw: Gateway, callOf: (ctx: ServerContext) => Call): void {
  server.setRequestHandler('resources/list', async () => ({ resources: gw.resources.list() as never }));
  server.setRequestHandler('resources/templates/list', async () => ({
    resourceTemplates: gw.resources.listTemplates() as never,
  }));

  server.setRequestHandler('resources/read', async (request, ctx) => {
    const call = callOf(ctx);
    const { uri } = request.params;
    const rctx = { signal: ctx.mcpReq.signal, principal: call.principal, clientCapabilities: call.caps };
    const fixed = gw.resources.get(uri);
    let read: (() => Promise<ResourceContents[]>) | undefined = fixed && (() => fixed.read(rctx));
    if (!read) {
      for (const t of gw.resources.templates) {
        const vars = matchTemplate(t, uri);
        if (vars) {
          read = () => t.read(uri, vars, rctx);
          break;
        }
      }
    }
    if (!read) throw new ResourceNotFoundError(uri);
    try {
      return { contents: (await read()) as never };
    } catch (e) {
      const errorId = newErrorId();
      gw.log.error({ err: e, uri, errorId }, 'resource.failed');
      throw unexpectedFailure(`Reading ${uri}`, errorId);
    }
  });
}
