/**
 * The tool kit: what a tool author writes against (design D1, D2). A tool is defined once and
 * serves every client: as a task (worker, `tasks/get`), synchronously (worker, the gateway
 * holds the request) or, for short `forbidden` tools, inline in the gateway. The author never
 * sees wire code: `run(args, ctx)` returns a result or "input required".
 *
 * A tool set (`toolsets/*.ts`, enabled by `MCP_TOOLSETS`) is a `Toolset` module: its tools, and
 * optionally prompts (prompts.ts, `definePrompt`) and resources (resources.ts,
 * `defineResource`, `defineResourceTemplate`), which the gateway serves itself.
 *
 * Arguments:
 *  - `inputSchema` (zod) validates them and types `run`; `tools/list` shows its JSON Schema
 *    (2020-12). A failed validation is a tool execution error (`isError: true` with the
 *    validation message, so the model can correct itself: SEP-1303), not a JSON-RPC error.
 *  - `inputJsonSchema` (optional): a JSON Schema advertised verbatim, for what zod cannot say
 *    (`$defs`/`$anchor`/`$ref`, `if`/`then`/`else`, …); arguments must satisfy it too.
 *  - `mcpHeader('Region', z.string())` (or zod's `.meta({ 'x-mcp-header': 'Region' })`) on a
 *    string, integer or boolean property: clients mirror the argument into the
 *    `Mcp-Param-Region` header (SEP-2243) and the gateway refuses a request whose header and
 *    argument disagree (`-32020`, HTTP 400). The registry checks every declaration when the
 *    process starts (x-mcp-header.ts, H-18). Never annotate a secret or personal data: headers
 *    are logged and seen by proxies.
 *
 * Results the model can read (design D11). Claude Code hands the model **only
 * `structuredContent`** when a result has it, and `content` otherwise (observed with Claude Code 2.1.328); other
 * clients show `content`. So:
 *  - a result **without** `structuredContent` is plain text: build it with `textResult(text)`;
 *  - a result **with** `structuredContent` carries everything the model needs inside it (the
 *    report itself, the instruction, the outcome of the question), and `content` is its faithful
 *    rendering: the same facts in words. Build it with `structuredResult({ summary, ...fields })`:
 *    `summary` is the text a model must read, kept in `structuredContent.summary` and sent as
 *    the one text block of `content`; the other fields are the machine-readable facts.
 *  - `textResult` cannot take `structuredContent` (a type error), and `unreadableFacts(result)`
 *    names what a hand-made result's text says that its `structuredContent` does not; a unit
 *    test runs it over every path of every tool (test/unit/model-readable.test.ts).
 * Progress (`ctx.progress`) follows the same reader: a message given with a `total` carries no
 * percentage of its own, because clients show one computed from `total` (Claude Code appends
 * "(NN%)" itself).
 */
import type { z } from 'zod';
export { MAX_TOOL_TIMEOUT_MS } from '@mcp-tasks/config';
import { X_MCP_HEADER_KEY } from './x-mcp-header.js';
import type { RetryPolicy } from './durable.js';

/** Severity of a log message (RFC 5424 names, as MCP's `LoggingLevel`). */
export type LogLevel = 'debug' | 'info' | 'notice' | 'warning' | 'error' | 'critical' | 'alert' | 'emergency';

/** Whether a tool may, must or must not run as a task (T-01, T-04). */
export type TaskSupport = 'forbidden' | 'optional' | 'required';

/** Content block of a CallToolResult (text is all the built-in tools need). */
export type ContentBlock = { type: 'text'; text: string } | Record<string, unknown>;

/** A tool's final result: a CallToolResult (`isError: true` still ends the task `completed`, T-14). */
export interface ToolResult {
  content: ContentBlock[];
  structuredContent?: Record<string, unknown>;
  isError?: boolean;
}

/** One input request: `{method, params}` without `id` (core InputRequest). */
export interface InputRequest {
  method: 'elicitation/create' | 'sampling/createMessage' | 'roots/list';
  params?: Record<string, unknown>;
}

/**
 * "Input required": the step ends; the task parks in `input_required` (no worker slot held,
 * D2) or, synchronously, the call returns MRTR `input_required`. `run` is called again with
 * `ctx.inputResponses` (same logical keys) and `ctx.state`.
 */
export interface InputRequired {
  kind: 'input_required';
  /** Logical keys chosen by the tool. The kit makes the wire keys unique per task (T-29). */
  inputRequests: Record<string, InputRequest>;
  /** Small JSON state handed back to the next `run`. */
  state?: unknown;
  /** Shown as the task's `statusMessage` while it waits. */
  statusMessage?: string;
}

export type StepOutcome = ToolResult | InputRequired;

/** An answer as the tool sees it: an ElicitResult (or other InputResponse). */
export type InputResponse = { action?: 'accept' | 'decline' | 'cancel'; content?: Record<string, unknown> } & Record<
  string,
  unknown
>;

/** Where and how the current step runs. */
export interface ToolContext {
  /**
   * Aborts on `tasks/cancel` or a synchronous caller's disconnect (reason `'cancelled'`), on
   * worker shutdown (`'shutdown'`), when another worker took the step over (`'lock-lost'`), or
   * when the step ran longer than the tool's `timeoutMs` (`'timeout'`): `signal.reason` says which.
   */
  signal: AbortSignal;
  /** `task`: the client holds a task handle; `sync`: a request waits; `inline`: runs in the gateway. */
  mode: 'task' | 'sync' | 'inline';
  /** 1 for the first step; + 1 after each round of input. */
  step: number;
  /**
   * Which run of this step this is: 1 the first time; 2, 3, … when the step is run again from
   * the beginning because the worker running it stopped (crashed, was killed, shut down past
   * SHUTDOWN_GRACE_MS) or lost its job lock. The client then sees "Restarted after its worker
   * stopped (attempt N)" as the task's statusMessage. Steps are at-least-once: a tool with side
   * effects (a payment, an e-mail, a write elsewhere) must make them idempotent, e.g. key them
   * by `taskId` + `step` so a second run finds and reuses the first run's effect, or check on
   * `attempt > 1` whether it already happened before doing it again. Always 1 in the gateway
   * (`mode: 'inline'`).
   */
  attempt: number;
  taskId?: string;
  /** Answers to the previous `InputRequired`, by logical key. Empty on the first step. */
  inputResponses: Record<string, InputResponse>;
  /** `state` from the previous `InputRequired`. */
  state: unknown;
  /** Client capabilities declared on the request that started the tool. */
  clientCapabilities: Record<string, unknown>;
  /** The caller's principal (`anonymous` until authentication lands). */
  principal: string;
  /**
   * Reports progress: `done` of `total` (units of the tool's choosing), with a short message
   * (clients cut at ~200 chars). On a task it becomes `statusMessage`; tasks get no progress
   * notifications (T-41). With a `total`, the message says what is happening, not how much of
   * it is done: no percentage in it (clients add their own from `total`, e.g. Claude Code's
   * "(NN%)", so it would show twice).
   */
  progress(done: number, total?: number, message?: string): Promise<void>;
  /** Sleeps `ms`, rejecting with an `AbortError` as soon as `signal` aborts. */
  sleep(ms: number): Promise<void>;
  /**
   * A log message for the client (`notifications/message`, spec transport §10, deprecated in
   * 2026-07-28 but functional). Sent on the request's response stream only when it runs in the
   * gateway (`mode: 'inline'`) and the request set `_meta["io.modelcontextprotocol/logLevel"]`
   * at or below `level` (L-01); otherwise (no log level, a worker step, a task) it goes to the
   * service's own log only. Never log a secret.
   */
  log(level: LogLevel, data: unknown): Promise<void>;
  /**
   * Stores `value` (JSON, at most CHECKPOINT_MAX_BYTES = 64 KiB by default) as this step's
   * checkpoint, replacing the previous one; the next run of the same step (after a crash, a
   * SIGKILL, a drain, a lost lock or a retry) gets it as `lastCheckpoint` (D14). Fenced like a
   * result: a run that no longer holds the step (another worker took it over) has its
   * checkpoint refused and its `signal` aborted (`'lock-lost'`). Rejects for a value that is
   * not JSON or is too large. A no-op in the gateway (`mode: 'inline'`). The step is
   * at-least-once between checkpoints: work after the last one may run again.
   */
  checkpoint(value: unknown): Promise<void>;
  /** The last checkpoint of this step stored by an earlier run of it; `undefined` on a first run. */
  lastCheckpoint: unknown;
  /**
   * Aborts when the worker is draining (SIGTERM: a deploy, a scale-down), with a `ToolHandOver`
   * as its reason; never on a cancel. A tool that honours it checkpoints and throws (e.g.
   * `ctx.drainSignal.throwIfAborted()`): its step moves to another worker at once (R-02). A tool
   * that ignores it keeps the old behaviour: it may finish within SHUTDOWN_GRACE_MS, then its
   * step is released and run again from its last checkpoint.
   */
  drainSignal: AbortSignal;
  /** `drainSignal.aborted`. */
  readonly draining: boolean;
}

/** A tool definition. `inputSchema` is a zod object; `run` may be called once per step. */
export interface ToolDefinition<S extends z.ZodObject = z.ZodObject> {
  name: string;
  title?: string;
  description: string;
  inputSchema: S;
  /**
   * The `inputSchema` that `tools/list` advertises, verbatim, when zod cannot express it (JSON
   * Schema 2020-12, root `type: "object"`). Arguments must satisfy both this schema and
   * `inputSchema` (which then only types `run`).
   */
  inputJsonSchema?: Record<string, unknown>;
  taskSupport: TaskSupport;
  /** `gateway`: short `forbidden` tools run inline in the gateway (D1). Default `worker`. */
  runsIn?: 'gateway' | 'worker';
  /**
   * Longest a synchronous call of this tool may hold its request (ms) before the work continues
   * as a task (D1). Default: `SYNC_BUDGET_MS`; `SYNC_BUDGET_MS_BY_TOOL` overrides both.
   */
  syncBudgetMs?: number;
  /**
   * Longest one run of a step of this tool may take on a worker (ms, an integer from 1 to
   * MAX_TOOL_TIMEOUT_MS = 7 days). Default: the service's `TOOL_TIMEOUT_MS` (1 hour). It counts
   * from the moment a worker starts the step: time queued, waiting for the principal's share of
   * the workers, or parked for input does not count, and each step (after each round of input)
   * gets the whole limit again; a step re-run after its worker stopped starts a new count. Past
   * it, `ctx.signal` aborts with the reason `'timeout'` and the task ends `failed` with a
   * JSON-RPC error naming the tool and the limit (`data.reason: 'tool_timeout'`).
   */
  timeoutMs?: number;
  /**
   * Retry policy for transient failures (durable.ts `RetryPolicy`, R-04): the most runs of one
   * step, and the first delay. Without it a `ToolRetry` gets 3 runs and 1 s, 2 s delays.
   */
  retry?: RetryPolicy;
  /** Client capabilities the tool needs on the request (e.g. `{elicitation: {form: {}}}`): -32021 without them (B-07). */
  requiresCapabilities?: Record<string, unknown>;
  /**
   * Optional MRTR rounds before a task exists (T-16): return `InputRequired` to ask, or the
   * arguments to start the task with.
   */
  preTask?(args: z.infer<S>, ctx: ToolContext): Promise<InputRequired | { args: z.infer<S> }>;
  run(args: z.infer<S>, ctx: ToolContext): Promise<StepOutcome>;
}

/** Identity helper that keeps the zod type of `args` in `run`. */
export function defineTool<S extends z.ZodObject>(def: ToolDefinition<S>): ToolDefinition<S> {
  return def;
}

/**
 * Annotates a string, integer or boolean argument with `x-mcp-header` (SEP-2243): clients send
 * its value in the `Mcp-Param-<headerName>` header too, so that proxies can route on it without
 * reading the body; the gateway checks that they agree. `headerName` is an RFC 9110 token,
 * unique (case-insensitively) within the tool's schema. Example:
 * `z.object({ region: mcpHeader('Region', z.string()) })`.
 */
export function mcpHeader<T extends z.ZodType>(headerName: string, schema: T): T {
  return schema.meta({ [X_MCP_HEADER_KEY]: headerName });
}

/**
 * A plain text `CallToolResult`: one text block, no `structuredContent` (D11). For a result
 * with machine-readable fields use `structuredResult`.
 */
export function textResult(text: string, extra: { isError?: boolean } = {}): ToolResult {
  return { content: [{ type: 'text', text }], ...(extra.isError === undefined ? {} : { isError: extra.isError }) };
}

/**
 * The fields of a structured result: `summary` (what the result says, in words: everything the
 * model needs to read) and any JSON fields beside it.
 */
export type StructuredFields = { summary: string } & Record<string, unknown>;

/**
 * A `CallToolResult` with `structuredContent` that a model can read whatever it is shown (D11):
 * `structuredContent` = `{summary, ...fields}` (summary first, so a reader of the JSON meets
 * the words first) and `content` = one text block with `summary`. E.g.
 * `structuredResult({ summary: 'Shared the report to #research.', channel: '#research', shared: true })`.
 */
export function structuredResult(fields: StructuredFields, extra: { isError?: boolean } = {}): ToolResult {
  const { summary, ...rest } = fields;
  return {
    content: [{ type: 'text', text: summary }],
    structuredContent: { summary, ...rest },
    ...(extra.isError === undefined ? {} : { isError: extra.isError }),
  };
}

/** Every string value of `v`, at any depth. */
function strings(v: unknown, out: string[] = []): string[] {
  if (typeof v === 'string') out.push(v);
  else if (Array.isArray(v)) for (const x of v) strings(x, out);
  else if (v !== null && typeof v === 'object') for (const x of Object.values(v)) strings(x, out);
  return out;
}

/**
 * What a result's `content` tells a reader that its `structuredContent` does not (D11): `[]`
 * when the result has no `structuredContent`, or when each text block, or else each of its
 * lines and sentences, appears in a string of `structuredContent` (at any depth). A non-text
 * block (image, audio, resource) is reported as `[<type> block]`: a model shown only
 * `structuredContent` never sees it.
 */
export function unreadableFacts(result: { content?: unknown; structuredContent?: unknown }): string[] {
  if (result.structuredContent === undefined || result.structuredContent === null) return [];
  const carried = strings(result.structuredContent);
  const has = (s: string) => carried.some((c) => c.includes(s));
  const missing: string[] = [];
  for (const block of Array.isArray(result.content) ? (result.content as Record<string, unknown>[]) : []) {
    if (block?.type !== 'text' || typeof block.text !== 'string') {
      missing.push(`[${String(block?.type)} block]`);
      continue;
    }
    const text = block.text.trim();
    if (text === '' || has(text)) continue;
    const pieces = text
      .split(/\n+|(?<=[.!?])\s+/)
      .map((p) => p.trim())
      .filter(Boolean);
    missing.push(...pieces.filter((p) => !has(p)));
  }
  return missing;
}

/** Builds an `InputRequired` outcome. */
export function inputRequired(spec: Omit<InputRequired, 'kind'>): InputRequired {
  return { kind: 'input_required', ...spec };
}

/** True for an `InputRequired` outcome (of a tool step or a prompt). */
export function isInputRequired(o: unknown): o is InputRequired {
  return typeof o === 'object' && o !== null && (o as InputRequired).kind === 'input_required';
}

/** A form-mode elicitation request (E-02: flat object of primitive properties). */
export function elicitForm(message: string, requestedSchema: Record<string, unknown>): InputRequest {
  return { method: 'elicitation/create', params: { mode: 'form', message, requestedSchema } };
}

/**
 * A sampling request (`sampling/createMessage`): the client's model answers with a
 * `CreateMessageResult` (`{role, content, model, stopReason}`), read raw from
 * `ctx.inputResponses[key]`. Needs the `sampling` client capability (declare it in
 * `requiresCapabilities`).
 */
export function samplingRequest(
  params: { messages: { role: 'user' | 'assistant'; content: ContentBlock }[]; maxTokens: number } & Record<
    string,
    unknown
  >,
): InputRequest {
  return { method: 'sampling/createMessage', params };
}

/** A `roots/list` request: the answer is `{roots: [{uri, name?}]}`. Needs the `roots` client capability. */
export function rootsRequest(): InputRequest {
  return { method: 'roots/list' };
}

/**
 * Thrown by a tool for a protocol-level failure: the task ends `failed` with this JSON-RPC
 * error (T-14); a synchronous call gets it as the JSON-RPC error.
 */
export class ToolProtocolError extends Error {
  override name = 'ToolProtocolError';
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
  }
}

/** Thrown by a tool to end the task `cancelled` (e.g. the user declined to answer). */
export class ToolCancelled extends Error {
  override name = 'ToolCancelled';
}

/** Reads an accepted form answer; `undefined` when missing, declined or cancelled. */
export function accepted(responses: Record<string, InputResponse>, key: string): Record<string, unknown> | undefined {
  const r = responses[key];
  if (!r || r.action !== 'accept') return undefined;
  return r.content ?? {};
}

/** Sleep that rejects with an AbortError when `signal` aborts. */
export function abortableSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(abortError(signal));
    const t = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(abortError(signal));
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

function abortError(signal: AbortSignal): Error {
  const e = new Error(`aborted: ${String(signal.reason ?? '')}`);
  e.name = 'AbortError';
  return e;
}
