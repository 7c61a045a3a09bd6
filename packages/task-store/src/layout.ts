/**
 * Where the task store keeps things in Redis: every key and channel name (design D3, D4, D5).
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
 *                                 score = the task's expiry, ms): MAX_OUTSTANDING_TASKS
 *                                 (docs/configuration.md); PEXPIREAT = its highest score
 *   `<prefix>:{p:<sha256 hex of the principal>}:outstanding:since`
 *                                 zset, same members scored by when they were reserved (ms),
 *                                 plus `~repair` = time of the last repair; same expiry
 *   `<prefix>:{p:<sha256 hex of the principal>}:idem:<sha256 hex of an Idempotency-Key>`
 *                                 hash {taskId, fp, at} naming the task a `tools/call` with that
 *                                 key created (idempotency.ts); PEXPIREAT = that task's expiry
 *   `<prefix>:{p:<sha256 hex of the principal>}:listen`
 *                                 zset of the principal's open task listen streams (member =
 *                                 lease id, score = lease expiry, ms): MAX_LISTEN_STREAMS_PER_
 *                                 PRINCIPAL; PEXPIREAT = its highest score
 * Channels (hints only, D5):
 *   `<prefix>:task:<taskId>`      new status after every transition (`progress` after a
 *                                 synchronous call's progress event)
 *   `<prefix>:cancel`             job ids whose AbortSignal must fire
 */
import { principalTag } from './principal.js';

/**
 * The key and channel names of one key prefix (see the table above). Pure: no Redis call.
 * `TaskStore` is one (these methods are part of its public API).
 */
export class TaskKeys {
  constructor(readonly prefix: string) {}

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

  /** A spent MRTR continuation nonce (M-07). */
  nonceKey(nonce: string): string {
    return `${this.prefix}:rs:${nonce}`;
  }
}
