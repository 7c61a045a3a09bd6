/**
 * What the transition scripts answer, as callers see it: the outcome types of TaskStore's
 * writes, and the parsers of the scripts' array replies (`[code, ...details]`).
 */
import type { TaskMode } from './task-record.js';
import type { TaskStatus } from './wire.js';

/** A script's array reply: `[code, ...details]`. */
export type Reply = (string | null)[];

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

/** What `claimStep` hands the worker that may now run the step. */
export interface StepClaim {
  fence: string;
  tool: string;
  args: unknown;
  state: unknown;
  reruns: number;
  /** Runs of this step so far, this one included: 1 the first time, 2 after one restart. */
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

/**
 * What `completeCounted` passes along besides the result: the principal whose budget and slot
 * the completion counts, and the keys and figures of `completeCounted-8.lua`.
 */
export interface CompletionCounts {
  /** The task's principal (its outstanding slot is released). */
  owner: string;
  /** Bytes of the result JSON (UTF-8), counted against the budget. */
  bytes: number;
  /** The principal's result-budget keys (`ResultBudget.keys`). */
  budgetKeys: { members: string; sizes: string };
  /** MAX_RESULT_BYTES_PER_PRINCIPAL (bytes). */
  budgetBytes: number;
  /** Least gap between two budget repairs (ms). */
  repairGapMs: number;
  /** The task's checkpoint key (`Checkpoints.key`), deleted with the completion. */
  checkpointKey: string;
  /** Drop the task from the reconciler's index now (true only when no completion webhook needs the reconciler's check). */
  dropFromIndex: boolean;
}

/**
 * Outcome of `completeCounted`: a fenced write's outcome, or `over_budget` (nothing written to
 * the task): the principal's stored bytes, when the oldest stored result expires (ms), and
 * whether a repair of the budget is due (`ResultBudget.repair`).
 */
export type CountedCompletion =
  WriteOutcome | { code: 'over_budget'; storedBytes: number; oldestExpiresAt: number; repairDue: boolean };

/** Outcome of `requestCancel`. */
export type CancelOutcome =
  | { code: 'gone' }
  | { code: 'terminal'; status: TaskStatus }
  | { code: 'cancelled' }
  | { code: 'requested'; jobId: string };

/** Outcome of `applyInputResponses`. */
export type ApplyOutcome =
  | { code: 'gone' }
  /** `key` was answered already with a different response; nothing was written. */
  | { code: 'conflict'; key: string }
  | { code: 'ignored'; status: string }
  | { code: 'partial'; applied: number }
  | { code: 'resumed'; step: number; applied: number };

/** What `claimStep` answers: the claim, or why the step may not run (`terminal` and `cancelled` carry the owner). */
export type ClaimOutcome =
  | ({ code: 'ok' } & StepClaim)
  | { code: 'gone' }
  | { code: 'cancelled'; owner: string }
  | { code: 'terminal'; status: string; owner: string }
  | { code: 'stale'; status: string };

/** Outcome of `reserveOutstanding`: `count` = the principal's outstanding tasks (this one included when `ok`). */
export interface Reservation {
  ok: boolean;
  count: number;
}

/**
 * ARGV tail of a script that checks who acts (owner, mode; '' = system caller).
 * @throws when `as.owner` is an empty string (a caller bug: '' means "system" to the script).
 */
export function actAsArgs(as: ActAs): [string, string] {
  if (as.owner === '') throw new Error('TaskStore: an owner check needs a non-empty principal');
  return [as.owner ?? '', as.mode ?? ''];
}

/** Parses a fenced write's reply; throws on a code no script answers. */
export function toWriteOutcome(r: Reply): WriteOutcome {
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
 * Parses `claimStep-1.lua`'s reply: `ok`, fence, tool, args, state, reruns, mode, caps, owner,
 * attempt, then answer pairs; or `terminal`/`cancelled`/`stale`/`gone` with their details.
 */
export function toClaimOutcome(r: Reply): ClaimOutcome {
  const code = r[0];
  if (code !== 'ok') {
    if (code === 'terminal') return { code, status: r[1] ?? '', owner: r[2] ?? '' };
    if (code === 'cancelled') return { code, owner: r[1] ?? '' };
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
    clientCapabilities: JSON.parse(r[7] || '{}') as Record<string, unknown>,
    owner: r[8] ?? '',
    inputResponses,
  };
}

/** Parses `applyInputResponses-1.lua`'s reply. */
export function toApplyOutcome(r: Reply): ApplyOutcome {
  switch (r[0]) {
    case 'gone':
      return { code: 'gone' };
    case 'conflict':
      return { code: 'conflict', key: r[1] ?? '' };
    case 'partial':
      return { code: 'partial', applied: Number(r[1]) };
    case 'resumed':
      return { code: 'resumed', step: Number(r[1]), applied: Number(r[2]) };
    default:
      return { code: 'ignored', status: r[1] ?? '' };
  }
}

/** Parses `requestCancel-1.lua`'s reply. */
export function toCancelOutcome(r: Reply): CancelOutcome {
  switch (r[0]) {
    case 'gone':
      return { code: 'gone' };
    case 'terminal':
      return { code: 'terminal', status: r[1] as TaskStatus };
    case 'cancelled':
      return { code: 'cancelled' };
    default:
      return { code: 'requested', jobId: r[1]! };
  }
}
