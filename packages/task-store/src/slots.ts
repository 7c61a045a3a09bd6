/**
 * A principal's slots, counted across every gateway: its outstanding tasks (MAX_OUTSTANDING_TASKS)
 * and its open task listen streams (MAX_LISTEN_STREAMS_PER_PRINCIPAL). Part of `TaskStore`.
 */
import { StoreCore } from './store-core.js';
import type { Reservation } from './outcomes.js';
import { isTerminal } from './wire.js';

/** A reservation's record may still be on its way (reserve → create): not repaired before this (ms). */
export const OUTSTANDING_CREATE_GRACE_MS = 30_000;
/** Least gap between two repairs of one principal's outstanding set (ms): a flood at the limit costs one check per gap. */
export const OUTSTANDING_REPAIR_EVERY_MS = 5_000;

/** The outstanding-task and listen-stream side of `TaskStore` (see store.ts). */
export class PrincipalSlots extends StoreCore {
  /**
   * Takes or renews one of `owner`'s at most `limit` listen-stream leases (`acquireLease-1.lua`),
   * counted across every gateway; a lease not renewed within `ttlMs` ends (its gateway died).
   * @returns the leases held (this one included); when refused, a negative number: minus the
   *          ms until the earliest of `owner`'s leases ends unless renewed (≤ -1), the wait a
   *          client is told (`Retry-After`). One script call.
   */
  async acquireListenLease(
    owner: string,
    leaseId: string,
    limit: number,
    ttlMs: number,
    now = this.clock.now(),
  ): Promise<number> {
    return Number(
      await this.scripts.acquireLease(this.listenKey(owner), String(now), leaseId, String(limit), String(now + ttlMs)),
    );
  }

  /** Ends a listen-stream lease. One ZREM. */
  async releaseListenLease(owner: string, leaseId: string): Promise<void> {
    await this.redis.zrem(this.listenKey(owner), leaseId);
  }

  /**
   * Counts task `taskId` against `owner`'s MAX_OUTSTANDING_TASKS, atomically across
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
  async reserveOutstanding(
    owner: string,
    taskId: string,
    limit: number,
    expiresAt: number,
    now = this.clock.now(),
  ): Promise<Reservation> {
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
      await this.redis
        .multi()
        .zrem(keys.outstanding, ...chunk)
        .zrem(keys.since, ...chunk)
        .exec();
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
