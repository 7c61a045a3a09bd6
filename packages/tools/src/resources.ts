/**
 * Resources a tool set offers (`resources/list`, `resources/templates/list`, `resources/read`;
 * spec server/resources): data the client can read by URI. The gateway serves them itself, so
 * `read` must be quick (no long I/O, no worker).
 *
 * Writing them:
 *
 *     export const readme = defineResource({
 *       uri: 'docs://readme', name: 'readme', title: 'README', mimeType: 'text/markdown',
 *       async read() { return [{ uri: 'docs://readme', mimeType: 'text/markdown', text: '# Hello' }]; },
 *     });
 *     export const report = defineResourceTemplate({
 *       uriTemplate: 'reports://{id}', name: 'report', mimeType: 'application/json',
 *       complete: { id: (v) => knownIds.filter((id) => id.startsWith(v)) },
 *       async read(uri, { id }) { return [{ uri, mimeType: 'application/json', text: JSON.stringify({ id }) }]; },
 *     });
 *
 * and list them in the tool set module (`resources: [readme]`, `resourceTemplates: [report]`).
 * The gateway then advertises the `resources` capability (and `completions` when a template
 * variable has `complete`). `uriTemplate` is an RFC 6570 template; a URI that matches no
 * resource and no template gets `-32602` with `data.uri` (SEP-2164). Return binary data as
 * Base64 in `blob`. A resource's contents are per request: nothing is cached by the gateway
 * (results carry the SDK's default cache hints).
 */

/** One item of `ReadResourceResult.contents`: `text` or Base64 `blob`. */
export type ResourceContents =
  { uri: string; mimeType?: string; text: string } | { uri: string; mimeType?: string; blob: string };

/** What `read` is given besides the URI. */
export interface ResourceContext {
  /** Aborts when the client goes away. */
  signal: AbortSignal;
  principal: string;
  /** Client capabilities declared on this request (B-06). */
  clientCapabilities: Record<string, unknown>;
}

/** A resource with a fixed URI (listed by `resources/list`). */
export interface ResourceDefinition {
  uri: string;
  name: string;
  title?: string;
  description?: string;
  mimeType?: string;
  read(ctx: ResourceContext): Promise<ResourceContents[]>;
}

/** A family of resources named by an RFC 6570 URI template (listed by `resources/templates/list`). */
export interface ResourceTemplateDefinition {
  uriTemplate: string;
  name: string;
  title?: string;
  description?: string;
  mimeType?: string;
  /** Suggestions for `completion/complete` per template variable (at most 100 are sent). */
  complete?: Record<string, (value: string, context: Record<string, string>) => string[] | Promise<string[]>>;
  /** `variables` are the template's values taken from `uri`. */
  read(uri: string, variables: Record<string, string>, ctx: ResourceContext): Promise<ResourceContents[]>;
}

export function defineResource(def: ResourceDefinition): ResourceDefinition {
  return def;
}

export function defineResourceTemplate(def: ResourceTemplateDefinition): ResourceTemplateDefinition {
  return def;
}

/** The enabled resources and templates, in tool-set order (lists are deterministic). */
export class ResourceRegistry {
  private readonly byUri = new Map<string, ResourceDefinition>();
  readonly templates: readonly ResourceTemplateDefinition[];

  /** @throws Error on a duplicate URI or template name (at start, not on a request). */
  constructor(resources: readonly ResourceDefinition[], templates: readonly ResourceTemplateDefinition[]) {
    for (const r of resources) {
      if (this.byUri.has(r.uri)) throw new Error(`duplicate resource uri: ${r.uri}`);
      this.byUri.set(r.uri, r);
    }
    const names = new Set<string>();
    for (const t of templates) {
      if (names.has(t.name)) throw new Error(`duplicate resource template name: ${t.name}`);
      names.add(t.name);
    }
    this.templates = [...templates];
  }

  get size(): number {
    return this.byUri.size + this.templates.length;
  }

  /** The resource with exactly this URI. */
  get(uri: string): ResourceDefinition | undefined {
    return this.byUri.get(uri);
  }

  /** The template with this name (`ref/resource` completions name the template's `uriTemplate`). */
  templateFor(uriTemplate: string): ResourceTemplateDefinition | undefined {
    return this.templates.find((t) => t.uriTemplate === uriTemplate);
  }

  /** True when some template variable can be completed. */
  get completes(): boolean {
    return this.templates.some((t) => Object.keys(t.complete ?? {}).length > 0);
  }

  /** `resources/list` entries. */
  list(): Record<string, unknown>[] {
    return [...this.byUri.values()].map((r) => describe({ uri: r.uri }, r));
  }

  /** `resources/templates/list` entries. */
  listTemplates(): Record<string, unknown>[] {
    return this.templates.map((t) => describe({ uriTemplate: t.uriTemplate }, t));
  }
}

function describe(
  head: Record<string, unknown>,
  d: { name: string; title?: string; description?: string; mimeType?: string },
): Record<string, unknown> {
  const out: Record<string, unknown> = { ...head, name: d.name };
  if (d.title) out.title = d.title;
  if (d.description) out.description = d.description;
  if (d.mimeType) out.mimeType = d.mimeType;
  return out;
}
