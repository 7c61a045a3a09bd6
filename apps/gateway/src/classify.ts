/**
 * Classifies a parsed `POST /mcp` body once (design D12): its era, method, id, the client
 * capabilities it declares, and for `tools/call` the tool, its parsed arguments and the lane it
 * takes. Everything downstream reads this value instead of deciding again.
 *
 * Lanes of a `tools/call` (D1):
 *  - `task`:   the request declares the Tasks extension and the tool allows tasks → a task
 *              handle (`CreateTaskResult`, T-02), after any pre-task MRTR rounds (T-16);
 *  - `sync`:   the tool runs on a worker and the request gets no task → the request is held
 *              as SSE until the result (D1, D6);
 *  - `inline`: a short `forbidden` tool that runs in the gateway (`runsIn: 'gateway'`).
 * A call that will be answered at once with an error has no lane: unknown tool or arguments
 * over MAX_ARGUMENTS_BYTES (`-32602`), arguments the tool's schema refuses (an `isError` tool
 * result, SEP-1303), a task-only tool without the extension (`-32021`, T-04), a tool that
 * asks questions without the capability it needs (`-32021`, B-07; on the 2025 lane an `isError`
 * result: there a client can answer only on its held call, with a session whose `initialize`
 * declared elicitation, legacy-ask.ts).
 */
import {
  classifyInboundRequest,
  UnsupportedProtocolVersionError,
  type InboundLadderRejection,
} from '@modelcontextprotocol/server';
import type { ToolDefinition } from '@mcp-tasks/tools';
import type { ToolRegistry } from '@mcp-tasks/tools/internal';
import { declaresTasksExtension } from './tasks-extension.js';
import { parseArguments } from './arguments.js';
import { checkParamHeaders, checkStandardHeaders } from './headers.js';
import {
  ladderAccepted,
  ladderShapeKey,
  rememberLadderAccepted,
  type LadderHeaders,
  type ShapeVerdict,
} from './verdicts.js';

/** Protocol revisions served on the modern (per-request `_meta`) lane. */
export const MODERN_VERSIONS = ['2026-07-28'];

export type Era = 'legacy' | 'modern';
export type Lane = 'task' | 'sync' | 'inline';

/** The parsed body fields the gateway reads (anything else is the SDK's). */
export type McpBody = {
  id?: unknown;
  method?: string;
  params?: {
    name?: string;
    arguments?: unknown;
    notifications?: { taskIds?: unknown };
    inputResponses?: unknown;
    _meta?: Record<string, unknown>;
  };
};

export interface Classification {
  era: Era;
  method: string | undefined;
  id: unknown;
  /** `_meta` clientCapabilities of this request (`{}` when absent); a 2025 request: its session's (ClassifyOptions.legacyCaps). */
  caps: Record<string, unknown>;
  /** Declares `io.modelcontextprotocol/tasks` on this request (T-01); false on the 2025 lane (T-07). */
  declaresTasks: boolean;
  /** `subscriptions/listen` asking for `notifications.taskIds` (T-39). */
  listensToTasks: boolean;
  /** `tools/call`: the tool named, when enabled. */
  tool?: ToolDefinition;
  /** `tools/call`: the arguments as the tool's schema parsed them (absent when invalid). */
  args?: Record<string, unknown>;
  /** `tools/call`: why the arguments do not satisfy the tool's schema (a tool execution error, SEP-1303). */
  argsError?: string;
  /** `tools/call`: the arguments exceed MAX_ARGUMENTS_BYTES (`-32602`). */
  argsTooLarge?: string;
  /** `tools/call`: capabilities the tool needs that the request lacks (B-07). */
  missingCaps?: Record<string, unknown>;
  /** `tools/call`: the lane it runs in; absent when it is answered at once with an error. */
  lane?: Lane;
  /**
   * Why the validation ladder refuses the request, when the HTTP side was given: the SDK's era
   * classification (`_meta` envelope, header version vs body: B-05, H-11), then, for a modern
   * request, the supported version (H-12), the standard headers against the body (H-15,
   * headers.ts) — the same rungs, in the same order, as the SDK's handler — and, for a
   * `tools/call` of a tool with `x-mcp-header` arguments, its `Mcp-Param-*` headers (H-15,
   * H-17). Answered by the route before anything is counted, reserved or written.
   */
  rejected?: InboundLadderRejection;
  /** The request carries a `requestState` (an MRTR retry continuing earlier work). */
  continues: boolean;
  /**
   * What the validation memo knows of this request's shape (verdicts.ts), when it has one and
   * the ladder accepted it: the hot path keeps its envelope verdict there.
   */
  shape?: ShapeVerdict;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * A body without the 2026 per-request envelope is served on the 2025 lane (the SDK's handler
 * serves both eras on one route).
 */
export function eraOf(body: McpBody): Era {
  return typeof body.params?._meta?.['io.modelcontextprotocol/protocolVersion'] === 'string' ? 'modern' : 'legacy';
}

/** Capabilities in `required` (top-level keys) that `caps` lacks; undefined when none. */
export function missingCaps(
  required: Record<string, unknown> | undefined,
  caps: Record<string, unknown>,
): Record<string, unknown> | undefined {
  if (!required) return undefined;
  const missing = Object.fromEntries(Object.entries(required).filter(([k]) => caps[k] === undefined));
  return Object.keys(missing).length ? missing : undefined;
}

/** The HTTP side of a request, for the SDK's validation ladder. */
export interface HttpSide {
  method: string;
  headers: Record<string, string | string[] | undefined>;
  /** The body's JSON text as it came, when the parser kept it (body-parser.ts): the memo's key. */
  bodyText?: string;
}

const first = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v);

export interface ClassifyOptions {
  /** Headers and method: run the SDK's ladder too (`rejected`). */
  http?: HttpSide;
  /** Largest `tools/call` arguments, serialized JSON bytes (MAX_ARGUMENTS_BYTES). */
  maxArgumentsBytes?: number;
  /** Size of the whole body in bytes, when known: arguments cannot be larger. */
  bodyBytes?: number;
  /**
   * The capabilities a 2025-era request counts with: what its session's client declared at
   * `initialize` and can use on a held call (legacy-ask.ts `legacyCallCapabilities`); none
   * without a session.
   */
  legacyCaps?: Record<string, unknown>;
  /**
   * A 2025-11-25 `tools/call` with `params.task` in a session that has that revision's tasks
   * (legacy-tasks.ts): a tool that runs only as a task may run as one (LG-15), on lane `sync`,
   * which legacy-tasks.ts turns into a task.
   */
  legacyTask?: boolean;
}

/** Classifies a parsed JSON body (any JSON value: non-objects classify as an unknown method). */
export function classify(body: unknown, registry: ToolRegistry, o: ClassifyOptions = {}): Classification {
  const b: McpBody = isObject(body) ? body : {};
  const era = eraOf(b);
  const rawCaps = b.params?._meta?.['io.modelcontextprotocol/clientCapabilities'];
  const caps: Record<string, unknown> = era === 'modern' ? (isObject(rawCaps) ? rawCaps : {}) : (o.legacyCaps ?? {});
  const declaresTasks = declaresTasksExtension(era, caps);
  const c: Classification = {
    era,
    method: typeof b.method === 'string' ? b.method : undefined,
    id: b.id,
    caps,
    declaresTasks,
    listensToTasks: b.method === 'subscriptions/listen' && b.params?.notifications?.taskIds !== undefined,
    continues: typeof (b.params as Record<string, unknown> | undefined)?.requestState === 'string',
  };
  if (o.http) {
    const h = o.http.headers;
    const headers = {
      httpMethod: o.http.method,
      protocolVersion: first(h['mcp-protocol-version']),
      method: first(h['mcp-method']),
      name: first(h['mcp-name']),
    };
    // A shape that passed the ladder before passes again (verdicts.ts); the Mcp-Param-* headers
    // depend on the arguments and are checked every time.
    const key = ladderShapeKey(headers, body, o.http.bodyText);
    const known = ladderAccepted(key);
    let modern: boolean;
    if (known) {
      modern = known.modern;
      c.shape = known;
    } else {
      const v = ladderVerdict(headers, body);
      c.rejected = v.rejected;
      modern = v.modernRequest;
      if (!c.rejected && key !== undefined) c.shape = rememberLadderAccepted(key, modern);
    }
    if (!c.rejected && modern && c.method === 'tools/call') c.rejected = paramHeadersVerdict(registry, b, h);
  }
  if (c.method !== 'tools/call') return c;

  const tool = registry.get(String(b.params?.name ?? ''));
  if (!tool) return c;
  c.tool = tool;
  const parsed = parseArguments(tool, b.params?.arguments, o.maxArgumentsBytes, o.bodyBytes);
  if (!parsed.ok) {
    if (parsed.tooLarge) c.argsTooLarge = parsed.message;
    else c.argsError = parsed.message;
    return c;
  }
  c.args = parsed.args;
  if (tool.taskSupport === 'required' && !declaresTasks && !o.legacyTask) return c;
  const missing = missingCaps(tool.requiresCapabilities, caps);
  if (missing) {
    c.missingCaps = missing;
    return c;
  }
  if (tool.runsIn === 'gateway') c.lane = 'inline';
  else c.lane = declaresTasks && tool.taskSupport !== 'forbidden' ? 'task' : 'sync';
  return c;
}

/**
 * The validation ladder up to the `Mcp-Param-*` headers (see `Classification.rejected`): the
 * SDK's era classification, the supported version, the standard headers. `modernRequest`: the
 * ladder goes on to the `Mcp-Param-*` headers.
 */
function ladderVerdict(
  headers: LadderHeaders,
  body: unknown,
): { rejected?: InboundLadderRejection; modernRequest: boolean } {
  const outcome = classifyInboundRequest({
    httpMethod: headers.httpMethod,
    protocolVersionHeader: headers.protocolVersion,
    mcpMethodHeader: headers.method,
    mcpNameHeader: headers.name,
    body,
  });
  if (outcome.kind === 'reject') return { rejected: outcome, modernRequest: false };
  if (outcome.kind !== 'modern' || outcome.messageKind !== 'request') return { modernRequest: false };
  const claimed = outcome.classification.revision;
  if (claimed === undefined || !MODERN_VERSIONS.includes(claimed)) {
    const e = new UnsupportedProtocolVersionError({ supported: [...MODERN_VERSIONS], requested: claimed ?? 'unknown' });
    return {
      rejected: {
        kind: 'reject',
        rung: 'envelope',
        cell: 'unsupported-version',
        httpStatus: 400,
        code: e.code,
        message: e.message,
        data: e.data,
        settled: true,
      },
      modernRequest: true,
    };
  }
  const rejected = checkStandardHeaders(
    { protocolVersion: headers.protocolVersion, method: headers.method, name: headers.name },
    outcome.message.method,
    outcome.message.params,
    claimed,
  );
  return rejected ? { rejected, modernRequest: true } : { modernRequest: true };
}

/** A `tools/call` of a tool with `x-mcp-header` arguments: its `Mcp-Param-*` headers (H-15, H-17). */
function paramHeadersVerdict(
  registry: ToolRegistry,
  b: McpBody,
  h: HttpSide['headers'],
): InboundLadderRejection | undefined {
  const declarations = registry.headerDeclarations(String(b.params?.name ?? ''));
  return declarations.length ? checkParamHeaders(declarations, b.params?.arguments, h) : undefined;
}

/** A `tools/call` of a worker tool: it needs Redis (503 + Retry-After while Redis is away, D10). */
export function toolNeedsRedis(c: Classification): boolean {
  return c.method === 'tools/call' && !!c.tool && c.tool.runsIn !== 'gateway';
}
