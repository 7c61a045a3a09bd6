/**
 * What the gateway's modules share (design D12): the process-wide services, built once in
 * `main.ts`, and the per-request values, built once by the route and passed along as values
 * (never captured in a per-request closure).
 *
 *   route (mcp-route.ts) ── classify once ──► Exchange ──► SDK server (server-factory.ts)
 *                                                  └─────► Call (per SDK handler invocation)
 */
import type { ServerContext } from '@modelcontextprotocol/server';
import { SERVICE_NAME, serviceVersion, type Config } from '@mcp-tasks/config';
import type { Span, Tracer } from '@opentelemetry/api';
import type { GatewayMetrics, Logger } from '@mcp-tasks/observability';
import type { TaskRecord, TaskStore } from '@mcp-tasks/task-store';
import type { JobQueues, TaskEvents, WorkerPresence } from '@mcp-tasks/jobs';
import type { PromptRegistry, ResourceRegistry, ToolRegistry } from '@mcp-tasks/tools/internal';
import type { Classification, Era } from './classify.js';
import type { Continuation, StateCodec } from './mrtr.js';
import type { WorkerToolsCheck } from './worker-tools.js';
import type { Idempotency } from './idempotency.js';
import type { Session, SessionStore } from './sessions.js';

/** MCP `serverInfo`: the service's name and the `version` of the repository's package.json. */
export const SERVER_INFO = { name: SERVICE_NAME, version: serviceVersion() };

/** Process-wide singletons every module may use (built once per process). */
export interface GatewayDeps {
  config: Config;
  log: Logger;
  store: TaskStore;
  queues: JobQueues;
  events: TaskEvents;
  registry: ToolRegistry;
  /** Prompts of the enabled tool sets (served by the gateway). */
  prompts: PromptRegistry;
  /** Resources and resource templates of the enabled tool sets (served by the gateway). */
  resources: ResourceRegistry;
  /** Prometheus metrics; absent in in-process uses. */
  metrics?: GatewayMetrics;
  /** Live workers, counted in the background (workers.ts). */
  presence?: WorkerPresence;
  /** Set only when tracing is on (N-14). */
  tracer?: Tracer;
  /** Which tools the live workers run (worker-tools.ts); absent in in-process tests. */
  workerTools?: WorkerToolsCheck;
}

/** The deps plus what the MCP handlers build once at start. */
export interface Gateway extends GatewayDeps {
  /** Signs and verifies MRTR `requestState` (M-05, M-06). */
  codec: StateCodec<Continuation>;
  /** 2025-era sessions in Redis (D15, sessions.ts). */
  sessions: SessionStore;
  /** Aborted when the process shuts down: synchronous calls hand off at once (D1). */
  shutdown: AbortSignal;
}

/**
 * Per-HTTP-exchange state: set by the route, read by the SDK handlers through
 * `authInfo.extra.exchange` (the SDK passes `authInfo` through untouched).
 */
export interface Exchange {
  /** The authenticated caller (D9). */
  principal: string;
  /**
   * When this gateway received the request (ms since the epoch, from Fastify's
   * `reply.elapsedTime`): a synchronous call's budget counts from it, so the time taken to create
   * its task on a busy gateway is inside the budget, as it is inside the client's own timeout (D1).
   */
  receivedAt?: number;
  /** The request, classified once (era, method, tool, lane). */
  classification: Classification;
  /**
   * `params.inputResponses` exactly as sent. The SDK normalises it (a `null` arrives as `{}`),
   * so `tasks/update` validates this one (T-27: it must be an object).
   */
  rawInputResponses?: unknown;
  /** Set once a task handle is about to be returned (D4: cancelled if the client vanished first). */
  createdTaskId?: string;
  /**
   * A slot among the principal's outstanding tasks, reserved by the route for the task this
   * request will create (MAX_OUTSTANDING_TASKS); released when the request ends without using it.
   */
  reservation?: { taskId: string; priority: number; used: boolean; at?: number; created?: TaskRecord };
  /**
   * The request's `Idempotency-Key` when it starts work (idempotency.ts): with `replay`, the task
   * an earlier call with the key created, answered instead of a new one; without, the key is
   * claimed for `reservation.taskId` (created at `reservation.at`, the claim's time, so the key
   * and the record expire together).
   */
  idempotency?: Idempotency;
  /** The exchange's span when tracing is on (tracing.ts): a created task keeps its context (N-14). */
  span?: Span;
  /** The 2025-era session the request named (`Mcp-Session-Id`), resolved for its principal. */
  session?: Session;
  /** An `initialize` whose client gets 2025-11-25 tasks: its result declares `capabilities.tasks` (legacy-tasks.ts). */
  offersLegacyTasks?: boolean;
  /** Ends the response now, without another byte (a held 2025 call its client cancelled). */
  endStream?: () => void;
}

/** A JSON-RPC request this server sends a 2025-era client (`elicitation/create`). */
export interface ServerRequestMessage {
  jsonrpc: '2.0';
  id: number;
  method: string;
  params?: unknown;
}

/** What a call of a 2025-era client with a session may do besides answering (legacy-ask.ts). */
export interface LegacyChannel {
  session: Session;
  /** This call's JSON-RPC id (what the client's `notifications/cancelled` names). */
  requestId: string | number;
  /** Sends a request to the client on this call's SSE stream, before the call's response (LG-04). */
  push(message: ServerRequestMessage): Promise<void>;
  /** Ends this call's stream without a response (the client cancelled the call). */
  endStream(): void;
}

/** One MCP handler invocation: the SDK context plus the exchange's values. */
export interface Call {
  era: Era;
  principal: string;
  /** `_meta` clientCapabilities of this request only (B-06). */
  caps: Record<string, unknown>;
  /** The request declares `io.modelcontextprotocol/tasks` (T-01); always false on the 2025 lane (T-07). */
  declaresTasks: boolean;
  exchange: Exchange;
  /** The SDK's handler context: abort signal, notify, requestState, inputResponses. */
  ctx: ServerContext;
  /** A 2025-era call whose client has a session (absent otherwise). */
  legacy?: LegacyChannel;
}

/** The exchange the route attached to this request (a bare anonymous one in in-process tests). */
export function exchangeOf(ctx: ServerContext): Exchange | undefined {
  return ctx.http?.authInfo?.extra?.exchange as Exchange | undefined;
}
