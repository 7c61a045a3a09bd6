/**
 * What the gateway's modules share (design D12): the process-wide services, built once in
 * `main.ts`, and the per-request values, built once by the route and passed along as values
 * (never captured in a per-request closure).
 *
 *   route (mcp-route.ts) ── classify once ──► Exchange ──► SDK server (server-factory.ts)
 *                                                  └─────► Call (per SDK handler invocation)
 */
import type { ServerContext } from '@modelcontextprotocol/server';
import type { Config } from '@mcp-tasks/config';
import type { Logger } from '@mcp-tasks/observability';
import type { TaskStore } from '@mcp-tasks/task-store';
import type { JobQueues, TaskEvents } from '@mcp-tasks/jobs';
import type { PromptRegistry, ResourceRegistry, ToolRegistry } from '@mcp-tasks/tools';
import type { Classification, Era } from './classify.js';
import type { Continuation, StateCodec } from './mrtr.js';

export const SERVER_INFO = { name: 'mcp-task-service', version: '0.1.0' };

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
}

/** The deps plus what the MCP handlers build once at start. */
export interface Gateway extends GatewayDeps {
  /** Signs and verifies MRTR `requestState` (M-05, M-06). */
  codec: StateCodec<Continuation>;
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
  reservation?: { taskId: string; priority: number; used: boolean };
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
}

/** The exchange the route attached to this request (a bare anonymous one in in-process tests). */
export function exchangeOf(ctx: ServerContext): Exchange | undefined {
  return ctx.http?.authInfo?.extra?.exchange as Exchange | undefined;
}
