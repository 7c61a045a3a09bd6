/**
 * The MCP server factory: one fresh low-level `Server` per request (the SDK's handler refuses an
 * instance still serving another request; a fresh one costs about 2 ms, so everything expensive
 * lives outside), wired to
 * the process-wide `Gateway`. It only registers handlers; each lives in its own module:
 *  - `tools/list`  the enabled tools (registry, built once, fixed order);
 *  - `tools/call`  tools-call.ts;
 *  - `tasks/get`, `tasks/update`, `tasks/cancel`  tasks-methods.ts (Tasks extension);
 *  - `prompts/*`  prompts.ts, `resources/*`  resources.ts, `completion/complete`  completions.ts,
 *    each registered (and its capability advertised) only when the enabled tool sets have
 *    something to serve there, so a client never sees a capability that answers `-32601`.
 * `logging` is advertised always: gateway-run tools may log (`ctx.log`), which the SDK sends
 * only to requests that set `_meta.logLevel` (L-01).
 * `server/discover`, version errors (`-32022`), `-32601` for `tasks/list` / `tasks/result` and
 * removed methods, and the verification of `requestState` (through our codec) are the SDK's;
 * header validation (`-32020`) is the route's (classify.ts, headers.ts).
 */
import { withLegacyExecution } from './legacy-tool-list.js';
import {
  Server,
  type McpServerFactory,
  type ServerCapabilities,
  type ServerContext,
} from '@modelcontextprotocol/server';
import { z } from 'zod';
import type { Era } from './classify.js';
import { exchangeOf, SERVER_INFO, type Call, type Exchange, type Gateway } from './context.js';
import { newErrorId } from '@mcp-tasks/observability';
import { clientErrorOf } from './errors.js';
import { declaresTasksExtension, TASKS_EXTENSION } from './tasks-extension.js';
import { legacyCallCapabilities } from './legacy-ask.js';
import { LEGACY_TASKS_CAPABILITY, sessionHasTasks } from './legacy-tasks.js';
import { registerCompletions } from './completions.js';
import { registerPrompts } from './prompts.js';
import { registerResources } from './resources.js';
import { cancelTask, gateTasks, getTask, updateTask } from './tasks-methods.js';
import { toolsCall } from './tools-call.js';

const TaskIdParams = z.object({ taskId: z.string() }).passthrough();

/** An exchange for a request the route did not classify (in-process use of the factory). */
const bareExchange = (): Exchange => ({
  principal: 'anonymous',
  classification: {
    era: 'modern',
    method: undefined,
    id: undefined,
    caps: {},
    declaresTasks: false,
    listensToTasks: false,
    continues: false,
  },
});

/**
 * The per-invocation `Call` built from the SDK context and the route's exchange. A 2025-era call
 * of a client with a session counts with the capabilities its session declared and gets a
 * `legacy` channel: requests to the client go on this call's stream through the SDK's transport
 * (`server.transport.send`, related to this request), with the session's own ids.
 */
function callOf(era: Era, ctx: ServerContext, server?: Server): Call {
  const exchange = exchangeOf(ctx) ?? bareExchange();
  const envelope = ctx.mcpReq.envelope as Record<string, unknown> | undefined;
  const raw = envelope?.['io.modelcontextprotocol/clientCapabilities'];
  const caps =
    era === 'modern'
      ? raw && typeof raw === 'object'
        ? (raw as Record<string, unknown>)
        : {}
      : legacyCallCapabilities(exchange.session);
  const session = era === 'legacy' ? exchange.session : undefined;
  const requestId = ctx.mcpReq.id;
  return {
    era,
    principal: exchange.principal,
    caps,
    declaresTasks: declaresTasksExtension(era, caps),
    exchange,
    ctx,
    ...(session && server
      ? {
          legacy: {
            session,
            requestId,
            push: async (message) => {
              if (!server.transport) throw new Error('the request is closed');
              await server.transport.send(message as never, { relatedRequestId: requestId });
            },
            endStream: () => exchange.endStream?.(),
          },
        }
      : {}),
  };
}

/** Builds the per-request server factory over the process-wide gateway services. */
export function createServerFactory(gw: Gateway): McpServerFactory {
  const completes = gw.prompts.completes || gw.resources.completes;
  const capabilities: ServerCapabilities = {
    tools: {},
    logging: {},
    ...(gw.prompts.size ? { prompts: {} } : {}),
    ...(gw.resources.size ? { resources: {} } : {}),
    ...(completes ? { completions: {} } : {}),
  };
  /** Runs a handler; what it throws reaches the client only as `clientErrorOf` allows (no Redis text). */
  const guard = async <T>(method: string, fn: () => Promise<T>): Promise<T> => {
    try {
      return await fn();
    } catch (e) {
      throw clientErrorOf(e, gw.log, method, newErrorId);
    }
  };
  return ({ era, authInfo }) => {
    const exchange = authInfo?.extra?.exchange as Exchange | undefined;
    const server = new Server(SERVER_INFO, {
      capabilities: {
        ...capabilities,
        // The extension exists only on the 2026-07-28 wire (T-07); a 2025-11-25 client that
        // declared the revision's own `tasks` capability gets that revision's tasks (LG-10).
        ...(era === 'modern' ? { extensions: { [TASKS_EXTENSION]: {} } } : {}),
        ...(era === 'legacy' && exchange?.offersLegacyTasks ? { tasks: LEGACY_TASKS_CAPABILITY } : {}),
      },
      requestState: { verify: (state, ctx) => gw.codec.verify(state, callOf(era, ctx).principal) },
    });
    const call = (ctx: ServerContext) => callOf(era, ctx);
    if (gw.prompts.size) registerPrompts(server, gw, call);
    if (gw.resources.size) registerResources(server, gw, call);
    if (completes) registerCompletions(server, gw);

    // A 2025-11-25 session with tasks sees each tool's `execution.taskSupport` (LG-15).
    const legacyTasks = era === 'legacy' && sessionHasTasks(exchange?.session);
    server.setRequestHandler('tools/list', async () => ({
      tools: (legacyTasks
        ? withLegacyExecution(gw.registry.list(), (n) => gw.registry.get(n))
        : gw.registry.list()) as never,
    }));

    server.setRequestHandler('tools/call', async (request, ctx) =>
      guard(
        'tools/call',
        async () =>
          (await toolsCall(
            gw,
            callOf(era, ctx, server),
            request.params as { name: string; arguments?: Record<string, unknown> },
          )) as never,
      ),
    );

    server.setRequestHandler('tasks/get', { params: TaskIdParams }, async (params, ctx) =>
      guard('tasks/get', async () => {
        const call = callOf(era, ctx);
        gateTasks(era, call.declaresTasks, 'tasks/get');
        return (await getTask(gw, call.principal, params.taskId)) as never;
      }),
    );

    server.setRequestHandler('tasks/update', { params: TaskIdParams }, async (params, ctx) =>
      guard('tasks/update', async () => {
        const call = callOf(era, ctx);
        gateTasks(era, call.declaresTasks, 'tasks/update');
        return updateTask(
          gw,
          call.principal,
          params.taskId,
          call.exchange.rawInputResponses,
          ctx.mcpReq.droppedInputResponseKeys ?? [],
        );
      }),
    );

    server.setRequestHandler('tasks/cancel', { params: TaskIdParams }, async (params, ctx) =>
      guard('tasks/cancel', async () => {
        const call = callOf(era, ctx);
        gateTasks(era, call.declaresTasks, 'tasks/cancel');
        return cancelTask(gw, call.principal, params.taskId);
      }),
    );

    return server;
  };
}
