/**
 * The task record as callers see it (`TaskRecord`), what creates one (`CreateTaskInput`), and
 * how the record's hash fields are written (`recordFields`) and read back (`parseRecord`).
 */
import { stringify as stableStringify } from 'safe-stable-stringify';
import type { JsonRpcErrorObject } from '@mcp-tasks/errors';
import type { TaskStatus } from './wire.js';

/** Whether the task was created for a client holding a task handle, or for a synchronous call. */
export type TaskMode = 'task' | 'sync';

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

/** A task record as read from Redis. Times are unix milliseconds. */
export interface TaskRecord {
  taskId: string;
  status: TaskStatus;
  owner: string;
  tool: string;
  /**
   * The call's arguments as stored (JSON; `{}` when none): a poll never needs them, so they are
   * not parsed on each read (the worker gets them parsed from its claim).
   */
  argsJson: string;
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
  /** When the completion webhook of this (terminal) task was enqueued (ms). */
  webhookQueuedAt?: number;
  /** `input_required`: when a client last looked at it (`tasks/get`, `task_status`; ms). */
  polledAt?: number;
  /** The step at which its outstanding slot was released while it waited for input (TASK_INPUT_SLOT_RELEASE_MS). */
  slotReleasedStep?: number;
}

/**
 * One progress report of a tool, as relayed to a synchronous caller (P-01..P-04): the tool's
 * own numbers; the gateway enforces "strictly increasing" and the rate per stream.
 */
export interface ProgressEvent {
  progress: number;
  total?: number;
  message?: string;
}

/** What `TaskStore.create` writes: the new task's owner, tool call, mode and lifetimes (ms). */
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

/**
 * The hash fields of a new task in `working`, step 1 (`createTask-1.lua` writes them as given).
 * Times are unix ms; `statusMessage` is capped, the trace context cut to 64 / 512 characters.
 */
export function recordFields(input: CreateTaskInput, now: number): Record<string, string> {
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
  return fields;
}

/** JSON with object keys sorted (an answer's stored form: equal answers are equal strings). */
export function canonicalJson(value: unknown): string {
  return stableStringify(value ?? null) ?? 'null';
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
  for (const f in h) {
    if (f.startsWith('req:')) inputRequests[f.slice(4)] = JSON.parse(h[f]!);
    else if (f.startsWith('resp:')) inputResponses[f.slice(5)] = JSON.parse(h[f]!);
  }
  const rec: TaskRecord = {
    taskId,
    status: h.status as TaskStatus,
    owner: h.owner ?? '',
    tool: h.tool ?? '',
    argsJson: h.args || '{}',
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
  if (h.polledAt) rec.polledAt = Number(h.polledAt);
  if (h.slotReleasedStep) rec.slotReleasedStep = Number(h.slotReleasedStep);
  if (h.progress) rec.progress = JSON.parse(h.progress) as TaskRecord['progress'];
  const result = rec.status === 'completed' ? (outcome ?? h.result) : h.result;
  const error = rec.status === 'failed' ? (outcome ?? h.error) : h.error;
  if (result) rec.result = JSON.parse(result) as TaskRecord['result'];
  if (error) rec.error = JSON.parse(error) as TaskRecord['error'];
  return rec;
}
