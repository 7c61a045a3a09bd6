/**
 * Creating, reading and removing task records, and the small reads and writes beside them
 * (reconciler index, spent nonces, WAIT). Part of `TaskStore`.
 */
import { OUTSTANDING_REPAIR_EVERY_MS, PrincipalSlots } from './slots.js';
import { newTaskId, TaskIdTakenError } from './ids.js';
import { parseRecord, recordFields, type CreateTaskInput, type TaskRecord } from './task-record.js';

/** The record side of `TaskStore` (see store.ts). */
export class TaskRecords extends PrincipalSlots {
  /**
   * Creates a task in `working`, step 1, durable when this resolves (T-15). The caller may pass
   * the id (to clean up after a failure whose outcome is unknown).
   * @returns the new record.
   * @throws when Redis fails, or when `taskId` already exists (never overwritten).
   */
  async create(input: CreateTaskInput, taskId: string = newTaskId(), now = this.clock.now()): Promise<TaskRecord> {
    const fields = recordFields(input, now);
    const created = await this.scripts.createTask(
      this.key(taskId),
      String(now + input.ttlMs),
      ...Object.entries(fields).flat(),
    );
    if (created !== 1) throw new TaskIdTakenError(taskId);
    return parseRecord(taskId, fields)!;
  }

  /**
   * `reserveOutstanding`, `create` and `scheduleReconcile` in one script and one round trip
   * (createReserved-4.lua), for a single Redis or Sentinel only: its keys are in different
   * Cluster slots (the caller checks the topology). Refused at `limit`: nothing written and
   * `{ ok: false }` (after one repair of lost releases, as `reserveOutstanding`).
   * @param reconcile when the reconciler first looks (`afterMs` from `now`) and the longest task
   *        TTL (`maxTtlMs`, the index's expiry is that plus a day), as `scheduleReconcile`.
   * @throws TaskIdTakenError when `taskId` exists (nothing kept); a Redis error as is.
   */
  async createReserved(
    input: CreateTaskInput,
    taskId: string,
    limit: number,
    reconcile: { afterMs: number; maxTtlMs: number },
    now = this.clock.now(),
  ): Promise<{ ok: true; rec: TaskRecord; count: number } | { ok: false; count: number }> {
    const fields = recordFields(input, now);
    const keys = this.outstandingKeys(input.owner);
    const args = [
      this.key(taskId),
      keys.outstanding,
      keys.since,
      this.reconcileKey,
      String(now),
      taskId,
      String(limit),
      String(now + input.ttlMs),
      String(OUTSTANDING_REPAIR_EVERY_MS),
      String(now + reconcile.afterMs),
      String(reconcile.maxTtlMs + 86_400_000),
    ];
    for (const f in fields) args.push(f, fields[f]!);
    let r = (await this.scripts.createReserved(...args)) as number[];
    if (r[0] === 0 && r[2] === 1 && (await this.repairOutstanding(input.owner, now)) > 0)
      r = (await this.scripts.createReserved(...args)) as number[];
    if (r[0] === -1) throw new TaskIdTakenError(taskId);
    if (r[0] !== 1) return { ok: false, count: Number(r[1]) };
    return { ok: true, rec: parseRecord(taskId, fields)!, count: Number(r[1]) };
  }

  /**
   * Adds a task to the reconciler index, to be looked at after `afterMs`. Best effort. Two plain
   * commands, not a MULTI: neither depends on the other, and plain commands share the
   * connection's automatic pipeline with the rest of the request (a MULTI is written alone).
   */
  async scheduleReconcile(taskId: string, afterMs: number, maxTtlMs: number, now = this.clock.now()): Promise<void> {
    await Promise.all([
      this.redis.zadd(this.reconcileKey, now + afterMs, taskId),
      this.redis.pexpire(this.reconcileKey, maxTtlMs + 86_400_000),
    ]);
  }

  /**
   * Reads a task with its outcome (result or error), or `null` when it does not exist or has
   * expired. One command while the task is not finished (HGETALL of the record, the reader
   * connection, no script); only a record that says `completed` or `failed` (and carries no
   * `result`/`error` field of its own) costs a second read, the GET of its result key. The
   * terminal script writes both at once with the same expiry, so a record read as terminal has
   * its outcome. A poll of a working task is therefore one Redis command (docs/performance.md).
   */
  async get(taskId: string): Promise<TaskRecord | null> {
    const h = await this.reader.hgetall(this.key(taskId));
    const status = h.status;
    const outcome =
      (status === 'completed' && h.result === undefined) || (status === 'failed' && h.error === undefined)
        ? await this.reader.get(this.resultKey(taskId))
        : null;
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
   * Spends a single-use MRTR continuation nonce (M-07).
   * @returns true the first time, false when it was already spent.
   */
  async spendNonce(nonce: string, ttlMs: number): Promise<boolean> {
    return (await this.redis.set(this.nonceKey(nonce), '1', 'PX', ttlMs, 'NX')) === 'OK';
  }

  /** Whether cancellation was requested (worker-side backstop poll). */
  async isCancelRequested(taskId: string): Promise<boolean> {
    return (await this.redis.hget(this.key(taskId), 'cancelRequested')) === '1';
  }

  /** The principal that created a task, or `null` when it is gone. One HGET. */
  async ownerOf(taskId: string): Promise<string | null> {
    return this.redis.hget(this.key(taskId), 'owner');
  }
}
