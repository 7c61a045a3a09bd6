/**
 * A memo of validation verdicts: the SDK's validation ladder (`_meta` envelope,
 * version, header/body agreement: B-05, H-11, H-12, H-15) and the hot path's envelope check
 * depend only on the request's headers and the shape of its body, not on its JSON-RPC id or on
 * which task it names, yet cost a zod parse of the whole message per request (about a third of
 * a poll's own CPU). Their *acceptances* are remembered here, in two small bounded LRU caches
 * (`lru-cache`), keyed by that shape; a refusal is never remembered (its message may quote the
 * request), so a refused shape runs the whole ladder every time.
 *
 * The shape of a request (`ladderShapeKey`) is the HTTP method, the `MCP-Protocol-Version` and
 * `Mcp-Method` headers and the body as JSON with three values abstracted:
 *  - `id`: only whether it is a string or a safe integer (anything else: no key);
 *  - `params.taskId` of `tasks/get|cancel`: only when it is a plain token (letters, digits,
 *    `-._~`; never a Base64 sentinel) and the `Mcp-Name` header is exactly the same string, the
 *    one case where the header check accepts it whatever the value;
 *  - `params.arguments` of `tools/call`: only when it is a plain object (the ladder checks no
 *    more of it; the `Mcp-Param-*` headers that depend on arguments are checked apart, per
 *    request, by classify.ts). The tool name stays in the key, as its `Mcp-Name` header.
 * Anything else (another method, an odd id, a long body: over 4 KB of shape) gets no key and is
 * validated in full.
 *
 * The key of a poll or a call is usually made from its raw JSON text (`rawShapeKey`, which the
 * body parser keeps for bodies of up to 4 KiB) instead of serializing the parsed body again: the
 * same abstraction, read off the text where the text pins it down, and the JSON key otherwise.
 */
import { LRUCache } from 'lru-cache';
import { isSpecType } from '@modelcontextprotocol/server';
import { isWellFormedTaskId } from '@mcp-tasks/task-store';

/** Shapes remembered per cache (a gateway sees a few client versions, not thousands). */
const MAX_SHAPES = 1000;
/** Longest shape key remembered (characters). */
const MAX_KEY_CHARS = 4096;
const PLAIN_TOKEN = /^[A-Za-z0-9._~-]{1,200}$/;
/** Characters that may follow a JSON value inside an object. */
const VALUE_END = new Set([',', '}', ' ', '\t', '\n', '\r']);
/** What the id's value, the task id and the arguments read as in a raw shape key (none can occur in JSON text). */
const ID_MASK = '\u0000';
const TASK_ID_MASK = '\u0001';
const ARGUMENTS_MASK = '\u0003';
/** What `params.arguments` of a `tools/call` reads as in a shape key. */
const NO_ARGUMENTS = Object.freeze({});

/**
 * What is known of an accepted request shape: the ladder accepted it as a modern request
 * (`modern`: the `Mcp-Param-*` rung follows) or otherwise; `envelope`, once the hot path has
 * checked it, whether its `_meta` is the well-formed 2026 envelope; `storedCaps` (below). The
 * shape key holds the whole `_meta`, so each is the same for every request of the shape.
 */
export interface ShapeVerdict {
  modern: boolean;
  envelope?: boolean;
  /**
   * A 2026 `tools/call` of this shape that creates a task: the client capabilities its task keeps
   * (task-create.ts `storedCapabilities`), computed once (they come from `_meta`, part of the key).
   */
  storedCaps?: Readonly<Record<string, unknown>>;
}

/** Shape → what is known of it (only accepted shapes). */
const ladder = new LRUCache<string, ShapeVerdict>({ max: MAX_SHAPES });
const envelopes = new LRUCache<string, boolean>({ max: MAX_SHAPES });

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The header values the ladder reads (first value of each; undefined when absent). */
export interface LadderHeaders {
  httpMethod: string;
  protocolVersion: string | undefined;
  method: string | undefined;
  name: string | undefined;
}

/**
 * The shape key of a request for the ladder's memo (module docstring), or undefined when this
 * request must be validated in full.
 */
export function ladderShapeKey(h: LadderHeaders, body: unknown, text?: string): string | undefined {
  if (!isObject(body) || !isObject(body.params)) return undefined;
  if (text !== undefined) {
    const raw = rawShapeKey(h, body, text);
    if (raw !== undefined) return raw;
  }
  const { id, params } = body;
  // The id's type only: masked as '' or 0 (the same type keeps V8's object shape).
  const idMask = typeof id === 'string' ? '' : Number.isSafeInteger(id) ? 0 : undefined;
  if (idMask === undefined) return undefined;
  let field: 'taskId' | 'arguments' | undefined;
  let mask: unknown;
  if (body.method === 'tasks/get' || body.method === 'tasks/cancel') {
    const taskId = params.taskId;
    if (typeof taskId !== 'string' || !PLAIN_TOKEN.test(taskId) || h.name !== taskId) return undefined;
    field = 'taskId';
    mask = '';
  } else if (body.method === 'tools/call') {
    if (typeof params.name !== 'string' || !PLAIN_TOKEN.test(params.name) || h.name !== params.name) return undefined;
    if (params.arguments !== undefined) {
      if (!isObject(params.arguments)) return undefined;
      field = 'arguments';
      mask = NO_ARGUMENTS;
    }
  } else return undefined;
  // The body itself as JSON, with the abstracted values masked in place for the length of the
  // call and put back (no copy of the body: this runs on every request).
  const saved = field === undefined ? undefined : params[field];
  let key: string;
  try {
    body.id = idMask;
    if (field !== undefined) params[field] = mask;
    key = JSON.stringify([h.httpMethod, h.protocolVersion ?? null, h.method ?? null]) + JSON.stringify(body);
  } catch {
    return undefined;
  } finally {
    body.id = id;
    if (field !== undefined) params[field] = saved;
  }
  return key.length <= MAX_KEY_CHARS ? key : undefined;
}

/** A stretch of the raw text, `[from, to)`, and what it reads as in a raw shape key. */
type Mask = readonly [from: number, to: number, mask: string];

/**
 * The shape key of a `tasks/get`, `tasks/cancel` or `tools/call` read off its raw JSON `text`
 * (the body exactly as it came; `body` is its parse): the text with the id's value and the other
 * abstracted value (the task id, or the arguments) masked, after the headers and the id's type.
 * Only when the text pins the masked values down, else undefined (the JSON key then):
 *  - no backslash in the text: no escape sequence, so every string in it reads as its value and
 *    every `"` begins or ends a string;
 *  - `tasks/get` / `tasks/cancel`: the task id is one this service mints (a UUID, which cannot
 *    occur inside a number or a literal), equals `Mcp-Name`, and occurs once in the text: at
 *    `params.taskId`;
 *  - `tools/call`: the tool name is a plain token equal to `Mcp-Name` (as for the JSON key);
 *    when `params.arguments` is there, it is an object, the key `"arguments"` occurs once in the
 *    text (so that once is `params.arguments`) and its value, from `{` to the matching `}`, is
 *    masked (`valueEnd`);
 *  - the key `"id"` occurs once outside that mask (so that once is the top-level id), its value
 *    is exactly the id's JSON, followed by `,`, `}` or whitespace.
 * Two texts with the same key then differ only in the id's value (of the same type) and in the
 * task id or the arguments' object, which is all the JSON key abstracts too (a text written
 * differently, e.g. with other spacing or key order, is another shape: validated once more,
 * never confused).
 */
function rawShapeKey(h: LadderHeaders, body: Record<string, unknown>, text: string): string | undefined {
  const id = body.id;
  if (!(typeof id === 'string' || Number.isSafeInteger(id))) return undefined;
  if (text.length > MAX_KEY_CHARS || text.includes('\\')) return undefined;
  const params = body.params as Record<string, unknown>;
  let other: Mask | null | undefined;
  if (body.method === 'tasks/get' || body.method === 'tasks/cancel') other = taskIdMask(h, params.taskId, text);
  else if (body.method === 'tools/call') other = argumentsMask(h, params, text);
  if (other === undefined) return undefined;
  const idMask = idValueMask(text, JSON.stringify(id), other);
  if (idMask === undefined) return undefined;
  const [first, second] = other === null || idMask[0] < other[0] ? [idMask, other] : [other, idMask];
  let key = `r${h.httpMethod}\n${h.protocolVersion ?? '\u0002'}\n${h.method ?? '\u0002'}\n${typeof id === 'string' ? 's' : 'i'}\n`;
  key += text.slice(0, first[0]) + first[2];
  key += second === null ? text.slice(first[1]) : text.slice(first[1], second[0]) + second[2] + text.slice(second[1]);
  return key;
}

/** Where the task id of a poll is in `text` (raw key rules above), or undefined. */
function taskIdMask(h: LadderHeaders, taskId: unknown, text: string): Mask | undefined {
  if (!isWellFormedTaskId(taskId) || h.name !== taskId) return undefined;
  const at = text.indexOf(taskId);
  if (at < 0 || text.indexOf(taskId, at + 1) >= 0) return undefined;
  return [at, at + taskId.length, TASK_ID_MASK];
}

/**
 * Where the arguments' object of a `tools/call` is in `text` (raw key rules above); null when the
 * call has none (nothing to mask), undefined when the text does not pin it down.
 */
function argumentsMask(h: LadderHeaders, params: Record<string, unknown>, text: string): Mask | null | undefined {
  if (typeof params.name !== 'string' || !PLAIN_TOKEN.test(params.name) || h.name !== params.name) return undefined;
  if (params.arguments === undefined) return null;
  if (!isObject(params.arguments)) return undefined;
  const from = valueAfterOnlyKey(text, '"arguments"', null);
  if (from === undefined || text[from] !== '{') return undefined;
  const to = valueEnd(text, from);
  return to === undefined ? undefined : [from, to, ARGUMENTS_MASK];
}

/** Where the id's value `idJson` is in `text`: the value of the one key `"id"` outside `other`. */
function idValueMask(text: string, idJson: string, other: Mask | null): Mask | undefined {
  const from = valueAfterOnlyKey(text, '"id"', other);
  if (from === undefined) return undefined;
  const to = from + idJson.length;
  if (!text.startsWith(idJson, from) || !VALUE_END.has(text[to]!)) return undefined;
  return [from, to, ID_MASK];
}

/**
 * Where the value of the key `quoted` (e.g. `"id"`) begins in `text`, when the text (parsed, no
 * backslash) has that key exactly once outside `outside`; else undefined. Without escapes every
 * occurrence of `"id"` is the string `id`, and a key when `:` follows (after any whitespace).
 */
function valueAfterOnlyKey(text: string, quoted: string, outside: Mask | null): number | undefined {
  let found: number | undefined;
  for (let i = text.indexOf(quoted); i >= 0; i = text.indexOf(quoted, i + quoted.length)) {
    if (outside !== null && i >= outside[0] && i < outside[1]) continue;
    const colon = skipSpace(text, i + quoted.length);
    if (text[colon] !== ':') continue;
    if (found !== undefined) return undefined;
    found = skipSpace(text, colon + 1);
  }
  return found;
}

const skipSpace = (text: string, i: number) => {
  while (text[i] === ' ' || text[i] === '\t' || text[i] === '\n' || text[i] === '\r') i++;
  return i;
};

/**
 * The end (exclusive) of the JSON object or array that begins at `text[from]`, in a text that
 * parsed and has no backslash (so every `"` begins or ends a string); undefined if it does not
 * close within the text.
 */
function valueEnd(text: string, from: number): number | undefined {
  let depth = 0;
  let inString = false;
  for (let i = from; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 34 /* " */) inString = !inString;
    else if (inString) continue;
    else if (c === 123 /* { */ || c === 91 /* [ */) depth++;
    else if ((c === 125 /* } */ || c === 93) /* ] */ && --depth === 0) return i + 1;
  }
  return undefined;
}

/**
 * What is known of a request of this shape, when it passed the ladder before: undefined when
 * not known (validate in full).
 */
export const ladderAccepted = (key: string | undefined): ShapeVerdict | undefined =>
  key === undefined ? undefined : ladder.get(key);

/**
 * Remembers that a request of this shape passed the ladder (`modern`: as a modern request), and
 * returns what is now known of it.
 */
export function rememberLadderAccepted(key: string, modern: boolean): ShapeVerdict {
  const verdict: ShapeVerdict = { modern };
  ladder.set(key, verdict);
  return verdict;
}

/**
 * `_meta` carries the 2026 envelope the SDK accepts as is (its clientCapabilities and
 * clientInfo pass the spec's schemas), remembered by the `_meta` JSON (both outcomes: this check
 * has no message). `check` runs when the shape is new. (A request whose shape the ladder
 * remembered keeps this verdict in its `ShapeVerdict` and does not come here again.)
 */
export function envelopeVerdict(
  meta: Record<string, unknown>,
  check: (meta: Record<string, unknown>) => boolean,
): boolean {
  let key: string | undefined;
  try {
    key = JSON.stringify(meta);
  } catch {
    return check(meta);
  }
  if (key.length > MAX_KEY_CHARS) return check(meta);
  const known = envelopes.get(key);
  if (known !== undefined) return known;
  const ok = check(meta);
  envelopes.set(key, ok);
  return ok;
}

/** The spec's schemas for the envelope's two typed members (hot-path.ts uses them through `envelopeVerdict`). */
export const specEnvelopeCheck = (caps: unknown, info: unknown): boolean =>
  isSpecType.ClientCapabilities(caps) && (info === undefined || isSpecType.Implementation(info));
