/**
 * A principal's share of the workers (design D9, case N-08): at most `limit` steps of one
 * principal run at once across every worker (MAX_RUNNING_STEPS_PER_PRINCIPAL), counted in Redis.
 * The worker asks before it claims a step (`enter`); a step over the limit is recorded as waiting
 * and handed back to the queue by the worker (apps/worker/src/principal-share.ts), holding no
 * worker slot; the worker that ends one of the principal's steps (`leave`) learns which waiting
 * steps to wake.
 *
 * Keys (one hash tag per principal, so each script's keys share a Cluster slot):
 *   `<prefix>:{p:<sha256 hex of the principal>}:running`
 *       zset: member taskId, score = lease expiry (ms). A lease is renewed while its step runs
 *       (`renew`) and lapses when its worker dies; every script drops lapsed leases first.
 *       PEXPIREAT = its highest score.
 *   `<prefix>:{p:…}:running:by`  hash: taskId → the run token (the BullMQ job lock token) that
 *       holds the lease: a re-run of the step elsewhere takes the lease over (one task counts
 *       once), and the stale run's `leave` no longer drops it. Same expiry as `running`.
 *   `<prefix>:{p:…}:waiting`  zset: member jobId, score = when it first had to wait (ms): the
 *       order in which waiting steps are woken. PEXPIRE WAITING_KEEP_MS after the last change;
 *       a member leaves when its step is admitted, or when the waker finds its job gone.
 */
import type { TaskStore } from './store.js';
import { principalTag } from './principal.js';
import { loadScripts } from './scripts.js';

/** How long the waiting zset of a principal outlives its last change (ms). */
export const WAITING_KEEP_MS = 600_000;

/** What `enter` decided. */
export type ShareEntry =
  | { admitted: true; running: number; waited: boolean }
  | { admitted: false; running: number; rank: number; first: boolean };

/** The fields of a step's task the worker reads before asking for a share (`subject`). */
export interface ShareSubject {
  owner: string | null;
  status: string | null;
  step: number;
  cancelRequested: boolean;
}

/** The principals' shares of the workers, on the store's Redis, key prefix and clock. */
export class PrincipalShares {
  private readonly scripts;

  /**
   * @param limit   steps of one principal that may run at once (MAX_RUNNING_STEPS_PER_PRINCIPAL, ≥ 1)
   * @param leaseMs how long a lease lives without renewal (ms): a dead worker's steps stop
   *                counting this long after its last renewal.
   */
  constructor(
    readonly store: TaskStore,
    readonly limit: number,
    readonly leaseMs: number,
  ) {
    this.scripts = loadScripts(store.redis);
  }

  /** The principal's keys (see the module doc). */
  keys(owner: string): { running: string; holders: string; waiting: string } {
    const base = `${this.store.prefix}:{p:${principalTag(owner)}}`;
    return { running: `${base}:running`, holders: `${base}:running:by`, waiting: `${base}:waiting` };
  }

  /** Owner, status, step and cancel flag of a task (one HMGET; owner/status `null` when it is gone). */
  async subject(taskId: string): Promise<ShareSubject> {
    const [owner, status, step, cancel] = await this.store.redis.hmget(
      this.store.key(taskId),
      'owner',
      'status',
      'step',
      'cancelRequested',
    );
    return { owner: owner ?? null, status: status ?? null, step: Number(step ?? 0), cancelRequested: cancel === '1' };
  }

  /**
   * Asks to run job `jobId` (a step of task `taskId` of `owner`) as run `token` (`enterShare-3.lua`).
   * Admitted: the lease is held until `leave` (renew it every `leaseMs`/4 or so). Not admitted:
   * the step is recorded as waiting (`rank` 0 = next in line); hand the job back to the queue.
   */
  async enter(owner: string, taskId: string, jobId: string, token: string, now = this.store.clock.now()) {
    const k = this.keys(owner);
    const r = (await this.scripts.enterShare(
      k.running,
      k.holders,
      k.waiting,
      String(now),
      taskId,
      token,
      String(this.limit),
      String(now + this.leaseMs),
      jobId,
      String(WAITING_KEEP_MS),
    )) as number[];
    if (r[0] === 1) return { admitted: true, running: Number(r[1]), waited: r[2] === 1 } satisfies ShareEntry;
    return { admitted: false, running: Number(r[1]), rank: Number(r[2]), first: r[3] === 1 } satisfies ShareEntry;
  }

  /** Extends run `token`'s lease on `taskId`. @returns false when another run holds it now (stop renewing). */
  async renew(owner: string, taskId: string, token: string, now = this.store.clock.now()): Promise<boolean> {
    const k = this.keys(owner);
    return Number(await this.scripts.renewShare(k.running, k.holders, taskId, token, String(now + this.leaseMs))) === 1;
  }

  /**
   * Run `token` of `taskId` stopped (`leaveShare-3.lua`): its lease is dropped unless another run
   * took it over. @returns the job ids of the waiting steps to wake (the first free-share many).
   */
  async leave(owner: string, taskId: string, token: string, now = this.store.clock.now()): Promise<string[]> {
    const k = this.keys(owner);
    return (await this.scripts.leaveShare(
      k.running,
      k.holders,
      k.waiting,
      String(now),
      taskId,
      token,
      String(this.limit),
    )) as string[];
  }

  /** Removes `jobId` from `owner`'s waiting steps (its job is gone, or its task no longer waits). One ZREM. */
  async forgetWaiting(owner: string, jobId: string): Promise<void> {
    await this.store.redis.zrem(this.keys(owner).waiting, jobId);
  }

  /** `owner`'s steps running now (leases not lapsed). One ZCOUNT. */
  async running(owner: string, now = this.store.clock.now()): Promise<number> {
    return this.store.redis.zcount(this.keys(owner).running, `(${now}`, '+inf');
  }

  /** `owner`'s waiting steps, next first. One ZRANGE. */
  async waiting(owner: string): Promise<string[]> {
    return this.store.redis.zrange(this.keys(owner).waiting, '0', '-1');
  }

  /**
   * Sets the statusMessage of step `step` of `taskId` while no worker has claimed it
   * (`noteWaiting-1.lua`): why it waits, or that it starts. @returns true when written.
   */
  async noteWaiting(taskId: string, step: number, statusMessage: string, now = this.store.clock.now()) {
    return (
      Number(await this.scripts.noteWaiting(this.store.key(taskId), String(step), statusMessage, String(now))) === 1
    );
  }
}
