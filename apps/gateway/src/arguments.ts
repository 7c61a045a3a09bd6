/**
 * Parsing of a `tools/call`'s `arguments` against the tool (kit.ts):
 *  - larger than MAX_ARGUMENTS_BYTES of JSON → refused as a request (`-32602`, D9: a limit, not
 *    a mistake the model can correct);
 *  - not satisfying the tool's `inputJsonSchema` (JSON Schema 2020-12, Ajv) or `inputSchema`
 *    (zod) → an input validation error, which tools-call.ts answers as a tool execution error
 *    (`isError: true`, SEP-1303) so the model sees the message.
 */
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import type { ToolDefinition } from '@mcp-tasks/tools';

const ajv = new Ajv2020({ strict: false, allErrors: false });
(addFormats as unknown as (a: Ajv2020) => void)(ajv);
/** Compiled `inputJsonSchema` per tool (tools are built once per process). */
const compiled = new WeakMap<ToolDefinition, ValidateFunction>();

function validatorFor(tool: ToolDefinition & { inputJsonSchema: Record<string, unknown> }): ValidateFunction {
  let v = compiled.get(tool);
  if (!v) {
    const { $schema: _dialect, ...schema } = tool.inputJsonSchema;
    v = ajv.compile(schema);
    compiled.set(tool, v);
  }
  return v;
}

export type ParsedArguments =
  { ok: true; args: Record<string, unknown> } | { ok: false; tooLarge: boolean; message: string };

/**
 * @param raw `params.arguments` as sent (absent = `{}`).
 * @param maxBytes MAX_ARGUMENTS_BYTES; `bodyBytes` the whole body's size when known (a body no
 * larger than the limit needs no count).
 */
export function parseArguments(
  tool: ToolDefinition,
  raw: unknown,
  maxBytes?: number,
  bodyBytes?: number,
): ParsedArguments {
  const input = raw ?? {};
  if (maxBytes !== undefined && !(bodyBytes !== undefined && bodyBytes <= maxBytes)) {
    const bytes = Buffer.byteLength(JSON.stringify(input), 'utf8');
    if (bytes > maxBytes)
      return {
        ok: false,
        tooLarge: true,
        message: `the arguments are ${bytes} bytes of JSON, more than the ${maxBytes} allowed`,
      };
  }
  if (tool.inputJsonSchema) {
    const validate = validatorFor(tool as ToolDefinition & { inputJsonSchema: Record<string, unknown> });
    if (!validate(input)) {
      const e = validate.errors?.[0];
      const where = e?.instancePath ? e.instancePath.slice(1).replace(/\//g, '.') : '(root)';
      return { ok: false, tooLarge: false, message: `${where}: ${e?.message ?? 'invalid'}` };
    }
  }
  const parsed = tool.inputSchema.safeParse(input);
  if (!parsed.success) {
    return {
      ok: false,
      tooLarge: false,
      message: parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; '),
    };
  }
  return { ok: true, args: parsed.data };
}
