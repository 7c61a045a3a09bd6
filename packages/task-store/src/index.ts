/**
 * The task record in Redis (design D3, D4): one hash per task, written only through the
 * Lua scripts in `../lua/` (one file per transition, named `<transition>-<numKeys>.lua`).
 * Knows nothing of HTTP or BullMQ.
 *
 * Keys (hash tag per task so one task's keys share a Cluster slot):
 *   `<prefix>:{t:<taskId>}:task`  hash, PEXPIREAT createdAt + ttlMs (T-24); rewritten compactly
 *                                 when the task ends (only the fields a finished task is read
 *                                 for, each under 64 bytes: Redis keeps it as a listpack)
 *   `<prefix>:{t:<taskId>}:result` string: a completed task's CallToolResult JSON, or a failed
 *                                 one's JSON-RPC error object; written by the terminal script
 *                                 with exactly the record's expiry (PXAT createdAt + ttlMs)
 *   `<prefix>:{t:<taskId>}:progress` stream of a synchronous call's progress events (capped
 *                                 at ~64 entries), PEXPIREAT the earlier of the record's expiry
 *                                 and the last event + PROGRESS_STREAM_KEEP_MS (D5)
 *   `<prefix>:tasks:reconcile`    zset of live task ids scored by "next check" time (ms);
 *                                 PEXPIRE refreshed on every add (max ttl + 1 day)
 *   `<prefix>:rs:<nonce>`         a spent MRTR continuation (M-07), PX = its lifetime
 *   `<prefix>:{p:<sha256 hex of the principal>}:outstanding`
 *                                 zset of the principal's non-terminal tasks (member taskId,
 *                                 score = the task's expiry, ms): MAX_OUTSTANDING_TASKS (issue
 *                                 10 §4); PEXPIREAT = its highest score
 *   `<prefix>:{p:<sha256 hex of the principal>}:outstanding:since`
 *                                 zset, same members scored by when they were reserved (ms),
 *                                 plus `~repair` = time of the last repair; same expiry
 *   `<prefix>:{p:<sha256 hex of the principal>}:listen`
 *                                 zset of the principal's open task listen streams (member =
 *                                 lease id, score = lease expiry, ms): MAX_LISTEN_STREAMS_PER_
 *                                 PRINCIPAL; PEXPIREAT = its highest score
 * Channels (hints only, D5):
 *   `<prefix>:task:<taskId>`      new status after every transition (`progress` after a
 *                                 synchronous call's progress event)
 *   `<prefix>:cancel`             job ids whose AbortSignal must fire
 */
import { createHash, randomUUID } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import { loadScripts } from './scripts.js';

export { toDetailedTask, toCreateTaskResult, isTerminal, unexpectedToolError } from './wire.js';
export type { DetailedTask, TaskStatus, JsonRpcErrorObject } from './wire.js';

import { isTerminal, type TaskStatus, type JsonRpcErrorObject } from './wire.js';

/** Whether the task was created for a client holding a task handle, or for a synchronous call. */
export type TaskMode = 'task' | 'sync';

/**
 * Who acts on a task (T-44, N-01). A client request (tasks/update, tasks/cancel, a synchronous
 * call's retry, `task_status`) passes its principal and the mode its method serves; the
 * transition script then answers another principal's task, or a task of another mode, exactly
 * like an unknown id (`gone`) and writes nothing. System callers (reconciler, the disconnect of
 * a synchronous call) pass neither.
 */
export interface ActAs {
  /** The caller's principal (never empty). */
  owner?: string;
  /** The mode the task must have. */
  mode?: TaskMode;
}

/**
 * Longest `statusMessage` any writer stores (Unicode code points; clients show about this
 * much). Every TaskStore method that writes one cuts it with `capStatusMessage`.
 */
export const STATUS_MESSAGE_MAX_CHARS = 200;

/** Cuts `s` to STATUS_MESSAGE_MAX_CHARS code points, ending with `…` when cut (never splits a surrogate pair). */
export function capStatusMessage(s: string): string {
  if (s.length <= STATUS_MESSAGE_MAX_CHARS) return s;
  const points = Array.from(s);
  return points.length <= STATUS_MESSAGE_MAX_CHARS ? s : `${points.slice(0, STATUS_MESSAGE_MAX_CHARS - 1).join('')}…`;
}

/** A reservation's record may still be on its way (reserve → create): not repaired before this (ms). */
export const OUTSTANDING_CREATE_GRACE_MS = 30_000;
/** Least gap between two repairs of one principal's outstanding set (ms): a flood at the limit costs one check per gap. */
export const OUTSTANDING_REPAIR_EVERY_MS = 5_000;

/** A task record as read from Redis. Times are unix milliseconds. */
export interface TaskRecord {
  taskId: string;
  status: TaskStatus;
  owner: string;
  tool: string;
  args: unknown;
  mode: TaskMode;
  createdAt: number;
  lastUpdatedAt: number;
  ttlMs: number;
  pollIntervalMs: number;
  step: number;
  fence: number;
  claimedStep: number | null;
  statusMessage?: string;
  progress?: { progress: number; total?: number };
  /** Outstanding input requests, by wire key (T-21: all of them). */
  inputRequests: Record<string, unknown>;
  /** Answers received for the current round, by wire key. */
  inputResponses: Record<string, unknown>;
  result?: Record<string, unknown>;
  error?: JsonRpcErrorObject;
  cancelRequested: boolean;
  reruns: number;
  /** `sync` mode: when the gateway holding the request last said it was there (ms). */
  holderAt?: number;
  /** W3C trace context of the request that created the task (N-14): every step's span is its child. */
  trace?: { traceparent: string; tracestate?: string };
  /** When the completion webhook of this (terminal) task was enqueued (ms; issue 11 §5). */
  webhookQueuedAt?: number;
}

/**
 * Told the id of every task that a transition of this store just ended (completed, failed,
 * cancelled), after the script returned: the transition is already durable and its caller is
 * not kept waiting (the listener runs synchronously, so it must only start async work and never
 * throw). A process can die before a listener's work is done: whatever must happen at least once
 * also needs a repair path (the reconciler visits every terminal task in its index).
 */
export type TerminalListener = (taskId: string) => void;

/**
 * One progress report of a tool, as relayed to a synchronous caller (P-01..P-04): the tool's
 * own numbers; the gateway enforces "strictly increasing" and the rate per stream.
 */
export interface ProgressEvent {
  progress: number;
  total?: number;
  message?: string;
}

/** What `claimStep` hands the worker that may now run the step. */
export interface StepClaim {
  fence: string;
  tool: string;
  args: unknown;
  state: unknown;
  reruns: number;
  /** Runs of this step so far, this one included: 1 the first time, 2 after one restart (issue 9 §6). */
  attempt: number;
  mode: TaskMode;
  clientCapabilities: Record<string, unknown>;
  /** The principal that created the task. */
  owner: string;
  inputResponses: Record<string, unknown>;
}

/** Outcome of a fenced write. `ok` means it was applied. */
export type WriteOutcome =
  | { code: 'ok' }
  | { code: 'gone' }
  | { code: 'terminal'; status: TaskStatus }
  | { code: 'fenced' | 'stale'; status: string }
  | { code: 'cancelled' }
  | { code: 'key_reused'; key: string };

export type CancelOutcome =
  | { code: 'gone' }
  | { code: 'terminal'; status: TaskStatus }
  | { code: 'cancelled' }
  | { code: 'requested'; jobId: string };

export type ApplyOutcome =
  | { code: 'gone' }
  | { code: 'ignored'; status: string }
  | { code: 'partial'; applied: number }
  | { code: 'resumed'; step: number; applied: number };

export interface CreateTaskInput {
  owner: string;
  tool: string;
  args: unknown;
  mode: TaskMode;
  ttlMs: number;
  pollIntervalMs: number;
  statusMessage?: string;
  /** Client capabilities declared on the creating request (what input the tool may ask for). */
  clientCapabilities?: Record<string, unknown>;
  /** W3C trace context of the creating request's span (N-14; at most 600 characters kept). */
  trace?: { traceparent: string; tracestate?: string };
}

/** Outcome of `reserveOutstanding`: `count` = the principal's outstanding tasks (this one included when `ok`). */
export interface Reservation {
  ok: boolean;
  count: number;
}

/**
 * The hash tag of a principal in key names (`{p:<tag>}`): SHA-256 hex of the principal, so a key
 * never holds the principal (which can be long, `jwt:<iss>#<sub>`) and all of one principal's
 * keys share a Cluster slot.
 */
export function principalTag(principal: string): string {
  return createHash('sha256').update(principal).digest('hex');
}

/** Task ids: UUIDv4, 122 random bits (T-45). Anything else is answered as "not found". */
const TASK_ID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** True when `id` has the shape of an id this service mints (cheap check before Redis). */
export function isWellFormedTaskId(id: unknown): id is string {
  return typeof id === 'string' && TASK_ID_RE.test(id);
}

/** Thrown by `create` when the id exists already (never overwritten; the existing task is not ours). */
export class TaskIdTakenError extends Error {
  override name = 'TaskIdTakenError';
  constructor(readonly taskId: string) {
    super(`task id ${taskId} is already taken`);
  }
}

/** A new task id: UUIDv4, 122 random bits (T-45). */
export function newTaskId(): string {
  return randomUUID();
}

/** BullMQ job id of one step of a task: `t.<taskId>.<step>` (deterministic, D5). */
export function stepJobId(taskId: string, step: number): string {
  return `t.${taskId}.${step}`;
}

/** Parses `t.<taskId>.<step>` back; `null` for any other job id. */
export function parseStepJobId(jobId: string): { taskId: string; step: number } | null {
  const m = /^t\.([0-9a-f-]{36})\.(\d+)$/.exec(jobId);
  return m ? { taskId: m[1]!, step: Number(m[2]) } : null;
}

type Reply = (string | null)[];

/**
 * Task store bound to one ioredis client and key prefix.
 * Every method throws the ioredis error when Redis cannot be reached; callers map it to
 * JSON-RPC `-32603` (or HTTP 503, design D10).
 */
export class TaskStore {
  private readonly scripts;
  private readonly terminalListeners: TerminalListener[] = [];
  /** How long a progress stream outlives its last event (ms; PROGRESS_STREAM_KEEP_MS). */
  readonly progressStreamKeepMs: number;

  /**
   * @param clock where "now" comes from for every timestamp and expiry this store writes or
   * compares (createdAt, lastUpdatedAt, PEXPIREAT, holder leases, scores): the apps pass a
   * `RedisClock` (packages/jobs clock.ts), so replicas with wrong clocks agree (case N-11);
   * default the process clock.
   * @param options.progressStreamKeepMs a synchronous call's progress stream expires this long
   *        after its last event, never later than the task (ms; default 300,000 = 5 min).
   * @param options.reader the connection `get` reads on (default `redis`): the gateway gives it
   *        one on which no script is defined, because ioredis copies every script defined on a
   *        client onto each automatic pipeline it builds, and a poll is nothing but a `get`.
   *        Same Redis (or master): a read issued after a write's reply sees that write.
   */
  constructor(
    readonly redis: Redis | Cluster,
    readonly prefix: string,
    readonly clock: { now(): number } = { now: () => Date.now() },
    options: { progressStreamKeepMs?: number; reader?: Redis | Cluster } = {},
  ) {
    this.scripts = loadScripts(redis);
    this.progressStreamKeepMs = options.progressStreamKeepMs ?? 300_000;
    this.reader = options.reader ?? redis;
  }

  /** Where `get` reads (constructor, `options.reader`). */
  private readonly reader: Redis | Cluster;

  /** Adds a listener told of every task a transition of this store ended (see `TerminalListener`). */
  onTerminal(listener: TerminalListener): void {
    this.terminalListeners.push(listener);
  }

  /** Tells the listeners that `taskId` just ended; a listener's throw is swallowed (never fails the transition's caller). */
  private ended(taskId: string): void {
    for (const l of this.terminalListeners) {
      try {
        l(taskId);
      } catch {
        // A listener must not throw; the transition stands either way.
      }
    }
  }

  /**
   * Records that the completion webhook of terminal task `taskId` was enqueued
   * (`markWebhookQueued-1.lua`; never creates a key).
   * @returns true when written, false when the record is gone or not terminal.
   */
  async markWebhookQueued(taskId: string, now = this.clock.now()): Promise<boolean> {
    return Number(await this.scripts.markWebhookQueued(this.key(taskId), String(now))) === 1;
  }

  /** Hash key of a task. */
  key(taskId: string): string {
    return `${this.prefix}:{t:${taskId}}:task`;
  }

  /**
   * A terminal task's outcome: the result JSON of a completed task, the error JSON of a failed
   * one (none for a cancelled task). Same hash tag and expiry as the record.
   */
  resultKey(taskId: string): string {
    return `${this.prefix}:{t:${taskId}}:result`;
  }

  /** Stream of a synchronous call's progress events (`e` = JSON `ProgressEvent`). */
  progressKey(taskId: string): string {
    return `${this.prefix}:{t:${taskId}}:progress`;
  }

  /** Pub/sub channel announcing every status change of a task. */
  channel(taskId: string): string {
    return `${this.prefix}:task:${taskId}`;
  }

  /** Pub/sub channel carrying job ids to abort on whichever worker runs them. */
  get cancelChannel(): string {
    return `${this.prefix}:cancel`;
  }

  /** Reconciler index (zset). */
  get reconcileKey(): string {
    return `${this.prefix}:tasks:reconcile`;
  }

  /**
   * The principal's outstanding-task zset and its companion (reservation times). The principal
   * is hashed (SHA-256, hex): principals can be long (`jwt:<iss>#<sub>`) and are not key-safe.
   */
  outstandingKeys(owner: string): { outstanding: string; since: string } {
    const base = `${this.prefix}:{p:${principalTag(owner)}}:outstanding`;
    return { outstanding: base, since: `${base}:since` };
  }

  /** The zset of a principal's task listen streams (leases), see `acquireListenLease`. */
  listenKey(owner: string): string {
    return `${this.prefix}:{p:${principalTag(owner)}}:listen`;
  }

  /**
   * Takes or renews one of `owner`'s at most `limit` listen-stream leases (`acquireLease-1.lua`),
   * counted across every gateway; a lease not renewed within `ttlMs` ends (its gateway died).
   * @returns the leases held (this one included), or -1 when refused. One script call.
   */
  async acquireListenLease(owner: string, leaseId: string, limit: number, ttlMs: number, now = this.clock.now()): Promise<number> {
    return Number(await this.scripts.acquireLease(this.listenKey(owner), String(now), leaseId, String(limit), String(now + ttlMs)));
  }

  /** Ends a listen-stream lease. One ZREM. */
  async releaseListenLease(owner: string, leaseId: string): Promise<void> {
    await this.redis.zrem(this.listenKey(owner), leaseId);
  }

  /**
   * Creates a task in `working`, step 1, durable when this resolves (T-15). The caller may pass
   * the id (to clean up after a failure whose outcome is unknown).
   * @returns the new record.
   * @throws when Redis fails, or when `taskId` already exists (never overwritten).
   */
  async create(input: CreateTaskInput, taskId: string = newTaskId(), now = this.clock.now()): Promise<TaskRecord> {
    const fields: Record<string, string> = {
      status: 'working',
      owner: input.owner,
      tool: input.tool,
      args: JSON.stringify(input.args ?? {}),
      mode: input.mode,
      createdAt: String(now),
      lastUpdatedAt: String(now),
      ttlMs: String(input.ttlMs),
      pollIntervalMs: String(input.pollIntervalMs),
      step: '1',
      fence: '0',
      pending: '0',
      reruns: '0',
      caps: JSON.stringify(input.clientCapabilities ?? {}),
    };
    if (input.statusMessage) fields.statusMessage = capStatusMessage(input.statusMessage);
    if (input.trace) {
      fields.traceparent = input.trace.traceparent.slice(0, 64);
      if (input.trace.tracestate) fields.tracestate = input.trace.tracestate.slice(0, 512);
    }
    if (input.mode === 'sync') fields.holderAt = String(now);
    const created = await this.scripts.createTask(this.key(taskId), String(now + input.ttlMs), ...Object.entries(fields).flat());
    if (created !== 1) throw new TaskIdTakenError(taskId);
    return parseRecord(taskId, fields)!;
  }

  /**
   * Adds a task to the reconciler index, to be looked at after `afterMs`. Best effort. Two plain
   * commands, not a MULTI: neither depends on the other, and plain commands share the
   * connection's automatic pipeline with the rest of the request (a MULTI is written alone).
   */
  async scheduleReconcile(taskId: string, afterMs: number, maxTtlMs: number, now = this.clock.now()): Promise<void> {
    await Promise.all([this.redis.zadd(this.reconcileKey, now + afterMs, taskId), this.redis.pexpire(this.reconcileKey, maxTtlMs + 86_400_000)]);
  }

  /**
   * Reads a task with its outcome (result or error), or `null` when it does not exist or has
   * expired. One round trip: HGETALL of the record and GET of its result key, sent together (on a
   * connection with automatic pipelining both go in the same write; no explicit pipeline, whose
   * construction copies every script defined on the client). The terminal script writes both at
   * once and Redis runs the two reads in order, so a record read as terminal has its outcome.
   */
  async get(taskId: string): Promise<TaskRecord | null> {
    const [h, outcome] = await Promise.all([this.reader.hgetall(this.key(taskId)), this.reader.get(this.resultKey(taskId))]);
    return parseRecord(taskId, h, outcome);
  }

  /**
   * Redis `WAIT` on the store's write connection: how many replicas acknowledged every write made
   * on it so far, after at most `timeoutMs` (REDIS_WAIT_REPLICAS). Blocks that connection meanwhile.
   */
  async replicasAcked(replicas: number, timeoutMs: number): Promise<number> {
    return Number(await this.redis.call('WAIT', String(replicas), String(timeoutMs)));
  }

  /** Deletes a task's keys (used only when creation could not complete, D4). */
  async remove(taskId: string): Promise<void> {
    await this.redis.del(this.key(taskId), this.progressKey(taskId), this.resultKey(taskId));
  }

  /**
   * A worker claims step `step`; returns the claim with a new fence, or why not. `terminal` and
   * `cancelled` (the claim found a cancel request and ended the task) carry the task's owner,
   * so the worker can release its outstanding slot.
   */
  async claimStep(taskId: string, step: number, jobToken: string, now = this.clock.now()): Promise<
    | ({ code: 'ok' } & StepClaim)
    | { code: 'gone' }
    | { code: 'cancelled'; owner: string }
    | { code: 'terminal'; status: string; owner: string }
    | { code: 'stale'; status: string }
  > {
    const r = (await this.scripts.claimStep(this.key(taskId), String(step), jobToken, String(now), this.channel(taskId))) as Reply;
    const code = r[0];
    if (code !== 'ok') {
      if (code === 'terminal') return { code, status: r[1] ?? '', owner: r[2] ?? '' };
      if (code === 'cancelled') {
        this.ended(taskId);
        return { code, owner: r[1] ?? '' };
      }
      if (code === 'stale') return { code, status: r[1] ?? '' };
      return { code: 'gone' };
    }
    const inputResponses: Record<string, unknown> = {};
    for (let i = 10; i + 1 < r.length; i += 2) inputResponses[r[i]!] = JSON.parse(r[i + 1]!);
    return {
      code: 'ok',
      fence: r[1]!,
      tool: r[2]!,
      args: JSON.parse(r[3] || '{}'),
      state: r[4] ? JSON.parse(r[4]) : undefined,
      reruns: Number(r[5] ?? 0),
      attempt: Number(r[9] ?? 1),
      mode: (r[6] as TaskMode) ?? 'task',
      clientCapabilities: JSON.parse(r[7] || '{}'),
      owner: r[8] ?? '',
      inputResponses,
    };
  }

  /**
   * Fenced progress write: `statusMessage` and/or `{progress,total}` on the record; on a
   * synchronous call `event` is also appended to the progress stream and announced (D5).
   * @returns `{code:'ok', cancelRequested}` or why the write was refused.
   */
  async reportProgress(
    taskId: string,
    fence: string,
    update: { statusMessage?: string; progress?: { progress: number; total?: number }; event?: ProgressEvent },
    now = this.clock.now(),
  ): Promise<WriteOutcome & { cancelRequested?: boolean }> {
    const r = (await this.scripts.reportProgress(
      this.key(taskId),
      this.progressKey(taskId),
      fence,
      String(now),
      update.statusMessage ? capStatusMessage(update.statusMessage) : '',
      update.progress ? JSON.stringify(update.progress) : '',
      update.event ? JSON.stringify(update.event) : '',
      this.channel(taskId),
      String(this.progressStreamKeepMs),
    )) as Reply;
    const out = toWriteOutcome(r);
    if (out.code === 'ok') return { ...out, cancelRequested: r[1] === '1' };
    return out;
  }

  /**
   * Progress events of a synchronous call after stream id `afterId` (exclusive; `'0'` = from
   * the start), oldest first, at most `count`. One XRANGE.
   */
  async readProgress(taskId: string, afterId = '0', count = 100): Promise<{ id: string; event: ProgressEvent }[]> {
    const start = afterId === '0' ? '-' : `(${afterId}`;
    const rows = (await this.redis.xrange(this.progressKey(taskId), start, '+', 'COUNT', count)) as [string, string[]][];
    const out: { id: string; event: ProgressEvent }[] = [];
    for (const [id, fields] of rows) {
      const i = fields.indexOf('e');
      if (i >= 0 && fields[i + 1]) out.push({ id, event: JSON.parse(fields[i + 1]!) as ProgressEvent });
    }
    return out;
  }

  /** Id of the newest progress event of a task (`'0'` when there is none). One XREVRANGE. */
  async lastProgressId(taskId: string): Promise<string> {
    const rows = (await this.redis.xrevrange(this.progressKey(taskId), '+', '-', 'COUNT', 1)) as [string, string[]][];
    return rows[0]?.[0] ?? '0';
  }

  /**
   * A synchronous call ran out of its budget: the task continues in `task` mode for the same
   * owner (see `detachSync-1.lua`).
   * @returns `ok` (detached; `status` is its current one), `terminal` (it already ended: answer
   * the call normally), `gone` or `not_sync`.
   */
  async detachSync(taskId: string, now = this.clock.now()): Promise<{ code: 'ok' | 'terminal' | 'not_sync'; status: TaskStatus } | { code: 'gone' }> {
    const r = (await this.scripts.detachSync(this.key(taskId), String(now))) as Reply;
    if (r[0] === 'gone') return { code: 'gone' };
    return { code: r[0] as 'ok' | 'terminal' | 'not_sync', status: r[1] as TaskStatus };
  }

  /** Fenced `working → input_required` with the given requests (wire keys). */
  async parkForInput(
    taskId: string,
    fence: string,
    inputRequests: Record<string, unknown>,
    state: unknown,
    statusMessage: string,
    now = this.clock.now(),
  ): Promise<WriteOutcome> {
    const pairs = Object.entries(inputRequests).flatMap(([k, v]) => [k, JSON.stringify(v)]);
    const r = (await this.scripts.parkForInput(
      this.key(taskId),
      fence,
      String(now),
      capStatusMessage(statusMessage),
      JSON.stringify(state ?? null),
      this.channel(taskId),
      ...pairs,
    )) as Reply;
    const out = toWriteOutcome(r);
    if (out.code === 'cancelled') this.ended(taskId);
    return out;
  }

  /**
   * Applies answers to outstanding keys atomically (read-your-writes for the ack, T-30).
   * Only keys the record asks for right now reach the script: the outstanding `req:` fields are
   * read first (one HKEYS) and every other key is dropped here, so a request with 100,000 keys
   * costs one small script call and writes nothing extra (the script re-checks each key, so a
   * concurrent change between the two reads is harmless).
   * @param as a client request's principal and mode (T-44): another principal's task, or one
   *           of another mode, is `gone` and left untouched. Omit for system callers.
   * @returns `gone` (unknown, expired or foreign), `ignored` (not input_required, or no
   *          outstanding key answered), `partial` or `resumed` (the next step to enqueue).
   * @throws when `as.owner` is an empty string (a caller bug: '' means "system" to the script).
   */
  async applyInputResponses(taskId: string, responses: Record<string, unknown>, as: ActAs = {}, now = this.clock.now()): Promise<ApplyOutcome> {
    const outstanding = new Set(
      (await this.redis.hkeys(this.key(taskId))).filter((f) => f.startsWith('req:')).map((f) => f.slice(4)),
    );
    const pairs: string[] = [];
    for (const k of outstanding) if (Object.hasOwn(responses, k)) pairs.push(k, JSON.stringify(responses[k]));
    const r = (await this.scripts.applyInputResponses(this.key(taskId), String(now), this.channel(taskId), ...actAsArgs(as), ...pairs)) as Reply;
    switch (r[0]) {
      case 'gone':
        return { code: 'gone' };
      case 'partial':
        return { code: 'partial', applied: Number(r[1]) };
      case 'resumed':
        return { code: 'resumed', step: Number(r[1]), applied: Number(r[2]) };
      default:
        return { code: 'ignored', status: r[1] ?? '' };
    }
  }

  /**
   * Fenced `working → completed`. `result` is stored as given (a CallToolResult), or as the
   * JSON text given when it is a string (the worker serializes once, to check its size).
   */
  async complete(taskId: string, fence: string, result: Record<string, unknown> | string, statusMessage = '', now = this.clock.now()): Promise<WriteOutcome> {
    const json = typeof result === 'string' ? result : JSON.stringify(result);
    const r = (await this.scripts.completeTask(this.key(taskId), this.resultKey(taskId), fence, String(now), json, capStatusMessage(statusMessage), this.channel(taskId))) as Reply;
    const out = toWriteOutcome(r);
    if (out.code === 'ok') this.ended(taskId);
    return out;
  }

  /**
   * `→ failed` with a JSON-RPC error object.
   * @param by `{fence}` for the running step, or `{expectStatus?, expectStep?}` for system writers.
   */
  async fail(
    taskId: string,
    by: { fence: string } | { expectStatus?: TaskStatus; expectStep?: number },
    error: JsonRpcErrorObject,
    statusMessage: string,
    now = this.clock.now(),
  ): Promise<WriteOutcome> {
    const fence = 'fence' in by ? by.fence : '';
    const expectStatus = 'fence' in by ? '' : (by.expectStatus ?? '');
    const expectStep = 'fence' in by || by.expectStep === undefined ? '' : String(by.expectStep);
    const r = (await this.scripts.failTask(
      this.key(taskId),
      this.resultKey(taskId),
      fence,
      expectStatus,
      expectStep,
      String(now),
      JSON.stringify(error),
      capStatusMessage(statusMessage),
      this.channel(taskId),
    )) as Reply;
    const out = toWriteOutcome(r);
    if (out.code === 'ok') this.ended(taskId);
    return out;
  }

  /** Fenced `working → cancelled` (the worker saw the abort, or the tool ended the task). */
  async markCancelled(taskId: string, fence: string, statusMessage: string, now = this.clock.now()): Promise<WriteOutcome> {
    const r = (await this.scripts.markCancelled(this.key(taskId), fence, String(now), capStatusMessage(statusMessage), this.channel(taskId))) as Reply;
    const out = toWriteOutcome(r);
    if (out.code === 'ok') this.ended(taskId);
    return out;
  }

  /**
   * Requests cancellation (T-36 / C-01). See `requestCancel-1.lua` for the rules.
   * @param as a client request's principal and mode (T-44): another principal's task, or one
   *           of another mode, is `gone` and left untouched. Omit for system callers.
   * @returns `gone`, `terminal` (unchanged), `cancelled` (ended now: release its outstanding
   *          slot) or `requested` (the worker running it ends it).
   * @throws when `as.owner` is an empty string.
   */
  async requestCancel(taskId: string, statusMessage = 'Cancelled by client request', as: ActAs = {}, now = this.clock.now()): Promise<CancelOutcome> {
    const r = (await this.scripts.requestCancel(
      this.key(taskId),
      String(now),
      this.cancelChannel,
      `t.${taskId}.`,
      capStatusMessage(statusMessage),
      this.channel(taskId),
      ...actAsArgs(as),
    )) as Reply;
    switch (r[0]) {
      case 'gone':
        return { code: 'gone' };
      case 'terminal':
        return { code: 'terminal', status: r[1] as TaskStatus };
      case 'cancelled':
        this.ended(taskId);
        return { code: 'cancelled' };
      default:
        return { code: 'requested', jobId: r[1]! };
    }
  }

  /**
   * Spends a single-use MRTR continuation nonce (M-07).
   * @returns true the first time, false when it was already spent.
   */
  async spendNonce(nonce: string, ttlMs: number): Promise<boolean> {
    return (await this.redis.set(`${this.prefix}:rs:${nonce}`, '1', 'PX', ttlMs, 'NX')) === 'OK';
  }

  /**
   * A request holding a synchronous call joins (`+1`), renews (`0`) or leaves (`-1`); see
   * `renewHolder-1.lua`. @returns holders left, or -1 when the task is gone/terminal/not sync.
   */
  async renewHolder(taskId: string, delta: -1 | 0 | 1 = 0, now = this.clock.now()): Promise<number> {
    return Number(await this.scripts.renewHolder(this.key(taskId), String(now), String(delta)));
  }

  /** Whether cancellation was requested (worker-side backstop poll). */
  async isCancelRequested(taskId: string): Promise<boolean> {
    return (await this.redis.hget(this.key(taskId), 'cancelRequested')) === '1';
  }

  /** The principal that created a task, or `null` when it is gone. One HGET. */
  async ownerOf(taskId: string): Promise<string | null> {
    return this.redis.hget(this.key(taskId), 'owner');
  }

  /**
   * Counts task `taskId` against `owner`'s MAX_OUTSTANDING_TASKS (issue 10 §4), atomically across
   * replicas (`reserveOutstanding-2.lua`). Call it before the record is written; on `ok: false`
   * write nothing and refuse the request. Idempotent for an id already reserved.
   * A release can be lost (a process dies between a terminal write and its release), so a
   * reservation refused at the limit repairs once, at most every OUTSTANDING_REPAIR_EVERY_MS per
   * principal: members whose record is terminal, or missing for OUTSTANDING_CREATE_GRACE_MS, are
   * dropped, and the reservation is tried again.
   * @param expiresAt the task's expiry (unix ms, createdAt + ttlMs): the member drops out then.
   * @returns `{ok, count}`; `count` is the principal's outstanding tasks (this one included when
   *          `ok`): use it as the step job's priority (`JobQueues.enqueueStep`, fair share).
   */
  async reserveOutstanding(owner: string, taskId: string, limit: number, expiresAt: number, now = this.clock.now()): Promise<Reservation> {
    const keys = this.outstandingKeys(owner);
    const reserve = async () =>
      (await this.scripts.reserveOutstanding(
        keys.outstanding,
        keys.since,
        String(now),
        taskId,
        String(limit),
        String(expiresAt),
        String(OUTSTANDING_REPAIR_EVERY_MS),
      )) as number[];
    const r = await reserve();
    if (r[0] === 1) return { ok: true, count: Number(r[1]) };
    if (r[2] !== 1 || (await this.repairOutstanding(owner, now)) === 0) return { ok: false, count: Number(r[1]) };
    const again = await reserve();
    return { ok: again[0] === 1, count: Number(again[1]) };
  }

  /**
   * Drops `owner`'s outstanding members whose task is terminal, or whose record is missing and
   * was reserved more than OUTSTANDING_CREATE_GRACE_MS ago (a lost release, or a creation that
   * never finished). Reads every member's status (one HGET each), so it runs only at the limit.
   * @returns how many members were dropped.
   */
  async repairOutstanding(owner: string, now = this.clock.now()): Promise<number> {
    const keys = this.outstandingKeys(owner);
    const [members, since] = await Promise.all([
      this.redis.zrange(keys.outstanding, '0', '-1'),
      this.redis.zrange(keys.since, '0', '-1', 'WITHSCORES'),
    ]);
    const reservedAt = new Map<string, number>();
    for (let i = 0; i + 1 < since.length; i += 2) reservedAt.set(since[i]!, Number(since[i + 1]));
    const statuses = await Promise.all(members.map((id) => this.redis.hget(this.key(id), 'status')));
    const stale = members.filter((id, i) => {
      const st = statuses[i];
      if (st) return isTerminal(st);
      return now - (reservedAt.get(id) ?? 0) > OUTSTANDING_CREATE_GRACE_MS;
    });
    for (let i = 0; i < stale.length; i += 1000) {
      const chunk = stale.slice(i, i + 1000);
      await this.redis.multi().zrem(keys.outstanding, ...chunk).zrem(keys.since, ...chunk).exec();
    }
    return stale.length;
  }

  /**
   * Stops counting task `taskId` against `owner` (idempotent). Call it after every terminal
   * transition: the worker (completed, failed, cancelled), the reconciler, the input timeout,
   * the gateway (tasks/cancel ended it at once; a creation that failed after its reservation).
   */
  async releaseOutstanding(owner: string, taskId: string): Promise<void> {
    const keys = this.outstandingKeys(owner);
    await this.redis.multi().zrem(keys.outstanding, taskId).zrem(keys.since, taskId).exec();
  }

  /** `owner`'s outstanding tasks that have not expired (the fair-share priority of a resumed step). One ZCOUNT. */
  async outstandingCount(owner: string, now = this.clock.now()): Promise<number> {
    return this.redis.zcount(this.outstandingKeys(owner).outstanding, `(${now}`, '+inf');
  }
}

/** ARGV tail of a script that checks who acts (owner, mode; '' = system caller). */
function actAsArgs(as: ActAs): [string, string] {
  if (as.owner === '') throw new Error('TaskStore: an owner check needs a non-empty principal');
  return [as.owner ?? '', as.mode ?? ''];
}

function toWriteOutcome(r: Reply): WriteOutcome {
  switch (r[0]) {
    case 'ok':
      return { code: 'ok' };
    case 'gone':
      return { code: 'gone' };
    case 'cancelled':
      return { code: 'cancelled' };
    case 'terminal':
      return { code: 'terminal', status: r[1] as TaskStatus };
    case 'key_reused':
      return { code: 'key_reused', key: r[1]! };
    case 'fenced':
    case 'stale':
      return { code: r[0], status: r[1] ?? '' };
    default:
      throw new Error(`unexpected reply from task script: ${JSON.stringify(r)}`);
  }
}

/**
 * Builds a `TaskRecord` from a hash, or null for an empty hash (missing/expired).
 * @param outcome the task's result key (`TaskStore.resultKey`): the result JSON of a completed
 *        task or the error JSON of a failed one; records finished before the result key existed
 *        carry `result` / `error` in the hash, which are read as before.
 */
export function parseRecord(taskId: string, h: Record<string, string>, outcome?: string | null): TaskRecord | null {
  if (!h || !h.status) return null;
  const inputRequests: Record<string, unknown> = {};
  const inputResponses: Record<string, unknown> = {};
  for (const [f, v] of Object.entries(h)) {
    if (f.startsWith('req:')) inputRequests[f.slice(4)] = JSON.parse(v);
    else if (f.startsWith('resp:')) inputResponses[f.slice(5)] = JSON.parse(v);
  }
  const rec: TaskRecord = {
    taskId,
    status: h.status as TaskStatus,
    owner: h.owner ?? '',
    tool: h.tool ?? '',
    args: h.args ? JSON.parse(h.args) : {},
    mode: (h.mode as TaskMode) ?? 'task',
    createdAt: Number(h.createdAt),
    lastUpdatedAt: Number(h.lastUpdatedAt),
    ttlMs: Number(h.ttlMs),
    pollIntervalMs: Number(h.pollIntervalMs),
    step: Number(h.step ?? 1),
    fence: Number(h.fence ?? 0),
    claimedStep: h.claimedStep ? Number(h.claimedStep) : null,
    inputRequests,
    inputResponses,
    cancelRequested: h.cancelRequested === '1',
    reruns: Number(h.reruns ?? 0),
  };
  if (h.statusMessage) rec.statusMessage = h.statusMessage;
  if (h.holderAt) rec.holderAt = Number(h.holderAt);
  if (h.traceparent) rec.trace = { traceparent: h.traceparent, ...(h.tracestate ? { tracestate: h.tracestate } : {}) };
  if (h.webhookQueuedAt) rec.webhookQueuedAt = Number(h.webhookQueuedAt);
  if (h.progress) rec.progress = JSON.parse(h.progress);
  const result = rec.status === 'completed' ? (outcome ?? h.result) : h.result;
  const error = rec.status === 'failed' ? (outcome ?? h.error) : h.error;
  if (result) rec.result = JSON.parse(result);
  if (error) rec.error = JSON.parse(error);
  return rec;
}
