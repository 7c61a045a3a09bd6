/**
 * `x-mcp-header` declarations in a tool's `inputSchema` (SEP-2243; spec transport §2.3, H-15,
 * H-17, H-18): a property annotated `"x-mcp-header": "Region"` is mirrored by clients into the
 * `Mcp-Param-Region` request header of `tools/call`, and the gateway checks that header against
 * the argument (apps/gateway/src/headers.ts).
 *
 * `scanXMcpHeaderDeclarations` mirrors the SDK's function of the same name, rule for rule and
 * message for message (`@modelcontextprotocol/server` 2.4.0 does not export it; it applies it
 * only to `McpServer` tools, and the gateway serves tools through the low-level `Server`). The
 * rules (H-18):
 *  - the value is a non-empty RFC 9110 token (no spaces, control characters or delimiters);
 *  - names are unique case-insensitively within the schema;
 *  - only on `string`, `integer` or `boolean` properties (`number` is not permitted);
 *  - reachable from the root through `properties` only: an annotation under `items`,
 *    `additionalProperties`, `oneOf`/`anyOf`/`allOf`/`not`, `if`/`then`/`else`, `$defs`, … makes
 *    the tool invalid.
 * The registry refuses an invalid declaration when the process starts (`ToolRegistry`).
 */

/** The JSON Schema key of the annotation. */
export const X_MCP_HEADER_KEY = 'x-mcp-header';

/** Prefix of the request header that mirrors an annotated argument. */
export const MCP_PARAM_HEADER_PREFIX = 'Mcp-Param-';

/** One annotated property: where it is in `arguments`, its header name and JSON type. */
export interface XMcpHeaderDeclaration {
  /** Property names from the root of `arguments` (`['region']`, or deeper for nested objects). */
  path: string[];
  /** The annotation's value: the header is `Mcp-Param-<headerName>`. */
  headerName: string;
  /** `string` | `integer` | `boolean` (`number` only in an invalid schema). */
  type: string | undefined;
}

export type XMcpHeaderScan =
  | { valid: true; declarations: XMcpHeaderDeclaration[] }
  | { valid: false; reason: string; declarations?: XMcpHeaderDeclaration[] };

const RFC9110_TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const PERMITTED_TYPES = new Set(['string', 'integer', 'boolean']);
/** Keywords whose subschemas are not reachable through a `properties` chain. */
const NON_REACHABLE_SUBSCHEMA_KEYWORDS = [
  'items',
  'prefixItems',
  'contains',
  'additionalProperties',
  'unevaluatedProperties',
  'unevaluatedItems',
  'propertyNames',
  'patternProperties',
  'dependentSchemas',
  'oneOf',
  'anyOf',
  'allOf',
  'not',
  'if',
  'then',
  'else',
  '$defs',
  'definitions',
];
/** Keywords whose value is a `name → subschema` object. */
const OBJECT_VALUED_SUBSCHEMA_KEYWORDS = new Set(['patternProperties', 'dependentSchemas', '$defs', 'definitions']);

/** `a.b.c`, or `<root>` for the empty path (the SDK's wording). */
export function pathName(path: readonly string[]): string {
  return path.length === 0 ? '<root>' : path.join('.');
}

/**
 * Collects the `x-mcp-header` declarations of a JSON-serialized `inputSchema` and checks every
 * rule (see the module docstring).
 * @returns `{valid: true, declarations}` (possibly empty), or `{valid: false, reason}` naming
 * the first rule broken (with the declarations too when a `number`-typed one is the only fault).
 */
export function scanXMcpHeaderDeclarations(inputSchema: unknown): XMcpHeaderScan {
  const declarations: XMcpHeaderDeclaration[] = [];
  const seenLower = new Map<string, string>();
  let numberFault: string | undefined;
  const visit = (node: unknown, path: string[], reachable: boolean): string | undefined => {
    if (node === null || typeof node !== 'object') return undefined;
    const schema = node as Record<string, unknown>;
    if (X_MCP_HEADER_KEY in schema) {
      if (!reachable || path.length === 0) {
        return `${pathName(path)}: x-mcp-header is only permitted on properties statically reachable via a chain of 'properties' keys (not under items, additionalProperties, oneOf/anyOf/allOf/not, if/then/else, or $ref)`;
      }
      const raw = schema[X_MCP_HEADER_KEY];
      if (typeof raw !== 'string' || raw.length === 0)
        return `${pathName(path)}: x-mcp-header MUST be a non-empty string`;
      if (!RFC9110_TOKEN.test(raw))
        return `${pathName(path)}: x-mcp-header '${raw}' is not a valid RFC 9110 token (no spaces, control characters or HTTP delimiters)`;
      const type = typeof schema.type === 'string' ? schema.type : undefined;
      if (type === undefined || !PERMITTED_TYPES.has(type)) {
        const fault = `${pathName(path)}: x-mcp-header is only permitted on primitive-typed properties (string, integer, boolean); got ${type ?? '<none>'}`;
        if (type !== 'number') return fault;
        numberFault ??= fault;
      }
      const lower = raw.toLowerCase();
      const prior = seenLower.get(lower);
      if (prior !== undefined)
        return `x-mcp-header '${raw}' is not case-insensitively unique (also declared as '${prior}')`;
      seenLower.set(lower, raw);
      declarations.push({ path, headerName: raw, type });
    }
    const properties = schema.properties;
    if (properties !== null && typeof properties === 'object') {
      for (const [key, child] of Object.entries(properties)) {
        const fault = visit(child, [...path, key], reachable);
        if (fault !== undefined) return fault;
      }
    }
    for (const k of NON_REACHABLE_SUBSCHEMA_KEYWORDS) {
      const sub = schema[k];
      if (sub === undefined) continue;
      const branches = Array.isArray(sub)
        ? sub
        : sub !== null && typeof sub === 'object' && OBJECT_VALUED_SUBSCHEMA_KEYWORDS.has(k)
          ? Object.values(sub)
          : [sub];
      for (const branch of branches) {
        const fault = visit(branch, [...path, `<${k}>`], false);
        if (fault !== undefined) return fault;
      }
    }
    return undefined;
  };
  const fault = visit(inputSchema, [], true);
  if (fault !== undefined) return { valid: false, reason: numberFault ?? fault };
  return numberFault === undefined
    ? { valid: true, declarations }
    : { valid: false, reason: numberFault, declarations };
}
