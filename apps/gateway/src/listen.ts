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
import { SUBSCRIPTION_ID_META_KEY } from '@modelcontextprotocol/server';
import { isTerminal, isWellFormedTaskId, toDetailedTask, type TaskRecord } from '@mcp-tasks/task-store';
import type { Classification, McpBody } from './classify.js';
import { randomUUID } from 'node:crypto';
import { ErrorCode, jsonRpcErrorBody } from './errors.js';
import { replyStoreUnavailable } from './store-unavailable-reply.js';
import { sendRefusal } from './limits.js';
import { SERVER_INFO, type GatewayDeps } from './context.js';
import { SSE_HEADERS } from './sse.js';

/** Most task ids one listen request may name. */
export const MAX_TASK_IDS = 100;
/** Most task listen streams one gateway process holds. */
export const MAX_SUBSCRIPTIONS = 1024;
/** Backstop re-read of every subscribed, non-terminal task (ms, D5). */
const RECHECK_MS = 5000;

export interface TaskListen {
  /** Serves one listen request (the route has checked T-49 and the era). */
  serve(req: FastifyRequest, reply: FastifyReply, body: McpBody, principal: string, c: Classification): Promise<void>;
  /** Ends every open stream gracefully (final result, then close): on shutdown. */
  closeAll(): void;
  readonly openCount: number;
}

export function createTaskListen(deps: Pick<GatewayDeps, 'config' | 'log' | 'store' | 'events'>): TaskListen {
  const { config, log, store, events } = deps;
  const open = new Set<(graceful: boolean) => void>();

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
    // One of the principal's listen streams, counted across every gateway (a lease renewed with
    // each keep-alive, so a dead gateway's streams stop counting after LEASE_TTL).
    const leaseId = randomUUID();
    const max = config.limits.listenStreamsPerPrincipal;
    const leaseTtl = config.sync.keepAliveMs * 3;
    let held: number;
    try {
      held = await store.acquireListenLease(principal, leaseId, max, leaseTtl);
    } catch {
      return replyStoreUnavailable(reply, subscriptionId);
    }
    if (held < 0) {
      log.info({ principal, max }, 'listen.refused_principal_limit');
      return sendRefusal(reply, subscriptionId, {
        limit: 'listen_streams',
        max,
        retryAfterS: Math.ceil(leaseTtl / 1000),
      });
    }
    const releaseLease = () => store.releaseListenLease(principal, leaseId).catch(() => undefined);

    // Subscribe before reading, so a change between the read and the first message is not lost.
    const res = reply.raw;
    let closed = false;
    /** What was last sent per task: its status and step. */
    const sent = new Map<string, { status: string; step: number }>();
    const unlisten: (() => Promise<void>)[] = [];
    const ids = [...new Set(requested as string[])].filter(isWellFormedTaskId);
    const granted: string[] = [];
    const snapshot = new Map<string, TaskRecord>();
    const reading = new Map<string, Promise<void>>();
    const dirty = new Set<string>();
    // Nothing is written before the acknowledgement (S-02): messages that arrive while the
    // stream is being set up only mark their task for a re-read once it is.
    let ready = false;

    const write = (frame: string) => {
      if (closed || res.writableEnded || res.destroyed) return;
      res.write(frame);
    };
    const writeMessage = (message: unknown) => write(`event: message\ndata: ${JSON.stringify(message)}\n\n`);
    const emit = (rec: TaskRecord) => {
      // A state is its status and step: a gateway that reads too late to see the `working`
      // between two questions still sees the second question (a new step).
      const last = sent.get(rec.taskId);
      if (last && last.status === rec.status && last.step === rec.step) return;
      // Never a state older than one sent: nothing after a terminal state, nothing of an earlier
      // step. Reads of one task are one at a time (`refresh`), so within a step they arrive in
      // order. Not by `lastUpdatedAt`: the gateway and the worker stamp it each from its own
      // estimate of Redis time (N-11, within 1 s), so a worker's `completed` written right after a
      // gateway's `working` could carry an earlier stamp, and was dropped for good (seen in CI).
      if (last && (isTerminal(last.status) || rec.step < last.step)) return;
      sent.set(rec.taskId, { status: rec.status, step: rec.step });
      writeMessage({
        jsonrpc: '2.0',
        method: 'notifications/tasks',
        params: { ...toDetailedTask(rec), _meta: { [SUBSCRIPTION_ID_META_KEY]: subscriptionId } },
      });
    };
    /** Re-reads a task and emits on a status change; one read at a time per task. */
    const refresh = (taskId: string): void => {
      if (closed) return;
      if (!ready || reading.has(taskId)) {
        dirty.add(taskId);
        return;
      }
      const p = store
        .get(taskId)
        .then((rec) => {
          if (rec && rec.mode === 'task' && rec.owner === principal) emit(rec);
        })
        .catch((e) => log.debug({ taskId, err: (e as Error).message }, 'listen.read_failed'))
        .finally(() => {
          reading.delete(taskId);
          if (dirty.delete(taskId)) refresh(taskId);
        });
      reading.set(taskId, p);
    };

    try {
      for (const id of ids) {
        unlisten.push(await events.listen(store.channel(id), () => refresh(id)));
        const rec = await store.get(id);
        if (rec && rec.mode === 'task' && rec.owner === principal) {
          granted.push(id);
          snapshot.set(id, rec);
        }
      }
    } catch (e) {
      await Promise.allSettled(unlisten.map((u) => u()));
      void releaseLease();
      log.warn({ err: (e as Error).message }, 'listen.store_unavailable');
      return replyStoreUnavailable(reply, subscriptionId);
    }
    // Channels of ids that were not granted are dropped at once.
    const keep = new Set(granted);
    for (let i = ids.length - 1; i >= 0; i--) {
      if (!keep.has(ids[i]!)) await unlisten.splice(i, 1)[0]!();
    }

    if (res.destroyed || !res.socket || res.socket.destroyed) {
      // The client left while the subscription was being set up.
      closed = true;
      await Promise.allSettled(unlisten.map((u) => u()));
      void releaseLease();
      return;
    }
    reply.hijack();
    try {
      res.writeHead(200, SSE_HEADERS);
    } catch (e) {
      closed = true;
      await Promise.allSettled(unlisten.map((u) => u()));
      void releaseLease();
      log.warn({ err: (e as Error).message }, 'listen.write_failed');
      res.destroy();
      return;
    }
    writeMessage({
      jsonrpc: '2.0',
      method: 'notifications/subscriptions/acknowledged',
      params: { notifications: { taskIds: granted }, _meta: { [SUBSCRIPTION_ID_META_KEY]: subscriptionId } },
    });
    for (const rec of snapshot.values()) emit(rec);
    ready = true;
    for (const id of [...dirty]) {
      dirty.delete(id);
      if (keep.has(id)) refresh(id);
    }
    log.info({ subscriptionId, requested: requested.length, granted: granted.length }, 'listen.opened');

    const keepAlive = setInterval(() => {
      write(': keepalive\n\n');
      store.acquireListenLease(principal, leaseId, max, leaseTtl).catch(() => undefined);
    }, config.sync.keepAliveMs);
    const recheck = setInterval(() => {
      for (const id of granted) if (!isTerminal(sent.get(id)?.status ?? '')) refresh(id);
    }, RECHECK_MS);
    keepAlive.unref();
    recheck.unref();

    const teardown = (graceful: boolean) => {
      if (closed) return;
      if (graceful) {
        writeMessage({
          jsonrpc: '2.0',
          id: subscriptionId,
          result: {
            resultType: 'complete',
            _meta: { [SUBSCRIPTION_ID_META_KEY]: subscriptionId, 'io.modelcontextprotocol/serverInfo': SERVER_INFO },
          },
        });
      }
      closed = true;
      open.delete(teardown);
      clearInterval(keepAlive);
      clearInterval(recheck);
      void Promise.allSettled(unlisten.map((u) => u()));
      void releaseLease();
      if (!res.writableEnded) res.end();
      log.info({ subscriptionId, graceful }, 'listen.closed');
    };
    open.add(teardown);
    res.once('close', () => teardown(false));
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
