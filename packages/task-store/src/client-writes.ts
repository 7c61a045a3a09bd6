/**
 * The writes and reads a client request makes on a task: answers, cancellation, a synchronous
 * call's holder, detach and progress stream, and the input-slot bookkeeping. Part of `TaskStore`.
 */
import { StepWrites } from './step-writes.js';
import { canonicalJson, capStatusMessage, type ProgressEvent } from './task-record.js';
import {
  actAsArgs,
  toApplyOutcome,
  toCancelOutcome,
  type ActAs,
  type ApplyOutcome,
  type CancelOutcome,
  type Reply,
} from './outcomes.js';
import type { TaskStatus } from './wire.js';

/** The client side of `TaskStore` (see store.ts). */
export class ClientWrites extends StepWrites {
  /**
   * Applies answers to outstanding keys atomically (read-your-writes for the ack, T-30).
   * Only keys the record asks for right now, or has an answer to, reach the script: the `req:`
   * and `resp:` fields are read first (one HKEYS) and every other key is dropped here, so a
   * request with 100,000 keys costs one small script call and writes nothing extra (the script
   * re-checks each key, so a concurrent change between the two reads is harmless). Answers are
   * serialized canonically (sorted keys), so the script can tell an identical answer to a key
   * answered already (ignored) from a different one (`conflict`, case B-05).
   * @param as a client request's principal and mode (T-44): another principal's task, or one
   *           of another mode, is `gone` and left untouched. Omit for system callers.
   * @returns `gone` (unknown, expired or foreign), `conflict` (a key answered already with
   *          another response: nothing written), `ignored` (not input_required, or no
   *          outstanding key answered), `partial` or `resumed` (the next step to enqueue).
   * @throws when `as.owner` is an empty string (a caller bug: '' means "system" to the script).
   */
  async applyInputResponses(
    taskId: string,
    responses: Record<string, unknown>,
    as: ActAs = {},
    now = this.clock.now(),
  ): Promise<ApplyOutcome> {
    const known = new Set(
      (await this.redis.hkeys(this.key(taskId)))
        .filter((f) => f.startsWith('req:') || f.startsWith('resp:'))
        .map((f) => f.slice(f.indexOf(':') + 1)),
    );
    const pairs: string[] = [];
    for (const k of known) if (Object.hasOwn(responses, k)) pairs.push(k, canonicalJson(responses[k]));
    const r = (await this.scripts.applyInputResponses(
      this.key(taskId),
      String(now),
      this.channel(taskId),
      ...actAsArgs(as),
      ...pairs,
    )) as Reply;
    return toApplyOutcome(r);
  }

  /**
   * Requests cancellation (T-36 / C-01). See `requestCancel-1.lua` for the rules.
   * @param as a client request's principal and mode (T-44): another principal's task, or one
   *           of another mode, is `gone` and left untouched. Omit for system callers.
   * @returns `gone`, `terminal` (unchanged), `cancelled` (ended now: release its outstanding
   *          slot) or `requested` (the worker running it ends it).
   * @throws when `as.owner` is an empty string.
   */
  async requestCancel(
    taskId: string,
    statusMessage = 'Cancelled by client request',
    as: ActAs = {},
    now = this.clock.now(),
  ): Promise<CancelOutcome> {
    const r = (await this.scripts.requestCancel(
      this.key(taskId),
      String(now),
      this.cancelChannel,
      `t.${taskId}.`,
      capStatusMessage(statusMessage),
      this.channel(taskId),
      ...actAsArgs(as),
    )) as Reply;
    const out = toCancelOutcome(r);
    if (out.code === 'cancelled') this.ended(taskId);
    return out;
  }

  /**
   * A synchronous call ran out of its budget: the task continues in `task` mode for the same
   * owner (see `detachSync-1.lua`).
   * @returns `ok` (detached; `status` and `statusMessage` are its current ones), `terminal` (it
   * already ended: answer the call normally), `gone` or `not_sync`.
   */
  async detachSync(
    taskId: string,
    now = this.clock.now(),
  ): Promise<{ code: 'ok' | 'terminal' | 'not_sync'; status: TaskStatus; statusMessage?: string } | { code: 'gone' }> {
    const r = (await this.scripts.detachSync(this.key(taskId), String(now))) as Reply;
    if (r[0] === 'gone') return { code: 'gone' };
    const statusMessage = typeof r[2] === 'string' ? r[2] : undefined;
    return {
      code: r[0] as 'ok' | 'terminal' | 'not_sync',
      status: r[1] as TaskStatus,
      ...(statusMessage !== undefined ? { statusMessage } : {}),
    };
  }

  /**
   * A request holding a synchronous call joins (`+1`), renews (`0`) or leaves (`-1`); see
   * `renewHolder-1.lua`. @returns holders left, or -1 when the task is gone/terminal/not sync.
   */
  async renewHolder(taskId: string, delta: -1 | 0 | 1 = 0, now = this.clock.now()): Promise<number> {
    return Number(await this.scripts.renewHolder(this.key(taskId), String(now), String(delta)));
  }

  /**
   * Progress events of a synchronous call after stream id `afterId` (exclusive; `'0'` = from
   * the start), oldest first, at most `count`. One XRANGE.
   */
  async readProgress(taskId: string, afterId = '0', count = 100): Promise<{ id: string; event: ProgressEvent }[]> {
    const start = afterId === '0' ? '-' : `(${afterId}`;
    const rows = (await this.redis.xrange(this.progressKey(taskId), start, '+', 'COUNT', count)) as [
      string,
      string[],
    ][];
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
   * Records that a client looked at an `input_required` task (`notePoll-1.lua`; never creates a
   * key): it keeps holding its outstanding slot (TASK_INPUT_SLOT_RELEASE_MS).
   */
  async notePoll(taskId: string, now = this.clock.now()): Promise<boolean> {
    return Number(await this.scripts.notePoll(this.key(taskId), String(now))) === 1;
  }

  /**
   * Records that the outstanding slot of `task`-mode task `taskId`, waiting in `input_required`
   * at `step`, unpolled and unanswered for `idleMs`, is released (`markInputSlotReleased-1.lua`).
   * @returns true when recorded (the caller then releases the slot), false when the task changed.
   */
  async markInputSlotReleased(taskId: string, step: number, idleMs: number, now = this.clock.now()): Promise<boolean> {
    return (
      Number(await this.scripts.markInputSlotReleased(this.key(taskId), String(step), String(now), String(idleMs))) ===
      1
    );
  }
}
