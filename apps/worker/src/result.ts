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
 * On a single Redis or Sentinel the count, the completion and what follows it are one script
 * (`storeResult`); under Cluster they are separate calls.
 */
import { binaryResult, resultBudgetError, resultTooLarge, type JsonRpcErrorObject } from '@mcp-tasks/errors';
import {
  capStatusMessage,
  ResultBudget,
  type Checkpoints,
  type TaskStore,
  type WriteOutcome,
} from '@mcp-tasks/task-store';
import type { Logger } from '@mcp-tasks/observability';

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
  return budgetError(budget, { tool, bytes }, r, now);
}

/** The `resultBudgetError` of a refusal (`storedBytes`, `oldestExpiresAt` ms) of `r.bytes` of tool `r.tool`'s result. */
function budgetError(
  budget: ResultBudget,
  r: { tool: string; bytes: number },
  refused: { storedBytes: number; oldestExpiresAt: number },
  now: number,
): JsonRpcErrorObject {
  return resultBudgetError(r.tool, {
    bytes: r.bytes,
    storedBytes: refused.storedBytes,
    limitBytes: budget.budgetBytes,
    retryAfterS: Math.max(1, Math.ceil((refused.oldestExpiresAt - now) / 1000)),
  });
}

export interface StoreResultDeps {
  store: TaskStore;
  resultBudget: ResultBudget;
  checkpoints: Checkpoints;
  /**
   * Present on a single Redis or Sentinel: count, complete, release the outstanding slot,
   * delete the checkpoint and (`dropFromIndex`: no completion webhooks, so the reconciler has
   * nothing to make sure of) drop the reconciler index entry in one script
   * (`ResultBudget.complete`). Absent (Cluster): the separate calls.
   */
  completeInOneScript?: { dropFromIndex: boolean };
}

/** A serialized result to store as task `taskId`'s (fenced by `fence`). */
export interface ResultToStore {
  owner: string;
  taskId: string;
  fence: string;
  tool: string;
  json: string;
  /** UTF-8 bytes of `json`. */
  bytes: number;
  /** A tool error result (`isError`): the task says "Finished with a tool error", else "Done". */
  isError: boolean;
}

/**
 * Counts a step's result against its principal's budget and completes the task with it; a
 * result over the budget fails the task instead (`resultBudgetError`, logged as
 * `step.result_over_budget`). `ended` is the processor's wrapper for a terminal write (it
 * releases the outstanding slot and deletes the checkpoint once the task ended); the one-script
 * path has done both when the completion landed and calls it only for the other ends
 * (`terminal`, `gone`, …).
 * @returns the completion's outcome (a refused one counts nothing), or undefined when the task
 *          was failed for its budget.
 */
export async function storeResult(
  d: StoreResultDeps,
  r: ResultToStore,
  ended: (w: Promise<WriteOutcome>) => Promise<WriteOutcome>,
  log: Logger,
  now = d.store.clock.now(),
): Promise<WriteOutcome | undefined> {
  const statusMessage = r.isError ? 'Finished with a tool error' : 'Done';
  let overBudget: JsonRpcErrorObject | undefined;
  if (d.completeInOneScript) {
    const o = { checkpointKey: d.checkpoints.key(r.taskId), dropFromIndex: d.completeInOneScript.dropFromIndex };
    const done = await d.resultBudget.complete(r.owner, r.taskId, r.fence, { ...r, statusMessage }, o, now);
    if (done.code === 'ok') return done;
    if (done.code !== 'over_budget') return ended(Promise.resolve(done));
    overBudget = budgetError(d.resultBudget, r, done, now);
  } else {
    overBudget = await reserveResultBytes(d.resultBudget, r.owner, r.taskId, r.tool, r.bytes, now);
    if (!overBudget) {
      const outcome = await ended(d.store.complete(r.taskId, r.fence, r.json, statusMessage));
      if (outcome.code !== 'ok') await d.resultBudget.release(r.owner, r.taskId).catch(() => undefined);
      return outcome;
    }
  }
  await ended(d.store.fail(r.taskId, { fence: r.fence }, overBudget, capStatusMessage(overBudget.message)));
  log.warn({ tool: r.tool, data: overBudget.data }, 'step.result_over_budget');
  return undefined;
}

/**
 * The processor's result budget (MAX_RESULT_BYTES_PER_PRINCIPAL) and, where every key is on one
 * node (single Redis, Sentinel), the one-script completion; with completion webhooks the
 * reconciler still checks each finished task's delivery, so its index entry stays.
 */
export function resultDeps(
  store: TaskStore,
  config: { maxResultBytesPerPrincipal: number; redis: { mode: string }; webhooks: { enabled: boolean } },
): Pick<StoreResultDeps, 'resultBudget' | 'completeInOneScript'> {
  const resultBudget = new ResultBudget(store, config.maxResultBytesPerPrincipal);
  if (config.redis.mode === 'cluster') return { resultBudget };
  return { resultBudget, completeInOneScript: { dropFromIndex: !config.webhooks.enabled } };
}
