/**
 * Test client for a 2026-07-28 MCP server that offers the Tasks extension
 * (`io.modelcontextprotocol/tasks`), driven through the official requester
 * `@modelcontextprotocol/ext-tasks` (0.2.2) on top of `@modelcontextprotocol/client` (2.4.0).
 *
 * Wiring, as in the shared SDK notes:
 *   - SDK `Client` with capabilities `{elicitation:{form:{}}, extensions:{tasks:{}}}`,
 *     `versionNegotiation: {mode: {pin: '2026-07-28'}}`, over `StreamableHTTPClientTransport`.
 *     `connect()` performs `server/discover`; ext-tasks reads the server's
 *     `capabilities.extensions["io.modelcontextprotocol/tasks"]` (it must be exactly `{}`)
 *     to select the V2 ("2026") task generation.
 *   - `createTaskSessionFromClient(client, {endpointId, rawDispatch, v2RequestFraming, onInputRequest})`.
 *     The SDK client cannot decode `resultType:"task"`, so every `tools/call` and `tasks/*`
 *     request goes through `rawDispatch` below (plain `fetch`). Everything else
 *     (`server/discover`, the session's own `tools/list`) goes through the SDK transport to `url`.
 *
 * Run under `node --import tsx`.
 */
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import {
  DispatchError,
  createApplicationInputHandler,
  createTaskSessionEndpointId,
  createTaskSessionFromClient,
} from '@modelcontextprotocol/ext-tasks/client';
import type {
  ApplicationCreateMessageResult,
  ApplicationElicitResult,
  ApplicationInputRequest,
  ApplicationListRootsResult,
  DispatchOptions,
  JsonRpcResponse,
  RawClientDispatch,
  ResolvedInputExchangeContext,
  TaskEnabledSession,
  TaskView,
  ToolCallOptions,
  ToolExecution,
  ToolExecutionSettlement,
} from '@modelcontextprotocol/ext-tasks/client';

export const PROTOCOL_VERSION = '2026-07-28';
const TASKS_EXTENSION_ID = 'io.modelcontextprotocol/tasks';

/** Client capabilities declared on the connection and framed into every raw request. */
export const CLIENT_CAPABILITIES = {
  elicitation: { form: {} },
  extensions: { [TASKS_EXTENSION_ID]: {} },
} as const;

export const CLIENT_INFO = { name: 'ext-tasks-test-client', version: '0.0.1' } as const;

/** JSON value as ext-tasks defines it (its `JsonValue` is not re-exported from `/client`). */
type Json = null | boolean | number | string | readonly Json[] | { readonly [key: string]: Json };

/** One input request (elicitation, sampling, roots) as passed to `answer`. */
export interface InputRequestForAnswer {
  /** The server's key in `inputRequests` (task input) or MRTR `inputRequests` (request input). */
  key: string;
  /** `elicitation/create`, `sampling/createMessage` or `roots/list`. */
  method: string;
  params: any;
  /** Extra context (not required by callers): `task` input via tasks/update or `request` input via an MRTR retry. */
  scope: 'request' | 'task';
  taskId?: string;
}

export interface DispatchLogEntry {
  method: string;
  url: string;
  mcpName?: string;
  /** HTTP status; 0 when fetch itself failed (network error or abort). */
  status: number;
}

export interface OpenExtTasksSessionOptions {
  /** MCP endpoint, e.g. `http://127.0.0.1:3000/mcp`. Used for connect (`server/discover`) and `tools/list`. */
  url: string;
  /**
   * URL for the n-th raw dispatch (`tools/call` and `tasks/*`), n = 0, 1, 2, …,
   * i.e. the index its entry will have in `dispatchLog`. Default: always `url`.
   */
  urlFor?: (n: number) => string;
  /**
   * Answers each input request. Return an ElicitResult for `elicitation/create`
   * (default: `{action:'accept', content:{}}`), a CreateMessageResult for sampling
   * (default: throw, which ext-tasks turns into "skip this key"), a ListRootsResult for
   * roots (default: `{roots: []}`).
   */
  answer?: (req: InputRequestForAnswer) => Promise<any> | any;
  /**
   * Extra HTTP headers on every request, e.g. `{ Authorization: 'Bearer <key>' }`: given to the
   * SDK transport as `requestInit.headers` and set on each raw dispatch.
   */
  headers?: Record<string, string>;
}

export interface ExtTasksSession {
  session: TaskEnabledSession;
  client: Client;
  /** Closes the session (ext-tasks cancels still-running owned executions, best effort), then the client. */
  close(): Promise<void>;
  dispatchLog: DispatchLogEntry[];
  /** Every input request passed to `answer`, in order. */
  inputLog: InputRequestForAnswer[];
  /** Background errors ext-tasks reported via `onError` (e.g. a throwing `answer`). */
  errors: Error[];
}

const INPUT_METHOD: Record<ApplicationInputRequest['kind'], string> = {
  elicitation: 'elicitation/create',
  sampling: 'sampling/createMessage',
  roots: 'roots/list',
};

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** Parses an SSE body and returns the JSON-RPC response whose id matches. */
function responseFromSse(body: string, id: string): Record<string, unknown> | undefined {
  // Events are separated by a blank line; an event's data is its `data:` lines joined by "\n".
  for (const block of body.replace(/\r\n?/g, '\n').split(/\n\n+/)) {
    const data = block
      .split('\n')
      .filter((line) => line.startsWith('data:'))
      .map((line) => line.slice(5).replace(/^ /, ''))
      .join('\n');
    if (data.length === 0) continue;
    let message: unknown;
    try {
      message = JSON.parse(data);
    } catch {
      continue;
    }
    if (isRecord(message) && message.id === id && ('result' in message || 'error' in message)) return message;
  }
  return undefined;
}

function mcpNameFor(method: string, params: Record<string, unknown> | undefined): string | undefined {
  if (method === 'tools/call' && typeof params?.name === 'string') return params.name;
  if (method.startsWith('tasks/') && typeof params?.taskId === 'string') return params.taskId;
  return undefined;
}

/** Connects a pinned 2026-07-28 SDK client and wraps it in an ext-tasks session. */
export async function openExtTasksSession(opts: OpenExtTasksSessionOptions): Promise<ExtTasksSession> {
  const dispatchLog: DispatchLogEntry[] = [];
  const inputLog: InputRequestForAnswer[] = [];
  const errors: Error[] = [];
  const urlFor = opts.urlFor ?? (() => opts.url);
  // Raw dispatches still running; close() waits for them (ext-tasks' close-time cancel is fire-and-forget).
  const inFlight = new Set<Promise<unknown>>();

  const client = new Client(
    { ...CLIENT_INFO },
    {
      capabilities: structuredClone(CLIENT_CAPABILITIES) as any,
      versionNegotiation: { mode: { pin: PROTOCOL_VERSION } },
    },
  );
  await client.connect(
    new StreamableHTTPClientTransport(
      new URL(opts.url),
      opts.headers === undefined ? {} : { requestInit: { headers: { ...opts.headers } } },
    ),
  );

  const rawDispatch: RawClientDispatch = (request, options) => {
    const running = dispatchOnce(request, options);
    inFlight.add(running);
    void running.then(
      () => inFlight.delete(running),
      () => inFlight.delete(running),
    );
    return running;
  };

  const dispatchOnce = async (request: Json, options?: DispatchOptions): Promise<JsonRpcResponse> => {
    if (!isRecord(request) || typeof request.method !== 'string')
      throw new DispatchError('rawDispatch: request must be an object with a string method');
    const method = request.method;
    const params = isRecord(request.params) ? request.params : undefined;
    const n = dispatchLog.length;
    // String ids keep these apart from the SDK transport's own numeric ids (0, 1, …) in server logs.
    const id = `ext-tasks-${n}`;
    const url = urlFor(n);
    const headers = new Headers({
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
      'MCP-Protocol-Version': PROTOCOL_VERSION,
      'Mcp-Method': method,
    });
    for (const [name, value] of Object.entries(opts.headers ?? {})) headers.set(name, value);
    const derivedName = mcpNameFor(method, params);
    if (derivedName !== undefined) headers.set('Mcp-Name', derivedName);
    // Context headers last, through Headers.set(): names are case-insensitive, so ext-tasks'
    // own "Mcp-Name" replaces ours instead of producing "id, id" (which the server answers -32020).
    for (const [name, value] of Object.entries(options?.context?.headers ?? {})) headers.set(name, value);
    const mcpName = headers.get('mcp-name') ?? undefined; // what is actually sent
    const entry: DispatchLogEntry = { method, url, ...(mcpName === undefined ? {} : { mcpName }), status: 0 };
    dispatchLog.push(entry);

    const timeoutMs = options?.context?.requestTimeoutMs;
    const signals = [options?.signal, timeoutMs === undefined ? undefined : AbortSignal.timeout(timeoutMs)].filter(
      (s): s is AbortSignal => s !== undefined,
    );
    const signal = signals.length === 0 ? undefined : signals.length === 1 ? signals[0] : AbortSignal.any(signals);

    let response: Response;
    try {
      response = await fetch(url, {
        method: 'POST',
        headers,
        body: JSON.stringify({ jsonrpc: '2.0', id, ...request }),
        ...(signal === undefined ? {} : { signal }),
      });
    } catch (error) {
      if (options?.signal?.aborted) throw options.signal.reason ?? error;
      // Only an observation is safe to resend; ext-tasks retries a retryable DispatchError once.
      throw new DispatchError(`rawDispatch: ${method} to ${url} failed`, method === 'tasks/get', { cause: error });
    }
    entry.status = response.status;
    const contentType = response.headers.get('content-type') ?? '';
    const body = await response.text();

    let message: Record<string, unknown> | undefined;
    if (contentType.includes('text/event-stream')) {
      message = responseFromSse(body, id);
    } else if (body.length > 0) {
      try {
        const parsed: unknown = JSON.parse(body);
        if (isRecord(parsed)) message = parsed;
      } catch {
        message = undefined;
      }
    }
    if (message === undefined)
      throw new DispatchError(
        `rawDispatch: ${method} got HTTP ${response.status} (${contentType || 'no content-type'}) without a JSON-RPC response for id ${id}: ${body.slice(0, 200)}`,
      );
    if (isRecord(message.error)) {
      const { code, message: text, data } = message.error;
      return {
        kind: 'error',
        error: {
          code: typeof code === 'number' ? code : -32603,
          message: typeof text === 'string' ? text : 'Unknown error',
          ...(data === undefined ? {} : { data: data as Json }),
        },
      };
    }
    if (!('result' in message))
      throw new DispatchError(`rawDispatch: ${method} got HTTP ${response.status} with neither result nor error`);
    return { kind: 'result', result: message.result as Json };
  };

  const answer = opts.answer;
  const ask = async (request: ApplicationInputRequest, context: ResolvedInputExchangeContext): Promise<any> => {
    const req: InputRequestForAnswer = {
      key: context.inputId ?? '',
      method: INPUT_METHOD[request.kind],
      params: request.params ?? {},
      scope: context.scope,
      ...(context.taskId === undefined ? {} : { taskId: context.taskId }),
    };
    inputLog.push(req);
    if (answer !== undefined) return await answer(req);
    if (request.kind === 'elicitation') return { action: 'accept', content: {} } satisfies ApplicationElicitResult;
    if (request.kind === 'roots') return { roots: [] } satisfies ApplicationListRootsResult;
    throw new Error(`no answer configured for ${req.method} (key ${req.key})`);
  };

  let session: TaskEnabledSession;
  try {
    session = createTaskSessionFromClient(client, {
      endpointId: await createTaskSessionEndpointId('mcp-task-service-tests', { url: opts.url }),
      rawDispatch,
      v2RequestFraming: {
        protocolVersion: PROTOCOL_VERSION,
        clientInfo: { ...CLIENT_INFO },
        clientCapabilities: structuredClone(CLIENT_CAPABILITIES) as unknown as Record<string, Json>,
      },
      onInputRequest: createApplicationInputHandler({
        elicitation: (request, context) => ask(request, context) as Promise<ApplicationElicitResult>,
        sampling: (request, context) => ask(request, context) as Promise<ApplicationCreateMessageResult>,
        roots: (request, context) => ask(request, context) as Promise<ApplicationListRootsResult>,
      }),
      onError: (error) => {
        errors.push(error);
      },
    });
  } catch (error) {
    await client.close();
    throw error;
  }
  if (session.capabilities.inputResponses !== true) {
    // generation "none": the server did not advertise extensions[tasks] = {} exactly.
    await session.close();
    await client.close();
    throw new Error(
      `server did not negotiate Tasks V2 (server capabilities: ${JSON.stringify(client.getServerCapabilities())})`,
    );
  }

  let closed: Promise<void> | undefined;
  return {
    session,
    client,
    dispatchLog,
    inputLog,
    errors,
    close() {
      closed ??= (async () => {
        try {
          await session.close();
          // Let best-effort cancels that session.close() started reach the server (bounded).
          if (inFlight.size > 0) {
            let timer: NodeJS.Timeout | undefined;
            const timeout = new Promise<void>((resolve) => {
              timer = setTimeout(resolve, 5_000);
            });
            // Loop: a settling dispatch cannot start another one after session.close(), but be safe.
            for (let round = 0; inFlight.size > 0 && round < 10; round++)
              if (
                (await Promise.race([Promise.allSettled([...inFlight]), timeout.then(() => 'timeout' as const)])) ===
                'timeout'
              )
                break;
            clearTimeout(timer);
          }
        } finally {
          await client.close();
        }
      })();
      return closed;
    },
  };
}

/** The default V2 tool result type (`CallToolResultV2`), loosely typed for tests. */
export type ToolResult = { resultType?: string; content?: any[]; isError?: boolean; [key: string]: unknown };

export interface CallToolToOutcomeOptions {
  /**
   * Cancel the task (`tasks/cancel`) as soon as an observed task snapshot satisfies this.
   * Checked on the CreateTaskResult and on every `tasks/get` snapshot ext-tasks accepts.
   */
  cancelWhen?: (task: TaskView) => boolean;
  /** Cancel the task this many ms after `tools/call` returned it. */
  cancelAfterMs?: number;
  /** Called with the execution right after `tools/call` returned, e.g. to cancel by hand. */
  onExecution?: (execution: ToolExecution<ToolResult>) => void;
  /** Called for every event `settle()` observes (task snapshots, then the outcome). */
  onEvent?: NonNullable<Parameters<ToolExecution<ToolResult>['settle']>[0]>['onEvent'];
  /** Stops local waiting (settle then rejects); does not cancel the remote task. */
  signal?: AbortSignal;
  /** Passed to `session.callTool` (headers, metadata, task preference, per-request timeout …). */
  callOptions?: ToolCallOptions<ToolResult>;
}

export interface ToolOutcome extends ToolExecutionSettlement<ToolResult> {
  /** `task` if `tools/call` returned a CreateTaskResult, `immediate` otherwise. */
  kind: 'immediate' | 'task';
  taskId?: string;
  /** The completed tool result (`outcome.result`), if the outcome is `completed`. */
  result?: ToolResult;
  /** True if this helper sent `tasks/cancel` (cancelWhen / cancelAfterMs). */
  cancelRequested: boolean;
  /** Every task snapshot observed, in order (CreateTaskResult first). */
  tasks: TaskView[];
}

/**
 * Calls a tool through ext-tasks and waits for its outcome.
 *
 * ext-tasks cancellation: `execution.cancel()` sends `tasks/cancel {taskId}` and, once the server
 * acks (`{resultType:"complete"}`), ends the execution locally with `outcome.status === "cancelled"`
 * without waiting for the server's task to reach `cancelled` (V2 cancellation is cooperative).
 * Check the server-side state with `session.task(taskId).snapshot()` if a test needs it.
 * On an immediate (non-task) execution `cancel()` is a no-op.
 */
export async function callToolToOutcome(
  session: TaskEnabledSession,
  name: string,
  args: Record<string, unknown> = {},
  options: CallToolToOutcomeOptions = {},
): Promise<ToolOutcome> {
  const execution = await session.callTool<ToolResult>(name, args as Record<string, Json>, options.callOptions);
  const taskId = execution.kind === 'task' ? (execution.handle.taskId as string) : undefined;
  options.onExecution?.(execution);

  let cancelRequested = false;
  let cancelError: unknown;
  const cancelPromises: Promise<void>[] = [];
  // A failed tasks/cancel (error, or an ack ext-tasks rejects) leaves the execution polling;
  // stop waiting then and throw the cancel error instead of hanging.
  const stop = new AbortController();
  const requestCancel = (): void => {
    if (cancelRequested || execution.kind !== 'task') return;
    cancelRequested = true;
    cancelPromises.push(
      execution.cancel().catch((error: unknown) => {
        cancelError = error;
        stop.abort(error);
      }),
    );
  };
  const timer = options.cancelAfterMs === undefined ? undefined : setTimeout(requestCancel, options.cancelAfterMs);

  const tasks: TaskView[] = [];
  let settlement: ToolExecutionSettlement<ToolResult>;
  try {
    settlement = await execution.settle({
      signal: options.signal === undefined ? stop.signal : AbortSignal.any([options.signal, stop.signal]),
      onEvent: async (event) => {
        if (event.type === 'task') {
          tasks.push(event.task);
          if (options.cancelWhen?.(event.task) === true) requestCancel();
        }
        await options.onEvent?.(event);
      },
    });
  } catch (error) {
    if (cancelError !== undefined) throw cancelError;
    throw error;
  } finally {
    if (timer !== undefined) clearTimeout(timer);
  }
  await Promise.all(cancelPromises);
  if (cancelError !== undefined && settlement.outcome.status !== 'cancelled') throw cancelError;
  return {
    ...settlement,
    kind: execution.kind,
    ...(taskId === undefined ? {} : { taskId }),
    ...(settlement.outcome.status === 'completed' ? { result: settlement.outcome.result } : {}),
    cancelRequested,
    tasks,
  };
}
