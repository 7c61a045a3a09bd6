/**
 * `subscriptions/listen` with `notifications.taskIds` (Tasks extension §11, T-39, T-49; core
 * spec transport §5, S-01..S-03). The SDK's listen router knows only the four core change
 * types, so a listen request asking for `taskIds` is served here; others go to the SDK.
 *
 * Wire (one SSE response per listen request):
 *  1. `notifications/subscriptions/acknowledged` with `params.notifications.taskIds` = the ids
 *     granted: well-formed, existing, `task` mode and owned by the caller (T-44; anything else
 *     is silently left out, exactly like an unknown id). Nothing precedes it (S-02).
 *  2. `notifications/tasks` with the full `DetailedTask` (what `tasks/get` returns) for each
 *     granted id: once with its current state, then on every change of status or step (a new
 *     round of questions is a new step), whichever worker
 *     made it and whichever gateway holds this stream (the task's Redis channel, re-read on
 *     every message and every `RECHECK_MS` as a backstop, D5). No progress or log
 *     notifications on this stream (T-41, H-24).
 *  3. `: keepalive` comments every SSE_KEEPALIVE_MS (case B-10).
 *  4. On shutdown: the final result `{resultType:"complete", _meta:{subscriptionId}}`, then the
 *     stream ends (spec transport §5). The client closing the stream ends the subscription.
 * Every notification and the final result carry `_meta["io.modelcontextprotocol/subscriptionId"]`
 * = the listen request's JSON-RPC id (S-03).
 *
 * Errors: headers/version as the SDK's ladder (`-32020`, `-32022`, HTTP 400); `taskIds` not an
 * array of at most MAX_TASK_IDS strings → `-32602`; over MAX_SUBSCRIPTIONS open streams on
 * this process → `-32603` (both HTTP 200, as the SDK's own listen router answers); over
 * MAX_LISTEN_STREAMS_PER_PRINCIPAL (16) open streams of this principal on all gateways → 429
 * `-31429` (limits.ts).
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { isWellFormedTaskId } from '@mcp-tasks/task-store';
import type { Classification, McpBody } from './classify.js';
import { ErrorCode, jsonRpcErrorBody } from './errors.js';
import { replyStoreUnavailable } from './store-unavailable-reply.js';
import type { GatewayDeps } from './context.js';
import { ListenLease } from './listen-lease.js';
import { ListenStream, type Teardown } from './listen-stream.js';

/** Most task ids one listen request may name. */
export const MAX_TASK_IDS = 100;
/** Most task listen streams one gateway process holds. */
export const MAX_SUBSCRIPTIONS = 1024;

export interface TaskListen {
  /** Serves one listen request (the route has checked T-49 and the era). */
  serve(req: FastifyRequest, reply: FastifyReply, body: McpBody, principal: string, c: Classification): Promise<void>;
  /** Ends every open stream gracefully (final result, then close): on shutdown. */
  closeAll(): void;
  readonly openCount: number;
}

/**
 * The task listen streams of this gateway process: `serve` opens one per listen request (at most
 * MAX_SUBSCRIPTIONS at once), `closeAll` ends them all at shutdown.
 */
export function createTaskListen(deps: Pick<GatewayDeps, 'config' | 'log' | 'store' | 'events'>): TaskListen {
  const { config, log } = deps;
  const open = new Set<Teardown>();

  async function serve(
    _req: FastifyRequest,
    reply: FastifyReply,
    body: McpBody,
    principal: string,
    _c: Classification,
  ): Promise<void> {
    // The route has answered the ladder's rejections (H-11, H-12, H-15) before getting here.
    if (!(typeof body.id === 'string' || typeof body.id === 'number')) {
      return reply
        .code(400)
        .send(jsonRpcErrorBody(null, ErrorCode.InvalidRequest, 'subscriptions/listen must be a request'));
    }
    const subscriptionId = body.id;
    const requested = body.params?.notifications?.taskIds;
    if (!Array.isArray(requested) || requested.length > MAX_TASK_IDS || requested.some((t) => typeof t !== 'string')) {
      return reply.send(
        jsonRpcErrorBody(
          subscriptionId,
          ErrorCode.InvalidParams,
          `Invalid params: notifications.taskIds must be an array of at most ${MAX_TASK_IDS} task ids`,
        ),
      );
    }
    if (open.size >= MAX_SUBSCRIPTIONS) {
      log.warn({ open: open.size }, 'listen.refused_limit');
      return reply.send(jsonRpcErrorBody(subscriptionId, ErrorCode.InternalError, 'Subscription limit reached'));
    }
    const lease = await ListenLease.acquire(deps, reply, principal, subscriptionId);
    if (!(lease instanceof ListenLease)) return lease.refused;

    // Subscribe before reading, so a change between the read and the first message is not lost.
    const ids = [...new Set(requested as string[])].filter(isWellFormedTaskId);
    const stream = new ListenStream(deps, reply.raw, subscriptionId, principal);
    try {
      await stream.subscribe(ids);
    } catch (e) {
      await stream.unsubscribeAll();
      void lease.release();
      log.warn({ err: (e as Error).message }, 'listen.store_unavailable');
      return replyStoreUnavailable(reply, subscriptionId);
    }
    await stream.dropUngranted(ids);
    if (!(await stream.open(reply, lease, requested.length))) return;
    stream.hold(open, lease, config.sync.keepAliveMs);
  }

  return {
    serve,
    closeAll() {
      for (const teardown of [...open]) teardown(true);
    },
    get openCount() {
      return open.size;
    },
  };
}
