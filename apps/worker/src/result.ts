/**
 * Serializes a tool's `CallToolResult` once, for the task record (case N-09):
 *  - larger than MAX_RESULT_BYTES (bytes of UTF-8 JSON) → refused: the task ends `failed` with
 *    `-32603` "Result too large" naming the size and the limit;
 *  - a Node `Buffer` (or any typed array / ArrayBuffer) anywhere in it → refused with a clear
 *    `-32603`: JSON would store a Buffer as `{"type":"Buffer","data":[…]}`, about 3.5× its size
 *    and useless to a client (bullmq #2397). Binary content belongs in base64 text (an `image`,
 *    `audio` or `resource` content block); converting silently would change the tool's schema;
 *  - anything else JSON cannot represent (a BigInt, a cycle) → `unserializable`: the caller
 *    answers it like any unexpected tool error (generic message, details in the log).
 * The JSON text is what the task record stores; the BullMQ job returns only a status word.
 *
 * Then the principal's budget of stored result bytes (MAX_RESULT_BYTES_PER_PRINCIPAL, case N-09,
 * `reserveResultBytes`): the result is counted before it is written; one that does not fit
 * ends the task `failed` with `-32603` naming the sizes and when the oldest stored result expires.
 */
import { binaryResult, resultBudgetError, resultTooLarge, type JsonRpcErrorObject } from '@mcp-tasks/errors';
import type { ResultBudget } from '@mcp-tasks/task-store';

export type SerializedResult =
  | { ok: true; json: string; bytes: number }
  | { ok: false; error: JsonRpcErrorObject }
  | { ok: false; unserializable: Error };

class BinaryValueError extends Error {
  constructor(
    readonly kind: string,
    readonly at: string,
  ) {
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
      if (isBinary(value))
        throw new BinaryValueError(value.constructor.name, key === '' ? 'the top level' : `"${key}"`);
      for (const k in value) {
        const child = (value as Record<string, unknown>)[k];
        if (isBinary(child)) throw new BinaryValueError(child.constructor.name, `"${k}"`);
      }
      return value;
    });
  } catch (e) {
    if (e instanceof BinaryValueError) {
      return { ok: false, error: binaryResult(tool, e.kind, e.at) };
    }
    return { ok: false, unserializable: e as Error };
  }
  if (typeof json !== 'string') return { ok: false, unserializable: new Error('the result serialized to nothing') };
  const bytes = Buffer.byteLength(json, 'utf8');
  if (bytes > maxBytes) {
    return { ok: false, error: resultTooLarge(tool, bytes, maxBytes) };
  }
  return { ok: true, json, bytes };
}

/**
 * Counts `bytes` of task `taskId`'s result against `owner`'s budget of stored result bytes,
 * before the result is written (`ResultBudget.reserve`). @returns undefined when counted (write
 * it now; release the reservation if the write is refused), or the JSON-RPC error to end the
 * task with (`resultBudgetError`): nothing was counted.
 */
export async function reserveResultBytes(
  budget: ResultBudget,
  owner: string,
  taskId: string,
  tool: string,
  bytes: number,
  now = budget.store.clock.now(),
): Promise<JsonRpcErrorObject | undefined> {
  const r = await budget.reserve(owner, taskId, bytes, now);
  if (r.ok) return undefined;
  return resultBudgetError(tool, {
    bytes,
    storedBytes: r.storedBytes,
    limitBytes: budget.budgetBytes,
    retryAfterS: Math.max(1, Math.ceil((r.oldestExpiresAt - now) / 1000)),
  });
}
