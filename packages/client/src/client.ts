/**
 * A small typed client for one MCP task service endpoint (2026-07-28 with the Tasks extension):
 * `tools/list`, `tools/call` (which may answer a task handle, a result, or an MRTR
 * `input_required`), `tasks/get|update|cancel` and `subscriptions/listen` for task ids. Every
 * request declares the extension and form elicitation (T-01, T-50) and carries the standard
 * headers (T-42). A JSON-RPC error, or an HTTP error without one, is thrown as `RpcError`.
 */
import { rpc, type RpcOptions } from './rpc.js';
import { isRecord, paramHeaders, type ClientInfo } from './wire.js';

export type TaskStatus = 'working' | 'input_required' | 'completed' | 'failed' | 'cancelled';

/** One entry of `inputRequests`: a request the server would otherwise send (elicitation, sampling, roots). */
export interface InputRequest {
  method: string;
  params?: Record<string, any>;
}

/** A `DetailedTask` (T-21): what `tasks/get` and `notifications/tasks` carry. */
export interface Task {
  taskId: string;
  status: TaskStatus;
  statusMessage?: string;
  createdAt: string;
  lastUpdatedAt: string;
  ttlMs: number | null;
  pollIntervalMs?: number;
  inputRequests?: Record<string, InputRequest>;
  result?: CallToolResult;
  error?: { code: number; message: string; data?: unknown };
}

/** A tool's result (`CallToolResult`), loosely typed. */
export interface CallToolResult {
  content?: { type: string; text?: string; [k: string]: unknown }[];
  structuredContent?: Record<string, unknown>;
  isError?: boolean;
  [k: string]: unknown;
}

/** What `tools/call` can answer a client that declares the Tasks extension (T-03, MRTR). */
export type CallOutcome =
  | ({ resultType: 'task' } & Task)
  | ({ resultType: 'complete' } & CallToolResult)
  | { resultType: 'input_required'; inputRequests: Record<string, InputRequest>; requestState?: string };

/** A `tools/list` entry. `execution.taskSupport` is only there when the server sends it. */
export interface ToolInfo {
  name: string;
  title?: string;
  description?: string;
  inputSchema: Record<string, any>;
  execution?: { taskSupport?: 'forbidden' | 'optional' | 'required' };
  _meta?: Record<string, unknown>;
}

/** One `notifications/progress` of a synchronous call (P-01..P-04). */
export interface Progress {
  progress: number;
  total?: number;
  message?: string;
}

/** A JSON-RPC error from the server, or an HTTP answer that carried none. */
export class RpcError extends Error {
  constructor(
    message: string,
    /** JSON-RPC error code; undefined when the HTTP answer had no JSON-RPC error. */
    readonly code: number | undefined,
    /** HTTP status of the answer. */
    readonly httpStatus: number,
    readonly data?: unknown,
  ) {
    super(message);
    this.name = 'RpcError';
  }
}

export interface TaskClientOptions {
  /** The MCP endpoint, e.g. `http://127.0.0.1:3000/mcp`. */
  url: string;
  /** Sent as `Authorization: Bearer <token>` when set. */
  token?: string;
  clientInfo?: ClientInfo;
}

export interface RequestOptions {
  signal?: AbortSignal;
  /** Extra `_meta` keys. */
  meta?: Record<string, unknown>;
  headers?: Record<string, string>;
  onMessage?: (message: Record<string, any>) => void;
}

export interface CallToolOptions {
  /** The tool's `inputSchema` from `tools/list`, for its `Mcp-Param-*` headers (SEP-2243). */
  inputSchema?: Record<string, any>;
  /** MRTR retry: answers to the previous round's `inputRequests` (M-nn). */
  inputResponses?: Record<string, unknown>;
  /** MRTR retry: the previous round's `requestState`, sent back unchanged. */
  requestState?: string;
  /** Asks for `notifications/progress` (synchronous calls only; tasks have none, T-41). */
  onProgress?: (p: Progress) => void;
  signal?: AbortSignal;
}

export interface ListenOptions {
  /** The ids the server agreed to report on (S-02); the others are unknown or not the caller's. */
  onAck?: (taskIds: string[]) => void;
  /** Each `notifications/tasks`: the full task, as `tasks/get` would return it. */
  onTask: (task: Task) => void;
  signal?: AbortSignal;
}

let progressTokens = 0;

export class TaskClient {
  constructor(readonly options: TaskClientOptions) {}

  /**
   * Sends one request and returns its `result`.
   * @throws RpcError for a JSON-RPC error or an HTTP answer without a result; the fetch error
   * (a `TypeError` with a `cause`) when the server cannot be reached.
   */
  async request(
    method: string,
    params: Record<string, unknown> = {},
    o: RequestOptions = {},
  ): Promise<Record<string, any>> {
    const ro: RpcOptions = {
      ...(this.options.token ? { token: this.options.token } : {}),
      ...(this.options.clientInfo ? { clientInfo: this.options.clientInfo } : {}),
      ...(o.signal ? { signal: o.signal } : {}),
      ...(o.meta ? { meta: o.meta } : {}),
      ...(o.headers ? { headers: o.headers } : {}),
      ...(o.onMessage ? { onMessage: o.onMessage } : {}),
    };
    const r = await rpc(this.options.url, method, params, ro);
    const err = r.body.error;
    if (err) throw new RpcError(err.message, err.code, r.status, err.data);
    if (!isRecord(r.body.result)) {
      const raw = typeof r.body.raw === 'string' ? `: ${r.body.raw.slice(0, 200)}` : '';
      throw new RpcError(
        `HTTP ${r.status} from ${this.options.url} without a JSON-RPC result${raw}`,
        undefined,
        r.status,
      );
    }
    return r.body.result;
  }

  /** Every tool, following `nextCursor`. */
  async listTools(o: { signal?: AbortSignal } = {}): Promise<ToolInfo[]> {
    const tools: ToolInfo[] = [];
    let cursor: string | undefined;
    do {
      const r = await this.request('tools/list', cursor === undefined ? {} : { cursor }, o);
      tools.push(...((r.tools ?? []) as ToolInfo[]));
      cursor = typeof r.nextCursor === 'string' && r.nextCursor ? r.nextCursor : undefined;
    } while (cursor !== undefined);
    return tools;
  }

  /** `tools/call`: a task handle, a result, or an MRTR round to answer (T-03). */
  async callTool(name: string, args: Record<string, unknown>, o: CallToolOptions = {}): Promise<CallOutcome> {
    const params: Record<string, unknown> = { name, arguments: args };
    if (o.inputResponses) params.inputResponses = o.inputResponses;
    if (o.requestState !== undefined) params.requestState = o.requestState;
    const progressToken = o.onProgress ? `p-${process.pid}-${++progressTokens}` : undefined;
    const onProgress = o.onProgress;
    const result = await this.request('tools/call', params, {
      ...(o.signal ? { signal: o.signal } : {}),
      ...(o.inputSchema ? { headers: paramHeaders(o.inputSchema, args) } : {}),
      ...(progressToken !== undefined ? { meta: { progressToken } } : {}),
      ...(onProgress
        ? {
            onMessage: (m) => {
              if (m.method === 'notifications/progress' && m.params?.progressToken === progressToken) {
                const { progress, total, message } = m.params;
                onProgress({
                  progress,
                  ...(typeof total === 'number' ? { total } : {}),
                  ...(typeof message === 'string' ? { message } : {}),
                });
              }
            },
          }
        : {}),
    });
    const resultType = result.resultType ?? 'complete'; // a missing resultType means complete (core rule)
    return { ...result, resultType };
  }

  getTask(taskId: string, o: { signal?: AbortSignal } = {}): Promise<Task> {
    return this.request('tasks/get', { taskId }, o) as Promise<unknown> as Promise<Task>;
  }

  /** `tasks/update` with answers keyed like the task's `inputRequests` (T-27, T-30). */
  async updateTask(
    taskId: string,
    inputResponses: Record<string, unknown>,
    o: { signal?: AbortSignal } = {},
  ): Promise<void> {
    await this.request('tasks/update', { taskId, inputResponses }, o);
  }

  /** `tasks/cancel` (T-36): an acknowledgement; the task ends `cancelled` shortly after, cooperatively. */
  async cancelTask(taskId: string, o: { signal?: AbortSignal } = {}): Promise<void> {
    await this.request('tasks/cancel', { taskId }, o);
  }

  /**
   * `subscriptions/listen` for `taskIds` (T-39, T-49): calls `onTask` with every
   * `notifications/tasks` until the stream ends (the server shuts down) or `signal` aborts.
   * @throws RpcError when the server refuses the stream; the abort reason on abort.
   */
  async listenTasks(taskIds: string[], o: ListenOptions): Promise<void> {
    await this.request(
      'subscriptions/listen',
      { notifications: { taskIds } },
      {
        ...(o.signal ? { signal: o.signal } : {}),
        onMessage: (m) => {
          if (m.method === 'notifications/subscriptions/acknowledged')
            o.onAck?.(m.params?.notifications?.taskIds ?? []);
          else if (m.method === 'notifications/tasks' && isRecord(m.params)) {
            const { _meta, ...task } = m.params;
            o.onTask(task as Task);
          }
        },
      },
    );
  }
}

export const isTerminalStatus = (s: string): boolean => s === 'completed' || s === 'failed' || s === 'cancelled';
