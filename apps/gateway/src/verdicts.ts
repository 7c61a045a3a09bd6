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
 */
import { LRUCache } from 'lru-cache';
import { isSpecType } from '@modelcontextprotocol/server';

/** Shapes remembered per cache (a gateway sees a few client versions, not thousands). */
const MAX_SHAPES = 1000;
/** Longest shape key remembered (characters). */
const MAX_KEY_CHARS = 4096;
const PLAIN_TOKEN = /^[A-Za-z0-9._~-]{1,200}$/;

/** Shape → the ladder accepted it as a modern request (true: the `Mcp-Param-*` rung follows) or otherwise. */
const ladder = new LRUCache<string, boolean>({ max: MAX_SHAPES });
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
export function ladderShapeKey(h: LadderHeaders, body: unknown): string | undefined {
  if (!isObject(body) || !isObject(body.params)) return undefined;
  const { id, params, ...rest } = body;
  const idShape = typeof id === 'string' ? 's' : Number.isSafeInteger(id) ? 'i' : undefined;
  if (idShape === undefined) return undefined;
  let shaped: Record<string, unknown>;
  if (body.method === 'tasks/get' || body.method === 'tasks/cancel') {
    const taskId = params.taskId;
    if (typeof taskId !== 'string' || !PLAIN_TOKEN.test(taskId) || h.name !== taskId) return undefined;
    shaped = { ...params, taskId: '' };
  } else if (body.method === 'tools/call') {
    if (typeof params.name !== 'string' || !PLAIN_TOKEN.test(params.name) || h.name !== params.name) return undefined;
    if (params.arguments !== undefined && !isObject(params.arguments)) return undefined;
    shaped = params.arguments === undefined ? params : { ...params, arguments: {} };
  } else return undefined;
  let key: string;
  try {
    key = JSON.stringify([h.httpMethod, h.protocolVersion ?? null, h.method ?? null, idShape, rest, shaped]);
  } catch {
    return undefined;
  }
  return key.length <= MAX_KEY_CHARS ? key : undefined;
}

/**
 * Whether a request of this shape passed the ladder before: undefined when not known (validate
 * in full), else whether it passed as a modern request (the `Mcp-Param-*` rung follows).
 */
export const ladderAccepted = (key: string | undefined): boolean | undefined =>
  key === undefined ? undefined : ladder.get(key);

/** Remembers that a request of this shape passed the ladder (`modern`: as a modern request). */
export function rememberLadderAccepted(key: string | undefined, modern: boolean): void {
  if (key !== undefined) ladder.set(key, modern);
}

/**
 * `_meta` carries the 2026 envelope the SDK accepts as is (its clientCapabilities and
 * clientInfo pass the spec's schemas), remembered by the `_meta` JSON (both outcomes: this check
 * has no message). `check` runs when the shape is new.
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
