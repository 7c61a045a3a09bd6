/**
 * Idempotency-Key → task (docs/architecture.md, "Idempotent creation"): which task a
 * `tools/call` carrying an `Idempotency-Key` created, per principal, for as long as that task
 * lives.
 *
 * Key: `<prefix>:{p:<sha256 hex of the principal>}:idem:<sha256 hex of the key>`, a hash
 * `{taskId, fp, at}` (`fp`: `fingerprintOf` the tool and arguments; `at`: when it was claimed,
 * ms), PEXPIREAT = the task's expiry. Principals never share keys: the principal is part of the
 * name. It lives in the principal's Cluster slot with the outstanding-task zsets, so claiming
 * the key and reserving the task's outstanding slot are one script (`claimIdempotencyKey-3.lua`).
 *
 * The record is written after the claim (it lives in the task's own slot), so a key can name a
 * task whose record does not exist yet (its creation in flight) or never will (its gateway died
 * between the two writes). Callers return a task only once its record exists, and take over a
 * claim older than IDEMPOTENCY_CLAIM_GRACE_MS whose record never appeared; a creation that fails
 * releases its claim (`release`).
 */
import { createHash } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import { loadScripts, type Scripts } from './scripts.js';
import { principalTag } from './principal.js';

/**
 * A claim whose task record has not appeared this long after it was made (ms) is dead (its
 * gateway died between the claim and the record): a retry takes the key over. A live creation
 * writes its record within one Redis command timeout (2 s) of the claim, or fails and releases it.
 */
export const IDEMPOTENCY_CLAIM_GRACE_MS = 5_000;

/** What a key names. */
export interface IdempotencyEntry {
  taskId: string;
  /** `fingerprintOf` the tool and arguments of the call that claimed it. */
  fp: string;
  /** When it was claimed (unix ms, Redis time). */
  at: number;
}

/** Outcome of `claim`. */
export type IdempotencyClaim =
  { code: 'ok'; count: number } | { code: 'full'; count: number } | { code: 'taken'; entry: IdempotencyEntry };

/**
 * Fingerprint of a call (hex SHA-256 of the JSON of `[tool, args]`): the same key with another
 * fingerprint is another call. A retry sends the same bytes, so the same key order.
 */
export function fingerprintOf(tool: string, args: unknown): string {
  return createHash('sha256')
    .update(JSON.stringify([tool, args ?? {}]))
    .digest('hex');
}

/** The outstanding-task side of the TaskStore that a claim uses. */
interface Outstanding {
  outstandingKeys(owner: string): { outstanding: string; since: string };
  repairOutstanding(owner: string, now: number): Promise<number>;
}

export class IdempotencyKeys {
  private readonly scripts: Scripts;

  /**
   * @param repairEveryMs least gap between two repairs of one principal's outstanding set (ms).
   */
  constructor(
    private readonly redis: Redis | Cluster,
    private readonly prefix: string,
    private readonly outstanding: Outstanding,
    private readonly repairEveryMs: number,
  ) {
    this.scripts = loadScripts(redis);
  }

  /** Redis key of `owner`'s `key` (the key itself is hashed: any characters, never in a key name). */
  keyOf(owner: string, key: string): string {
    return `${this.prefix}:{p:${principalTag(owner)}}:idem:${createHash('sha256').update(key).digest('hex')}`;
  }

  /** The task `owner`'s `key` names, or null. One HGETALL. */
  async find(owner: string, key: string): Promise<IdempotencyEntry | null> {
    const h = await this.redis.hgetall(this.keyOf(owner, key));
    if (!h.taskId || !h.fp) return null;
    return { taskId: h.taskId, fp: h.fp, at: Number(h.at) || 0 };
  }

  /**
   * Claims `owner`'s `key` for task `taskId` and reserves that task's slot among the principal's
   * MAX_OUTSTANDING_TASKS (`claimIdempotencyKey-3.lua`), atomically: `taken` (another request
   * holds the key) and `full` (at the limit, after one repair as `TaskStore.reserveOutstanding`)
   * write nothing.
   * @param expiresAt the task's expiry (unix ms): the key's and the slot's.
   * @param takeOver the task id of a dead claim to replace (see IDEMPOTENCY_CLAIM_GRACE_MS).
   * @throws the ioredis error when Redis fails.
   */
  async claim(
    owner: string,
    key: string,
    fp: string,
    taskId: string,
    limit: number,
    expiresAt: number,
    now: number,
    takeOver = '',
  ): Promise<IdempotencyClaim> {
    const keys = this.outstanding.outstandingKeys(owner);
    const run = async () =>
      (await this.scripts.claimIdempotencyKey(
        keys.outstanding,
        keys.since,
        this.keyOf(owner, key),
        String(now),
        taskId,
        String(limit),
        String(expiresAt),
        String(this.repairEveryMs),
        fp,
        takeOver,
      )) as (string | number)[];
    let r = await run();
    if (r[0] === 'full' && r[2] === 1 && (await this.outstanding.repairOutstanding(owner, now)) > 0) r = await run();
    if (r[0] === 'ok') return { code: 'ok', count: Number(r[1]) };
    if (r[0] === 'full') return { code: 'full', count: Number(r[1]) };
    return { code: 'taken', entry: { taskId: String(r[1]), fp: String(r[2]), at: Number(r[3]) || 0 } };
  }

  /**
   * Frees `owner`'s `key` when it still names `taskId` (a task that was never created: its
   * creation failed, or its request ended first). One script call.
   * @returns true when deleted.
   */
  async release(owner: string, key: string, taskId: string): Promise<boolean> {
    return Number(await this.scripts.releaseIdempotencyKey(this.keyOf(owner, key), taskId)) === 1;
  }
}
