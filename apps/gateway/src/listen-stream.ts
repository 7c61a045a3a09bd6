/**
 * One task listen stream (listen.ts describes the wire): its channel subscriptions, the
 * acknowledgement, one `notifications/tasks` per change of a granted task's state, keep-alives,
 * the backstop re-read, and its teardown.
 */
import type { ServerResponse } from 'node:http';
import type { FastifyReply } from 'fastify';
import { SUBSCRIPTION_ID_META_KEY } from '@modelcontextprotocol/server';
import { isTerminal, toDetailedTask, type TaskRecord } from '@mcp-tasks/task-store';
import { SERVER_INFO, type GatewayDeps } from './context.js';
import type { ListenLease } from './listen-lease.js';
import { SSE_HEADERS } from './sse.js';

/** Backstop re-read of every subscribed, non-terminal task (ms, D5). */
const RECHECK_MS = 5000;

/** Ends a stream: `graceful` sends the final result first (shutdown); otherwise it just closes. */
export type Teardown = (graceful: boolean) => void;

/**
 * The state of one listen stream, from its subscriptions to its teardown. Its steps, in order:
 * `subscribe`, `dropUngranted`, `open`, `hold`; on a failure before `hold`, `unsubscribeAll`.
 */
export class ListenStream {
  private closed = false;
  /** What was last sent per task: its status and step. */
  private readonly sent = new Map<string, { status: string; step: number }>();
  private readonly unlisten: (() => Promise<void>)[] = [];
  /** The ids granted (T-44): existing, `task` mode, owned by the caller. */
  readonly granted: string[] = [];
  private keep = new Set<string>();
  private readonly snapshot = new Map<string, TaskRecord>();
  private readonly reading = new Map<string, Promise<void>>();
  private readonly dirty = new Set<string>();
  // Nothing is written before the acknowledgement (S-02): messages that arrive while the
  // stream is being set up only mark their task for a re-read once it is.
  private ready = false;

  /**
   * @param res the listen request's response, written as SSE once `open` hijacks it.
   * @param subscriptionId the listen request's JSON-RPC id, in every message's `_meta` (S-03).
   */
  constructor(
    private readonly deps: Pick<GatewayDeps, 'log' | 'store' | 'events'>,
    private readonly res: ServerResponse,
    private readonly subscriptionId: string | number,
    private readonly principal: string,
  ) {}

  private write(frame: string) {
    const { res } = this;
    if (this.closed || res.writableEnded || res.destroyed) return;
    res.write(frame);
  }

  private writeMessage(message: unknown) {
    this.write(`event: message\ndata: ${JSON.stringify(message)}\n\n`);
  }

  private emit(rec: TaskRecord) {
    // A state is its status and step: a gateway that reads too late to see the `working`
    // between two questions still sees the second question (a new step).
    const last = this.sent.get(rec.taskId);
    if (last && last.status === rec.status && last.step === rec.step) return;
    // Never a state older than one sent: nothing after a terminal state, nothing of an earlier
    // step. Reads of one task are one at a time (`refresh`), so within a step they arrive in
    // order. Not by `lastUpdatedAt`: the gateway and the worker stamp it each from its own
    // estimate of Redis time (N-11, within 1 s), so a worker's `completed` written right after a
    // gateway's `working` could carry an earlier stamp, and was dropped for good (seen in CI).
    if (last && (isTerminal(last.status) || rec.step < last.step)) return;
    this.sent.set(rec.taskId, { status: rec.status, step: rec.step });
    this.writeMessage({
      jsonrpc: '2.0',
      method: 'notifications/tasks',
      params: { ...toDetailedTask(rec), _meta: { [SUBSCRIPTION_ID_META_KEY]: this.subscriptionId } },
    });
  }

  /** Re-reads a task and emits on a status change; one read at a time per task. */
  private refresh(taskId: string): void {
    if (this.closed) return;
    if (!this.ready || this.reading.has(taskId)) {
      this.dirty.add(taskId);
      return;
    }
    const p = this.deps.store
      .get(taskId)
      .then((rec) => {
        if (rec && rec.mode === 'task' && rec.owner === this.principal) this.emit(rec);
      })
      .catch((e) => this.deps.log.debug({ taskId, err: (e as Error).message }, 'listen.read_failed'))
      .finally(() => {
        this.reading.delete(taskId);
        if (this.dirty.delete(taskId)) this.refresh(taskId);
      });
    this.reading.set(taskId, p);
  }

  /**
   * Subscribes to each task's channel, then reads the task, keeping those granted (subscribed
   * before reading, so a change between the read and the first message is not lost).
   * @throws when Redis fails; the caller then calls `unsubscribeAll`.
   */
  async subscribe(ids: string[]): Promise<void> {
    const { events, store } = this.deps;
    for (const id of ids) {
      this.unlisten.push(await events.listen(store.channel(id), () => this.refresh(id)));
      const rec = await store.get(id);
      if (rec && rec.mode === 'task' && rec.owner === this.principal) {
        this.granted.push(id);
        this.snapshot.set(id, rec);
      }
    }
  }

  /** Drops every channel subscription made so far; never rejects. */
  unsubscribeAll() {
    return Promise.allSettled(this.unlisten.map((u) => u()));
  }

  /** Drops at once the channels of `ids` (as passed to `subscribe`) that were not granted. */
  async dropUngranted(ids: string[]): Promise<void> {
    // Channels of ids that were not granted are dropped at once.
    this.keep = new Set(this.granted);
    for (let i = ids.length - 1; i >= 0; i--) {
      if (!this.keep.has(ids[i]!)) await this.unlisten.splice(i, 1)[0]!();
    }
  }

  /**
   * Opens the SSE response (hijacked from Fastify): the acknowledgement with the granted ids,
   * each granted task's current state, then re-reads of tasks whose messages came meanwhile.
   * @returns false when the client left meanwhile or the headers could not be written: the
   * subscriptions and the lease are then released and nothing is left to tear down.
   */
  async open(reply: FastifyReply, lease: ListenLease, requested: number): Promise<boolean> {
    const { res, granted, subscriptionId } = this;
    const { log } = this.deps;
    if (res.destroyed || !res.socket || res.socket.destroyed) {
      // The client left while the subscription was being set up.
      this.closed = true;
      await this.unsubscribeAll();
      void lease.release();
      return false;
    }
    reply.hijack();
    try {
      res.writeHead(200, SSE_HEADERS);
    } catch (e) {
      this.closed = true;
      await this.unsubscribeAll();
      void lease.release();
      log.warn({ err: (e as Error).message }, 'listen.write_failed');
      res.destroy();
      return false;
    }
    this.writeMessage({
      jsonrpc: '2.0',
      method: 'notifications/subscriptions/acknowledged',
      params: { notifications: { taskIds: granted }, _meta: { [SUBSCRIPTION_ID_META_KEY]: subscriptionId } },
    });
    for (const rec of this.snapshot.values()) this.emit(rec);
    this.ready = true;
    for (const id of [...this.dirty]) {
      this.dirty.delete(id);
      if (this.keep.has(id)) this.refresh(id);
    }
    log.info({ subscriptionId, requested, granted: granted.length }, 'listen.opened');
    return true;
  }

  /**
   * Holds the open stream: `: keepalive` every `keepAliveMs` (ms, case B-10) with a renewal of
   * the lease, a re-read of every non-terminal granted task every RECHECK_MS; its teardown is
   * put in `open` and runs when the client closes the stream.
   */
  hold(open: Set<Teardown>, lease: ListenLease, keepAliveMs: number): void {
    const { res, subscriptionId } = this;
    const keepAlive = setInterval(() => {
      this.write(': keepalive\n\n');
      lease.renew();
    }, keepAliveMs);
    const recheck = setInterval(() => {
      for (const id of this.granted) if (!isTerminal(this.sent.get(id)?.status ?? '')) this.refresh(id);
    }, RECHECK_MS);
    keepAlive.unref();
    recheck.unref();

    const teardown: Teardown = (graceful) => {
      if (this.closed) return;
      if (graceful) {
        this.writeMessage({
          jsonrpc: '2.0',
          id: subscriptionId,
          result: {
            resultType: 'complete',
            _meta: { [SUBSCRIPTION_ID_META_KEY]: subscriptionId, 'io.modelcontextprotocol/serverInfo': SERVER_INFO },
          },
        });
      }
      this.closed = true;
      open.delete(teardown);
      clearInterval(keepAlive);
      clearInterval(recheck);
      void this.unsubscribeAll();
      void lease.release();
      if (!res.writableEnded) res.end();
      this.deps.log.info({ subscriptionId, graceful }, 'listen.closed');
    };
    open.add(teardown);
    res.once('close', () => teardown(false));
  }
}
