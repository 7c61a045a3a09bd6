/**
 * Validation of answers to input requests (`inputResponses`), shared by `tasks/update` and
 * MRTR retries of synchronous calls.
 *
 * Only answers to *outstanding* keys are checked: unknown keys are ignored (T-31; the
 * conformance suite sends `{"unknown-key":{"ignored":true}}` and expects an ack). An answer to
 * an elicitation must be an ElicitResult (`action` accept | decline | cancel); an accepted
 * form's `content` must satisfy the `requestedSchema` the server sent (E-05, checked with Ajv,
 * JSON Schema 2020-12). Errors are JSON-RPC `-32602` (case B-05.2).
 *
 * What is kept (`acceptedAnswers`): only answers to outstanding keys, each reduced to what its
 * request asked for — `action`, and for an accepted form only the fields its `requestedSchema`
 * declares — so a client cannot park extra data in a task record (case N-09). The whole
 * `inputResponses` is at most MAX_INPUT_RESPONSES_BYTES (64 KB) of JSON.
 */
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { canonicalJson } from '@mcp-tasks/task-store';
import { invalidParams } from './errors.js';

const ajv = new Ajv2020({ strict: false, allErrors: false });
(addFormats as unknown as (a: Ajv2020) => void)(ajv);
const compiled = new Map<string, ValidateFunction>();

function validatorFor(schema: unknown): ValidateFunction | undefined {
  const key = JSON.stringify(schema);
  let v = compiled.get(key);
  if (!v) {
    try {
      const { $schema: _ignored, ...rest } = schema as Record<string, unknown>;
      v = ajv.compile(rest);
    } catch {
      return undefined; // a schema we cannot compile is not the client's fault
    }
    if (compiled.size > 500) compiled.clear();
    compiled.set(key, v);
  }
  return v;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Checks `inputResponses` as a whole and the answers to `outstanding` requests.
 * @throws ProtocolError -32602 naming the key and what is wrong.
 */
export function validateInputResponses(
  outstanding: Record<string, unknown>,
  responses: unknown,
): asserts responses is Record<string, unknown> {
  if (!isObject(responses))
    throw invalidParams('inputResponses must be an object mapping input request keys to responses');
  for (const [key, value] of Object.entries(responses)) {
    const req = outstanding[key] as
      { method?: string; params?: { requestedSchema?: unknown; mode?: string } } | undefined;
    if (!req) continue;
    if (!isObject(value)) throw invalidParams(`inputResponses["${key}"] must be an object`);
    if (req.method !== 'elicitation/create') continue;
    if (!['accept', 'decline', 'cancel'].includes(value.action as string)) {
      throw invalidParams(`inputResponses["${key}"].action must be "accept", "decline" or "cancel"`);
    }
    if (value.content !== undefined && !isObject(value.content))
      throw invalidParams(`inputResponses["${key}"].content must be an object`);
    if (value.action === 'accept' && req.params?.mode !== 'url' && req.params?.requestedSchema) {
      const validate = validatorFor(req.params.requestedSchema);
      if (validate && !validate(value.content ?? {})) {
        const err = validate.errors?.[0];
        const where = err?.instancePath ? `content${err.instancePath.replace(/\//g, '.')}` : 'content';
        throw invalidParams(
          `inputResponses["${key}"].${where} does not match the requested schema: ${err?.message ?? 'invalid'}`,
        );
      }
    }
  }
}

/** Serialized JSON size of a value, in bytes (UTF-8). */
export function jsonBytes(v: unknown): number {
  return Buffer.byteLength(JSON.stringify(v ?? null) ?? '', 'utf8');
}

/**
 * Validates `responses` against the `outstanding` requests and returns only what may be stored:
 * answers to outstanding keys, each reduced to what its request asked for.
 * @param maxBytes largest accepted `inputResponses` (serialized JSON bytes).
 * @throws ProtocolError -32602 when too large or invalid (see `validateInputResponses`).
 */
export function acceptedAnswers(
  outstanding: Record<string, unknown>,
  responses: unknown,
  maxBytes: number,
): Record<string, unknown> {
  if (isObject(responses) && jsonBytes(responses) > maxBytes) {
    throw invalidParams(`inputResponses is larger than ${maxBytes} bytes`);
  }
  validateInputResponses(outstanding, responses);
  const out: Record<string, unknown> = {};
  for (const [key, req] of Object.entries(outstanding) as [
    string,
    { method?: string; params?: { requestedSchema?: { properties?: Record<string, unknown> }; mode?: string } },
  ][]) {
    if (!Object.hasOwn(responses, key)) continue;
    const value = responses[key] as Record<string, unknown>;
    if (req.method !== 'elicitation/create') {
      out[key] = value;
      continue;
    }
    const answer: Record<string, unknown> = { action: value.action };
    if (value.action === 'accept' && isObject(value.content)) {
      const declared = req.params?.requestedSchema?.properties;
      const content = value.content;
      answer.content = declared
        ? Object.fromEntries(
            Object.keys(declared)
              .filter((f) => Object.hasOwn(content, f))
              .map((f) => [f, content[f]]),
          )
        : {};
    }
    out[key] = answer;
  }
  return out;
}

/**
 * Splits `inputResponses` as the SDK does before a handler sees them: an entry that is not a
 * plain object, or is a `{method, result}` wrapper, is dropped (`droppedKeys`). The hot path
 * (hot-path.ts) uses it to answer exactly as the SDK path does.
 */
export function partitionInputResponses(inputResponses: unknown): {
  accepted: Record<string, unknown>;
  droppedKeys: string[];
} {
  const accepted: Record<string, unknown> = {};
  const droppedKeys: string[] = [];
  if (!isObject(inputResponses)) return { accepted, droppedKeys };
  for (const [key, entry] of Object.entries(inputResponses)) {
    if (!isObject(entry) || 'method' in entry || 'result' in entry) droppedKeys.push(key);
    else accepted[key] = entry;
  }
  return { accepted, droppedKeys };
}

/**
 * A key of `responses` that the task answered already (`answered`: its stored answers, still
 * there until the next question) with a different response, or `undefined` (case B-05: of two
 * different answers sent at once, the first applied wins). The presented answer is reduced to
 * the stored answer's shape (`action`, and the `content` fields it kept) before comparing, as
 * the request it answered is no longer outstanding.
 */
export function answeredDifferently(
  outstanding: Record<string, unknown>,
  answered: Record<string, unknown>,
  responses: unknown,
): string | undefined {
  if (!isObject(responses)) return undefined;
  for (const [key, stored] of Object.entries(answered)) {
    if (!Object.hasOwn(responses, key) || Object.hasOwn(outstanding, key)) continue;
    let presented = responses[key];
    if (isObject(stored) && 'action' in stored && isObject(presented)) {
      const content = presented.content;
      presented = {
        action: presented.action,
        ...(isObject(stored.content)
          ? {
              content: Object.fromEntries(
                Object.keys(stored.content)
                  .filter((f) => isObject(content) && Object.hasOwn(content, f))
                  .map((f) => [f, (content as Record<string, unknown>)[f]]),
              ),
            }
          : {}),
      };
    }
    if (canonicalJson(presented) !== canonicalJson(stored)) return key;
  }
  return undefined;
}

/** `-32602` for an answer to a question answered already with another response. */
export function alreadyAnswered(key: string) {
  return invalidParams(
    `inputResponses["${key}"] was already answered with a different response; the first answer stands`,
  );
}
