/**
 * The worker's writes to a task: claiming a step, reporting progress, parking for input and the
 * terminal transitions (fenced by the claim). Part of `TaskStore`.
 */
import { TaskRecords } from './records.js';
import { capStatusMessage, type ProgressEvent } from './task-record.js';
import {
  toClaimOutcome,
  toWriteOutcome,
  type ClaimOutcome,
  type CompletionCounts,
  type CountedCompletion,
  type Reply,
  type WriteOutcome,
} from './outcomes.js';
import type { JsonRpcErrorObject } from '@mcp-tasks/errors';
import type { TaskStatus } from './wire.js';

/** The worker side of `TaskStore` (see store.ts). */
export class StepWrites extends TaskRecords {
  /**
   * A worker claims step `step`; returns the claim with a new fence, or why not. `terminal` and
   * `cancelled` (the claim found a cancel request and ended the task) carry the task's owner,
   * so the worker can release its outstanding slot.
   */
  async claimStep(taskId: string, step: number, jobToken: string, now = this.clock.now()): Promise<ClaimOutcome> {
    const r = (await this.scripts.claimStep(
      this.key(taskId),
      String(step),
      jobToken,
      String(now),
      this.channel(taskId),
    )) as Reply;
    const out = toClaimOutcome(r);
    if (out.code === 'cancelled') this.ended(taskId);
    return out;
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
   * Fenced `working → completed`. `result` is stored as given (a CallToolResult), or as the
   * JSON text given when it is a string (the worker serializes once, to check its size).
   */
  async complete(
    taskId: string,
    fence: string,
    result: Record<string, unknown> | string,
    statusMessage = '',
    now = this.clock.now(),
  ): Promise<WriteOutcome> {
    const json = typeof result === 'string' ? result : JSON.stringify(result);
    const r = (await this.scripts.completeTask(
      this.key(taskId),
      this.resultKey(taskId),
      fence,
      String(now),
      json,
      capStatusMessage(statusMessage),
      this.channel(taskId),
    )) as Reply;
    const out = toWriteOutcome(r);
    if (out.code === 'ok') this.ended(taskId);
    return out;
  }

  /**
   * Fenced `working → completed` that also counts the result against the principal's budget,
   * releases the task's outstanding slot, deletes its checkpoint and (`c.dropFromIndex`) drops
   * it from the reconciler's index, in one script (`completeCounted-8.lua`). Its keys span
   * Cluster slots: call it only on a single Redis or Sentinel (else `complete` and the separate
   * calls). `json` is the result's JSON text of `c.bytes` bytes.
   * @returns the write's outcome (a refusal wrote nothing), or `over_budget` (the task is
   *          untouched; `ResultBudget.complete` repairs and retries, or the caller fails it).
   */
  async completeCounted(
    taskId: string,
    fence: string,
    json: string,
    statusMessage: string,
    c: CompletionCounts,
    now = this.clock.now(),
  ): Promise<CountedCompletion> {
    const out = this.outstandingKeys(c.owner);
    const r = (await this.scripts.completeCounted(
      this.key(taskId),
      this.resultKey(taskId),
      c.checkpointKey,
      c.budgetKeys.members,
      c.budgetKeys.sizes,
      out.outstanding,
      out.since,
      this.reconcileKey,
      fence,
      String(now),
      json,
      capStatusMessage(statusMessage),
      this.channel(taskId),
      taskId,
      String(c.bytes),
      String(c.budgetBytes),
      c.dropFromIndex ? '1' : '0',
      String(c.repairGapMs),
    )) as (string | number | null)[];
    if (r[0] === 'over_budget')
      return {
        code: 'over_budget',
        storedBytes: Number(r[1]),
        oldestExpiresAt: Number(r[2]),
        repairDue: Number(r[3]) === 1,
      };
    const done = toWriteOutcome(r as Reply);
    if (done.code === 'ok') this.ended(taskId);
    return done;
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
  async markCancelled(
    taskId: string,
    fence: string,
    statusMessage: string,
    now = this.clock.now(),
  ): Promise<WriteOutcome> {
    const r = (await this.scripts.markCancelled(
      this.key(taskId),
      fence,
      String(now),
      capStatusMessage(statusMessage),
      this.channel(taskId),
    )) as Reply;
    const out = toWriteOutcome(r);
    if (out.code === 'ok') this.ended(taskId);
    return out;
  }

  /**
   * Records that the completion webhook of terminal task `taskId` was enqueued
   * (`markWebhookQueued-1.lua`; never creates a key).
   * @returns true when written, false when the record is gone or not terminal.
   */
  async markWebhookQueued(taskId: string, now = this.clock.now()): Promise<boolean> {
    return Number(await this.scripts.markWebhookQueued(this.key(taskId), String(now))) === 1;
  }
}
