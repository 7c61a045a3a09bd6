/**
 * Serializes a tool's `CallToolResult` once, for the task record (issue 10 §4, case N-09):
 *  - larger than MAX_RESULT_BYTES (bytes of UTF-8 JSON) → refused: the task ends `failed` with
 *    `-32603` "Result too large" naming the size and the limit;
 *  - a Node `Buffer` (or any typed array / ArrayBuffer) anywhere in it → refused with a clear
 *    `-32603`: JSON would store a Buffer as `{"type":"Buffer","data":[…]}`, about 3.5× its size
 *    and useless to a client (bullmq #2397). Binary content belongs in base64 text (an `image`,
 *    `audio` or `resource` content block); converting silently would change the tool's schema;
 *  - anything else JSON cannot represent (a BigInt, a cycle) → `unserializable`: the caller
 *    answers it like any unexpected tool error (generic message, details in the log).
 * The JSON text is what the task record stores; the BullMQ job returns only a status word.
 */
import type { JsonRpcErrorObject } from '@mcp-tasks/task-store';

export type SerializedResult =
  | { ok: true; json: string; bytes: number }
  | { ok: false; error: JsonRpcErrorObject }
  | { ok: false; unserializable: Error };

class BinaryValue extends Error {
  constructor(readonly kind: string, readonly at: string) {
    super(`binary ${kind} at ${at}`);
  }
}

const isBinary = (v: unknown): v is ArrayBufferView | ArrayBuffer => ArrayBuffer.isView(v) || v instanceof ArrayBuffer;

/** Serializes `result` of tool `tool` within `maxBytes` (see the module doc). Never throws. */
export function serializeResult(tool: string, result: unknown, maxBytes: number): SerializedResult {
  let json: string;
  try {
    json = JSON.stringify(result, (key: string, value: unknown) => {
      // A container's children are checked before JSON.stringify descends into them: a Buffer's
      // toJSON (a 5 MB buffer → an array of 5 million numbers) never runs.
      if (value === null || typeof value !== 'object') return value;
      if (isBinary(value)) throw new BinaryValue(value.constructor.name, key === '' ? 'the top level' : `"${key}"`);
      for (const k in value) {
        const child = (value as Record<string, unknown>)[k];
        if (isBinary(child)) throw new BinaryValue(child.constructor.name, `"${k}"`);
      }
      return value;
    });
  } catch (e) {
    if (e instanceof BinaryValue) {
      return {
        ok: false,
        error: {
          code: -32603,
          message: `Tool ${tool} returned binary data (a ${e.kind} in field ${e.at}); results must be JSON text: send binary content as base64 (an image, audio or resource content block)`,
          data: { reason: 'binary_result' },
        },
      };
    }
    return { ok: false, unserializable: e as Error };
  }
  if (typeof json !== 'string') return { ok: false, unserializable: new Error('the result serialized to nothing') };
  const bytes = Buffer.byteLength(json, 'utf8');
  if (bytes > maxBytes) {
    return {
      ok: false,
      error: {
        code: -32603,
        message: `Result too large: tool ${tool} returned ${bytes} bytes of JSON; the limit is ${maxBytes} bytes`,
        data: { reason: 'result_too_large', bytes, limitBytes: maxBytes },
      },
    };
  }
  return { ok: true, json, bytes };
}
