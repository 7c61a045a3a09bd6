/**
 * The JSON Schema a server sends (a tool's `inputSchema`, an elicitation's `requestedSchema`) as
 * the CLI reads it: untrusted, so every field is `unknown` and checked where it is used.
 */

/** One schema node: a JSON object whose fields are checked before use. */
export type JsonSchema = { readonly [key: string]: unknown };

/** `value` as a schema node when it is a JSON object, else undefined. */
export function asSchema(value: unknown): JsonSchema | undefined {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as JsonSchema) : undefined;
}

/** `value` as a list when it is an array (its items still unchecked), else undefined. */
export function asList(value: unknown): readonly unknown[] | undefined {
  return Array.isArray(value) ? (value as unknown[]) : undefined;
}
