/**
 * A principal's budget of stored result bytes (design D9, case N-09): the results of one
 * principal's completed tasks that are still stored (they expire with their task, TASK_TTL_MS
 * after its creation) may hold at most `budgetBytes` bytes of JSON
 * (MAX_RESULT_BYTES_PER_PRINCIPAL), counted in Redis across every worker. The worker counts a
 * result (`reserve`) before it writes it; a result that does not fit ends its task `failed`.
 *
 * Keys (one hash tag per principal):
 *   `<prefix>:{p:<sha256 hex of the principal>}:result-bytes`
 *       zset: member taskId, score = the task's expiry (ms) = when its result key expires.
 *       Expired members are forgotten (and their bytes subtracted) by the next reservation:
 *       Redis expires result keys without telling anyone. PEXPIREAT = its highest score.
 *   `<prefix>:{p:…}:result-bytes:sizes`
 *       hash: taskId → bytes of its result, `~total` = their sum, `~repair` = when the last
 *       repair ran (ms). Same expiry.
 * A reservation whose write did not happen is released (`release`); one that a crash left
 * behind is dropped by the repair a refusal runs (`repair`).
 */
import type { TaskStore } from './store.js';
import { principalTag } from './principal.js';
import { isTerminal } from './wire.js';
import { loadScripts } from './scripts.js';
import type { CountedCompletion } from './outcomes.js';

/** Least gap between two repairs of one principal's result budget (ms). */
export const RESULT_BUDGET_REPAIR_EVERY_MS = 5_000;

/** What `reserve` decided. `storedBytes`: the principal's stored result bytes (this one included when `ok`). */
export type ResultReservation =
  { ok: true; storedBytes: number } | { ok: false; storedBytes: number; oldestExpiresAt: number };

/** The principals' budgets of stored result bytes, on the store's Redis, key prefix and clock. */
export class ResultBudget {
  private readonly scripts;

  /** @param budgetBytes bytes of result JSON one principal may have stored (≥ the largest single result). */
  constructor(
    readonly store: TaskStore,
    readonly budgetBytes: number,
  ) {
    this.scripts = loadScripts(store.redis);
  }

  /** The principal's keys (see the module doc). */
  keys(owner: string): { members: string; sizes: string } {
    const base = `${this.store.prefix}:{p:${principalTag(owner)}}:result-bytes`;
    return { members: base, sizes: `${base}:sizes` };
  }

  /**
   * Counts `bytes` of task `taskId`'s result against `owner`'s budget (`reserveResultBytes-2.lua`),
   * until the task expires (read from its record). Refused at the budget: once per
   * RESULT_BUDGET_REPAIR_EVERY_MS the principal's members are checked for reservations whose
   * result was never written, and the reservation is tried again.
   * @returns `ok`, or the refusal with the stored total and when the oldest stored result expires.
   */
  async reserve(
    owner: string,
    taskId: string,
    bytes: number,
    now = this.store.clock.now(),
  ): Promise<ResultReservation> {
    const [createdAt, ttlMs] = await this.store.redis.hmget(this.store.key(taskId), 'createdAt', 'ttlMs');
    // A record without them is gone: the completion will find that out; count nothing.
    if (createdAt === null || ttlMs === null) return { ok: true, storedBytes: await this.stored(owner) };
    const expiresAt = Number(createdAt) + Number(ttlMs);
    const k = this.keys(owner);
    const once = async () =>
      (await this.scripts.reserveResultBytes(
        k.members,
        k.sizes,
        String(now),
        taskId,
        String(bytes),
        String(this.budgetBytes),
        String(expiresAt),
        String(RESULT_BUDGET_REPAIR_EVERY_MS),
      )) as number[];
    let r = await once();
    if (r[0] !== 1 && r[3] === 1 && (await this.repair(owner)) > 0) r = await once();
    if (r[0] === 1) return { ok: true, storedBytes: Number(r[1]) };
    return { ok: false, storedBytes: Number(r[1]), oldestExpiresAt: Number(r[2]) };
  }

  /**
   * Completes task `taskId` (fenced by `fence`) with result `json` of `bytes` bytes, counted
   * against `owner`'s budget, in one script (`TaskStore.completeCounted`: also releases the
   * outstanding slot, deletes the checkpoint key `o.checkpointKey` and, with `o.dropFromIndex`,
   * the reconciler index entry). Single Redis or Sentinel only (its keys span Cluster slots).
   * Refused at the budget: once per RESULT_BUDGET_REPAIR_EVERY_MS the principal's members are
   * repaired (`repair`) and the completion is tried again, as `reserve` does.
   * @returns the write's outcome, or `over_budget` (the task is untouched: fail it).
   */
  async complete(
    owner: string,
    taskId: string,
    fence: string,
    result: { json: string; bytes: number; statusMessage: string },
    o: { checkpointKey: string; dropFromIndex: boolean },
    now = this.store.clock.now(),
  ): Promise<CountedCompletion> {
    const counts = {
      owner,
      bytes: result.bytes,
      budgetKeys: this.keys(owner),
      budgetBytes: this.budgetBytes,
      repairGapMs: RESULT_BUDGET_REPAIR_EVERY_MS,
      ...o,
    };
    const once = () => this.store.completeCounted(taskId, fence, result.json, result.statusMessage, counts, now);
    const r = await once();
    if (r.code === 'over_budget' && r.repairDue && (await this.repair(owner)) > 0) return once();
    return r;
  }

  /** Stops counting `taskId`'s result (it was not written after all). Idempotent. */
  async release(owner: string, taskId: string): Promise<void> {
    const k = this.keys(owner);
    await this.scripts.releaseResultBytes(k.members, k.sizes, taskId);
  }

  /** `owner`'s stored result bytes as last counted (expired members are subtracted at the next reservation). */
  async stored(owner: string): Promise<number> {
    return Number((await this.store.redis.hget(this.keys(owner).sizes, '~total')) ?? 0);
  }

  /**
   * Drops `owner`'s reservations whose result was never stored: the task ended otherwise
   * (failed, cancelled) or its record is gone. A `completed` task stored its result; a task
   * still running or waiting keeps its reservation (its step may be re-run and count again,
   * once). Reads one status per member, so it runs only at a refusal. @returns how many dropped.
   */
  async repair(owner: string): Promise<number> {
    const members = await this.store.redis.zrange(this.keys(owner).members, '0', '-1');
    const statuses = await Promise.all(members.map((id) => this.store.redis.hget(this.store.key(id), 'status')));
    const stale = members.filter((_, i) => {
      const st = statuses[i];
      return !st || (isTerminal(st) && st !== 'completed');
    });
    for (const id of stale) await this.release(owner, id);
    return stale.length;
  }
}
