/**
 * The MCP server factory: one fresh low-level `Server` per request (sdk-notes §1.3), wired to
 * process-wide singletons (task store, queues, tool registry, requestState codec).
 *
 * Methods served:
 *  - `tools/list`  the enabled tools;
 *  - `tools/call`  dispatched here (not `registerTool`) so it can answer `-32021` (D1);
 *  - `tasks/get`, `tasks/update`, `tasks/cancel` (Tasks extension, spec/tasks-extension.md).
 * `server/discover`, header validation (`-32020`), version errors (`-32022`) and `-32601` for
 * `tasks/list` / `tasks/result` are the SDK's.
 */
import { createHash, randomUUID } from 'node:crypto';
import {
  createRequestStateCodec,
  inputRequired as sdkInputRequired,
  ProtocolError,
  Server,
  type McpServerFactory,
  type ServerContext,
} from '@modelcontextprotocol/server';
import { z } from 'zod';
import type { Config } from '@mcp-tasks/config';
import type { Logger } from '@mcp-tasks/observability';
import { isWellFormedTaskId, newTaskId, TaskIdTakenError, toCreateTaskResult, toDetailedTask, stepJobId, type ApplyOutcome, type TaskRecord, type TaskStore } from '@mcp-tasks/task-store';
import type { JobQueues, TaskEvents } from '@mcp-tasks/jobs';
import {
  abortableSleep,
  isInputRequired,
  ToolCancelled,
  ToolProtocolError,
  type InputRequired,
  type InputResponse,
  type ToolContext,
  type ToolDefinition,
  type ToolRegistry,
} from '@mcp-tasks/tools';
import { validateInputResponses } from './answers.js';
import { ProgressRelay, progressTokenOf } from './progress.js';
import { TASK_STATUS_TOOL } from './task-status.js';
import {
  ErrorCode,
  invalidParams,
  missingCapability,
  storeUnavailable,
  taskNotFound,
  tasksExtensionRequired,
  TASKS_EXTENSION,
} from './errors.js';

export const SERVER_INFO = { name: 'mcp-task-service', version: '0.1.0' };

/** Per-HTTP-exchange state, carried in `authInfo.extra` from the Fastify route to the handlers. */
export interface Exchange {
  principal: string;
  /** Set once a task handle is about to be returned (D4: cancelled if the client vanished first). */
  createdTaskId?: string;
  /**
   * `params.inputResponses` exactly as sent. The SDK normalises it (a `null` arrives as `{}`),
   * so `tasks/update` validates this one (T-27: it must be an object).
   */
  rawInputResponses?: unknown;
}

export interface GatewayDeps {
  config: Config;
  log: Logger;
  store: TaskStore;
  queues: JobQueues;
  events: TaskEvents;
  registry: ToolRegistry;
}

/** Signed MRTR continuation (M-05, M-06): bound to the principal by the codec's `bind`. */
type RequestStatePayload =
  | MrtrRound
  | { k: 'sync' | 'status'; tool: string; args: string; taskId: string };

/**
 * A round of MRTR run in the gateway (inline tools, pre-task rounds): the step that asked, its
 * state, the requests it issued (`q`, to validate and re-ask), and a single-use nonce (`n`, M-07).
 */
type MrtrRound = { k: 'inline' | 'pre'; tool: string; args: string; step: number; state: unknown; q: Record<string, unknown>; n: string };

const TaskIdParams = z.object({ taskId: z.string() }).passthrough();

function exchangeOf(ctx: ServerContext): Exchange {
  const ex = ctx.http?.authInfo?.extra?.exchange as Exchange | undefined;
  return ex ?? { principal: 'anonymous' };
}

function clientCapabilities(ctx: ServerContext): Record<string, unknown> | undefined {
  const envelope = ctx.mcpReq.envelope as Record<string, unknown> | undefined;
  return envelope?.['io.modelcontextprotocol/clientCapabilities'] as Record<string, unknown> | undefined;
}

/** T-01/T-05/T-07: only this request's `_meta` clientCapabilities count. */
export function declaresTasks(ctx: ServerContext): boolean {
  const ext = clientCapabilities(ctx)?.extensions as Record<string, unknown> | undefined;
  return !!ext && ext[TASKS_EXTENSION] !== undefined;
}

/**
 * The Tasks extension gate, before any lookup (T-05): under 2025-11-25 there are no tasks here
 * (we do not offer the legacy tasks capability, T-07) → `-32601`; a 2026 request that does not
 * declare the extension → `-32021`.
 */
function gateTasks(era: 'legacy' | 'modern', ctx: ServerContext, method: string): void {
  if (era === 'legacy') throw new ProtocolError(ErrorCode.MethodNotFound, `Method not found: ${method} (no tasks under protocol 2025-11-25)`);
  if (!declaresTasks(ctx)) throw tasksExtensionRequired(method);
}

/** Capabilities in `required` (top-level keys) that `caps` lacks; undefined when none. */
function missingCaps(required: Record<string, unknown> | undefined, caps: Record<string, unknown>): Record<string, unknown> | undefined {
  if (!required) return undefined;
  const missing = Object.fromEntries(Object.entries(required).filter(([k]) => caps[k] === undefined));
  return Object.keys(missing).length ? missing : undefined;
}

/**
 * The part of a request's client capabilities a task keeps for its life (what input its tool
 * may ask for): `elicitation`, `sampling`, `roots` (each `{}` if larger than 1 KB) and the
 * names of declared extensions. The rest is dropped, so a client cannot park megabytes of
 * `_meta` in Redis for the task's TTL.
 */
export function storedCapabilities(caps: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k of ['elicitation', 'sampling', 'roots']) {
    const v = caps[k];
    if (v === undefined || v === null || typeof v !== 'object') continue;
    out[k] = JSON.stringify(v).length <= 1024 ? v : {};
  }
  const ext = caps.extensions;
  if (ext && typeof ext === 'object') {
    out.extensions = Object.fromEntries(Object.keys(ext).filter((n) => n.length <= 200).slice(0, 20).map((n) => [n, {}]));
  }
  return out;
}

const digest = (v: unknown) => createHash('sha256').update(JSON.stringify(v ?? {})).digest('base64url').slice(0, 22);

/**
 * Builds the per-request server factory. Expensive things live in `deps`, built once.
 * `handOffAll()` (shutdown) makes every synchronous call still running end at once with the
 * budget hand-off result: its work goes on as a task instead of being cancelled.
 */
export function createServerFactory(deps: GatewayDeps): McpServerFactory & { handOffAll(): void } {
  const { config, store, queues, events, registry, log } = deps;
  const handoffNow = new AbortController();
  const codec = createRequestStateCodec<RequestStatePayload>({
    key: config.requestState.key,
    ttlSeconds: config.requestState.ttlSeconds,
    bind: (ctx) => exchangeOf(ctx).principal,
  });
  const toolSettings = { researchPhaseMs: config.demo.researchPhaseMs };

  const inlineContext = (ctx: ServerContext, step: number, state: unknown, responses: Record<string, unknown>, caps: Record<string, unknown>): ToolContext => ({
    signal: ctx.mcpReq.signal,
    mode: 'inline',
    step,
    state,
    inputResponses: responses as Record<string, InputResponse>,
    clientCapabilities: caps,
    principal: exchangeOf(ctx).principal,
    settings: toolSettings,
    sleep: (ms) => abortableSleep(ms, ctx.mcpReq.signal),
    progress: async () => undefined,
  });

  /** Maps a thrown tool error to the JSON-RPC error of a synchronous call. */
  const toProtocolError = (e: unknown, tool: string): ProtocolError => {
    if (e instanceof ProtocolError) return e;
    if (e instanceof ToolProtocolError) return new ProtocolError(e.code, e.message, e.data);
    log.error({ err: e, tool }, 'tool.inline_failed');
    return new ProtocolError(ErrorCode.InternalError, `Tool ${tool} failed: ${(e as Error).message}`);
  };

  /** Returns MRTR `input_required` for a gateway-run step, with its signed continuation. */
  const mrtr = async (k: MrtrRound['k'], tool: string, args: unknown, step: number, out: Pick<InputRequired, 'inputRequests' | 'state'>, ctx: ServerContext) => {
    const payload: MrtrRound = { k, tool, args: digest(args), step, state: out.state ?? null, q: out.inputRequests, n: randomUUID() };
    return sdkInputRequired({ inputRequests: out.inputRequests as never, requestState: await codec.mint(payload, ctx) });
  };

  /**
   * Continues a gateway-run MRTR round: validates the answers against the requests issued (E-05),
   * asks again when one is missing (M-08), and spends the continuation's nonce so a replayed
   * retry cannot run the next step twice (M-07, B-17h).
   * @returns the step to run and its state, or the `input_required` to send back.
   */
  async function continueRound(k: MrtrRound['k'], tool: ToolDefinition, args: unknown, rs: RequestStatePayload | undefined, responses: Record<string, unknown>, ctx: ServerContext) {
    if (rs?.k !== k) return { step: 1, state: undefined as unknown };
    validateInputResponses(rs.q, responses);
    if (Object.keys(rs.q).some((key) => !(key in responses))) {
      return { again: await mrtr(k, tool.name, args, rs.step, { inputRequests: rs.q as InputRequired['inputRequests'], state: rs.state }, ctx) };
    }
    if (!(await store.spendNonce(rs.n, config.requestState.ttlSeconds * 1000))) throw invalidParams('requestState was already used');
    return { step: rs.step + 1, state: rs.state };
  }

  /** Creates a task, enqueues step 1, then returns the handle (T-15, D4). */
  async function startTask(tool: ToolDefinition, args: unknown, ctx: ServerContext, caps: Record<string, unknown>, mode: 'task' | 'sync'): Promise<TaskRecord> {
    const ex = exchangeOf(ctx);
    const taskId = newTaskId();
    let rec: TaskRecord;
    try {
      rec = await store.create({
        owner: ex.principal,
        tool: tool.name,
        args,
        mode,
        ttlMs: config.task.ttlMs,
        pollIntervalMs: config.task.pollIntervalMs,
        clientCapabilities: storedCapabilities(caps),
      }, taskId);
    } catch (e) {
      log.error({ err: (e as Error).message, taskId, tool: tool.name }, 'task.create_failed');
      // The write may still have landed (the reply was lost): remove it once Redis answers.
      // Never for a taken id: that record belongs to another task.
      if (!(e instanceof TaskIdTakenError)) void removeAbandoned(taskId);
      throw storeUnavailable();
    }
    // Indexed for the reconciler before the enqueue: a gateway that dies right here leaves a
    // record the reconciler finds ("job lost") rather than one nobody looks at.
    store.scheduleReconcile(rec.taskId, firstCheckMs(mode), config.task.ttlMs).catch(() => undefined);
    try {
      await queues.enqueueStep(rec.taskId, 1);
    } catch (e) {
      // Nothing may be left behind without a handle (D4, B-02c): the client gets an error.
      log.error({ err: (e as Error).message, taskId: rec.taskId }, 'task.enqueue_failed');
      void removeAbandoned(rec.taskId);
      throw storeUnavailable();
    }
    log.info({ taskId: rec.taskId, tool: tool.name, principal: ex.principal, mode }, 'task.created');
    return rec;
  }

  /**
   * Deletes the record and step-1 job of a task whose creation failed (the client got an error,
   * so nobody may ever see it run, D4). Redis is usually the reason it failed, so this retries
   * (250 ms → 2 s apart, for up to 2 minutes) until the record is gone and no job remains. A
   * worker that claims the step first finds no record and does nothing.
   */
  async function removeAbandoned(taskId: string): Promise<void> {
    const jobId = stepJobId(taskId, 1);
    const until = Date.now() + 120_000;
    for (let wait = 250; Date.now() < until; wait = Math.min(wait * 2, 2000)) {
      try {
        await store.remove(taskId);
        await queues.tools.remove(jobId);
        if ((await queues.tools.getJobState(jobId)) === 'unknown') {
          log.info({ taskId }, 'task.abandoned_removed');
          return;
        }
      } catch {
        // Redis still away: try again.
      }
      await new Promise((r) => setTimeout(r, wait));
    }
    log.error({ taskId }, 'task.abandoned_not_removed');
  }

  /** Budget of a synchronous call of `tool` (ms): per-tool override, the tool's own, the default. */
  const budgetOf = (tool: ToolDefinition) => config.sync.budgetMsByTool[tool.name] ?? tool.syncBudgetMs ?? config.sync.budgetMs;

  /**
   * Holds a synchronous call until its task ends or asks for input (D1), relaying the tool's
   * progress as `notifications/progress` (D6, see progress.ts). Re-reads the record and the
   * progress stream on every message of the task's channel and at least once a second (D5).
   * Closing the request cancels the task (C-01). When the call's budget runs out the task
   * continues in `task` mode and the call ends with a result naming `task_status` (D1).
   * @param fromId progress stream id to relay after (`'0'` for a new call; the last id before
   * the answers were applied, for an MRTR retry).
   */
  async function waitSync(taskId: string, tool: ToolDefinition, args: unknown, ctx: ServerContext, caps: Record<string, unknown>, fromId = '0') {
    const channel = store.channel(taskId);
    const signal = ctx.mcpReq.signal;
    const started = Date.now();
    const budgetMs = budgetOf(tool);
    const deadline = started + budgetMs;
    const relay = new ProgressRelay(
      progressTokenOf(ctx.mcpReq._meta as Record<string, unknown> | undefined),
      (params) => ctx.mcpReq.notify({ method: 'notifications/progress', params: { ...params } }),
      config.sync.progressHeartbeatMs,
      fromId,
      started,
    );
    /** Relays new progress events (none is read when the request has no token). */
    const pump = async () => {
      if (!relay.active) return;
      const rows = await store.readProgress(taskId, relay.lastId).catch(() => []);
      if (!signal.aborted) await relay.push(rows);
    };
    // Watching from before the first read: a message that arrives while this loop reads or
    // writes is kept for the next wait, not lost.
    const watch = await events.watch(channel);
    const wake = AbortSignal.any([signal, handoffNow.signal]);
    // This request holds the call; renewing tells the reconciler it is still here (a killed
    // gateway stops renewing, and its call is cancelled).
    const renewEvery = Math.max(500, Math.floor(config.worker.syncHolderTimeoutMs / 3));
    let renewedAt = Date.now();
    let holding = (await store.renewHolder(taskId, 1).catch(() => -1)) > 0;
    try {
      for (;;) {
        if (Date.now() - renewedAt >= renewEvery) {
          renewedAt = Date.now();
          await store.renewHolder(taskId, 0).catch(() => -1);
        }
        if (signal.aborted) {
          relay.close();
          // C-01: the client closed the request. Another request may hold the same call (a
          // retry sent twice): cancel only when this was the last holder.
          // -1 = no longer a synchronous call (handed off: only tasks/cancel ends it now).
          const left = holding ? await store.renewHolder(taskId, -1).catch(() => -1) : -1;
          holding = false;
          if (left === 0) await store.requestCancel(taskId, 'Cancelled: the client closed the request').catch(() => undefined);
          log.info({ taskId, tool: tool.name, holdersLeft: left, afterMs: Date.now() - started }, 'sync.disconnected');
          throw new ProtocolError(ErrorCode.InternalError, 'Request cancelled by client disconnect');
        }
        let rec: TaskRecord | null;
        try {
          rec = await store.get(taskId);
        } catch (e) {
          log.warn({ taskId, err: (e as Error).message }, 'sync.store_unavailable');
          throw storeUnavailable();
        }
        if (!rec) throw new ProtocolError(ErrorCode.InternalError, 'The task record expired before the tool finished');
        if (rec.status !== 'working') {
          // Every progress event was written before the status changed: relay them all, then
          // nothing more (P-02, B-12e).
          await pump();
          relay.close();
        }
        switch (rec.status) {
          case 'completed':
            return { ...(rec.result ?? { content: [] }) };
          case 'failed':
            throw new ProtocolError(rec.error?.code ?? ErrorCode.InternalError, rec.error?.message ?? 'Tool failed', rec.error?.data);
          case 'cancelled':
            return { content: [{ type: 'text', text: rec.statusMessage ?? 'The tool was cancelled.' }], isError: true };
          case 'input_required': {
            if (caps.elicitation === undefined) {
              await store.requestCancel(taskId, 'Cancelled: the client cannot answer input requests');
              return {
                content: [{ type: 'text', text: `${tool.name} needs to ask the user a question, but this client did not declare the elicitation capability.` }],
                isError: true,
              };
            }
            return sdkInputRequired({
              inputRequests: rec.inputRequests as never,
              requestState: await codec.mint({ k: 'sync', tool: tool.name, args: digest(args), taskId }, ctx),
            });
          }
          default: {
            await pump();
            await relay.heartbeat();
            if (Date.now() >= deadline || handoffNow.signal.aborted) {
              const handed = await handOff(rec, tool, budgetMs, ctx, handoffNow.signal.aborted ? 'shutdown' : 'budget');
              if (handed) {
                relay.close();
                return handed;
              }
              continue; // it ended meanwhile: answer normally
            }
            await watch.wait(Math.min(1000, relay.heartbeatDueIn(), Math.max(0, deadline - Date.now())), wake);
          }
        }
      }
    } finally {
      relay.close();
      if (holding) await store.renewHolder(taskId, -1).catch(() => 0);
      await watch.close();
    }
  }

  /**
   * The budget ran out (D1), or this gateway is shutting down: the task continues in `task`
   * mode for the same owner and the call ends with a result that tells the model which tool to
   * call with which id.
   * @returns the result, or undefined when the task ended meanwhile (answer it normally).
   */
  async function handOff(rec: TaskRecord, tool: ToolDefinition, budgetMs: number, ctx: ServerContext, why: 'budget' | 'shutdown') {
    const d = await store.detachSync(rec.taskId).catch(() => {
      throw storeUnavailable();
    });
    if (d.code === 'terminal') return undefined;
    // `not_sync`: another request holding the same call (a retry sent twice) handed it off.
    if (d.code === 'gone') throw new ProtocolError(ErrorCode.InternalError, 'The task record expired before the tool finished');
    // D4: if this result never reaches the client, nobody knows the id: cancel then (not when
    // another request handed it off: that one carries the id).
    if (d.code === 'ok') exchangeOf(ctx).createdTaskId = rec.taskId;
    log.info({ taskId: rec.taskId, tool: tool.name, budgetMs, why, detached: d.code }, 'sync.handed_off');
    const secs = Math.round(budgetMs / 1000);
    return handedOffResult(rec, tool, why === 'budget' ? `is still running after ${secs} s` : 'is still running and the server holding this call is restarting');
  }

  /** The result that hands a running call over to `task_status` (D1): plain words + `structuredContent.next`. */
  function handedOffResult(rec: TaskRecord, tool: ToolDefinition, because: string) {
    const latest = rec.statusMessage ? ` Latest progress: ${rec.statusMessage}.` : '';
    return {
      content: [
        {
          type: 'text',
          text:
            `${tool.name} ${because}, so it continues in the background as task ${rec.taskId}.${latest} ` +
            `To check on it and get its result when it is done, call the tool ${TASK_STATUS_TOOL} with {"taskId":"${rec.taskId}"}. ` +
            `Its result is kept until ${new Date(rec.createdAt + rec.ttlMs).toISOString()}.`,
        },
      ],
      structuredContent: {
        taskId: rec.taskId,
        status: rec.status,
        ...(rec.statusMessage ? { statusMessage: rec.statusMessage } : {}),
        pollIntervalMs: rec.pollIntervalMs,
        next: { tool: TASK_STATUS_TOOL, arguments: { taskId: rec.taskId } },
      },
    };
  }

  /** `task_status` (task-status.ts): the state of a handed-off task, its result, or its question. */
  async function taskStatus(taskId: string, args: unknown, rs: RequestStatePayload | undefined, responses: Record<string, unknown>, ctx: ServerContext, caps: Record<string, unknown>, era: 'legacy' | 'modern') {
    const notFound = {
      content: [{ type: 'text', text: `There is no task ${taskId} for you: the id is wrong, or the task expired.` }],
      isError: true,
    };
    if (!isWellFormedTaskId(taskId)) return notFound;
    let rec = await store.get(taskId).catch(() => {
      throw storeUnavailable();
    });
    if (!rec || rec.mode !== 'task' || rec.owner !== exchangeOf(ctx).principal) return notFound;
    if (rs?.k === 'status' && rs.taskId === taskId && rec.status === 'input_required') {
      const r = await answerTask(rec, responses);
      log.info({ taskId, outcome: r.code }, 'task_status.answered');
      rec = (await store.get(taskId)) ?? rec;
    }
    const label = `Task ${taskId} (${rec.tool})`;
    const msg = rec.statusMessage ? `: ${rec.statusMessage}` : '';
    const structured = { taskId, status: rec.status, ...(rec.statusMessage ? { statusMessage: rec.statusMessage } : {}) };
    switch (rec.status) {
      case 'completed':
        return { ...(rec.result ?? { content: [] }) };
      case 'failed':
        return { content: [{ type: 'text', text: `${label} failed: ${rec.error?.message ?? 'unknown error'}` }], structuredContent: structured, isError: true };
      case 'cancelled':
        return { content: [{ type: 'text', text: `${label} was cancelled${msg}` }], structuredContent: structured, isError: true };
      case 'input_required': {
        const needsElicitation = Object.values(rec.inputRequests).some((q) => (q as { method?: string }).method === 'elicitation/create');
        if (era === 'modern' && (!needsElicitation || caps.elicitation !== undefined)) {
          return sdkInputRequired({
            inputRequests: rec.inputRequests as never,
            requestState: await codec.mint({ k: 'status', tool: TASK_STATUS_TOOL, args: digest(args), taskId }, ctx),
          });
        }
        return {
          content: [{ type: 'text', text: `${label} is waiting for an answer from the user${msg}, but this client cannot show the question (it needs MCP 2026-07-28 with elicitation).` }],
          structuredContent: structured,
        };
      }
      default:
        return {
          content: [{ type: 'text', text: `${label} is still working${msg}. Call ${TASK_STATUS_TOOL} again in a little while.` }],
          structuredContent: { ...structured, pollIntervalMs: rec.pollIntervalMs },
        };
    }
  }

  async function toolsCall(params: { name: string; arguments?: Record<string, unknown> }, ctx: ServerContext, era: 'legacy' | 'modern') {
    const tool = registry.get(params.name);
    if (!tool) throw invalidParams(`Unknown tool: ${params.name}`);
    const parsed = tool.inputSchema.safeParse(params.arguments ?? {});
    if (!parsed.success) {
      throw invalidParams(`Invalid arguments for tool ${tool.name}: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`);
    }
    let args: Record<string, unknown> = parsed.data;
    const caps = clientCapabilities(ctx) ?? {};
    const declares = era === 'modern' && declaresTasks(ctx);
    if (tool.taskSupport === 'required' && !declares) throw tasksExtensionRequired(`tool ${tool.name}`);
    const missing = missingCaps(tool.requiresCapabilities, caps);
    if (missing) {
      if (era === 'legacy') {
        return { content: [{ type: 'text', text: `${tool.name} needs to ask the user questions, which this server cannot do over a 2025 protocol connection. Use a client that speaks MCP 2026-07-28.` }], isError: true };
      }
      throw missingCapability(missing, `Missing required client capability: ${tool.name} needs ${Object.keys(missing).join(', ')}`);
    }
    const rs = ctx.mcpReq.requestState() as RequestStatePayload | undefined;
    if (rs && (rs.tool !== tool.name || rs.args !== digest(args))) {
      throw invalidParams('requestState does not belong to this tool call');
    }
    const responses = ctx.mcpReq.inputResponses ?? {};

    // MRTR retry of a synchronous call whose task is waiting for input.
    if (rs?.k === 'sync') return resumeSync(rs.taskId, tool, args, ctx, caps, responses);
    if (tool.name === TASK_STATUS_TOOL) return taskStatus(String(args.taskId), args, rs, responses, ctx, caps, era);

    if (tool.runsIn === 'gateway') {
      const round = await continueRound('inline', tool, args, rs, responses, ctx);
      if ('again' in round) return round.again;
      try {
        const out = await tool.run(args, inlineContext(ctx, round.step, round.state, responses, caps));
        if (isInputRequired(out)) return mrtr('inline', tool.name, args, round.step, out, ctx);
        return out;
      } catch (e) {
        if (e instanceof ToolCancelled) return { content: [{ type: 'text', text: e.message }], isError: true };
        throw toProtocolError(e, tool.name);
      }
    }

    if (tool.preTask) {
      const round = await continueRound('pre', tool, args, rs, responses, ctx);
      if ('again' in round) return round.again;
      const pre = await tool.preTask(args, inlineContext(ctx, round.step, round.state, responses, caps));
      if ('kind' in pre && pre.kind === 'input_required') return mrtr('pre', tool.name, args, round.step, pre, ctx);
      args = (pre as { args: Record<string, unknown> }).args;
    }

    if (declares && tool.taskSupport !== 'forbidden') {
      const rec = await startTask(tool, args, ctx, caps, 'task');
      exchangeOf(ctx).createdTaskId = rec.taskId;
      return toCreateTaskResult(rec);
    }
    const rec = await startTask(tool, args, ctx, caps, 'sync');
    return waitSync(rec.taskId, tool, args, ctx, caps);
  }

  async function resumeSync(taskId: string, tool: ToolDefinition, args: unknown, ctx: ServerContext, caps: Record<string, unknown>, responses: Record<string, unknown>) {
    const rec = await store.get(taskId);
    if (!rec || rec.owner !== exchangeOf(ctx).principal) throw invalidParams('requestState refers to a call that no longer exists');
    if (rec.mode !== 'sync') {
      // Handed off meanwhile (budget, or the gateway that held it shut down): it is a task
      // now. Answers still count; the caller follows it with task_status.
      if (rec.status === 'input_required') await answerTask(rec, responses);
      return handedOffResult((await store.get(taskId)) ?? rec, tool, 'was handed off to the background by an earlier request');
    }
    // Relay only what the next step reports.
    const fromId = await store.lastProgressId(taskId).catch(() => '0');
    if (rec.status === 'input_required') {
      // Renew the hold before the task turns `working` again, so the reconciler never sees a
      // working synchronous call with a stale holder.
      await store.renewHolder(taskId, 0);
      await answerTask(rec, responses, 'sync');
    }
    return waitSync(taskId, tool, args, ctx, caps, fromId);
  }

  /**
   * When the reconciler first looks at a task (ms from now): a synchronous call as soon as its
   * hold could have lapsed (a dead gateway's call is cancelled within SYNC_HOLDER_TIMEOUT_MS +
   * RECONCILE_INTERVAL_MS), any task after RECONCILE_AFTER_MS.
   */
  const firstCheckMs = (mode: 'task' | 'sync') =>
    mode === 'sync' ? Math.min(config.worker.reconcileAfterMs, config.worker.syncHolderTimeoutMs + 1) : config.worker.reconcileAfterMs;

  /**
   * Answers a task's open questions (tasks/update, an MRTR retry of a synchronous call,
   * task_status): validates them against the requests issued (E-05, `-32602`), applies them
   * atomically, and enqueues the next step once the last one is in (D2).
   */
  async function answerTask(rec: TaskRecord, responses: Record<string, unknown>, mode: 'task' | 'sync' = 'task'): Promise<ApplyOutcome> {
    validateInputResponses(rec.inputRequests, responses);
    const r = await store.applyInputResponses(rec.taskId, responses);
    if (r.code === 'resumed') await resumeStep(rec.taskId, r.step, mode);
    return r;
  }

  /** Enqueues the next step after the last answer (D2); the reconciler covers a lost enqueue. */
  async function resumeStep(taskId: string, step: number, mode: 'task' | 'sync' = 'task') {
    try {
      await queues.enqueueStep(taskId, step);
    } catch (e) {
      log.error({ err: (e as Error).message, taskId, step }, 'task.resume_enqueue_failed');
    }
    queues.cancelInputTimeout(taskId, step - 1).catch(() => undefined);
    store.scheduleReconcile(taskId, firstCheckMs(mode), config.task.ttlMs).catch(() => undefined);
  }

  /** Reads a task the caller may see; -32602 for unknown, expired, malformed or foreign ids (T-44). */
  async function ownTask(taskId: string, ctx: ServerContext): Promise<TaskRecord> {
    if (!isWellFormedTaskId(taskId)) throw taskNotFound();
    const rec = await store.get(taskId);
    if (!rec || rec.mode !== 'task' || rec.owner !== exchangeOf(ctx).principal) throw taskNotFound();
    return rec;
  }

  const factory: McpServerFactory = ({ era }) => {
    const server = new Server(SERVER_INFO, {
      // The extension exists only on the 2026-07-28 wire (T-07); 2025 clients never get tasks.
      capabilities: era === 'modern' ? { tools: {}, extensions: { [TASKS_EXTENSION]: {} } } : { tools: {} },
      requestState: { verify: codec.verify },
    });

    server.setRequestHandler('tools/list', async () => ({ tools: registry.list() as never }));

    server.setRequestHandler('tools/call', async (request, ctx) => {
      return (await toolsCall(request.params as { name: string; arguments?: Record<string, unknown> }, ctx, era)) as never;
    });

    // tasks/get (T-21, T-22): pure read.
    server.setRequestHandler('tasks/get', { params: TaskIdParams }, async (params, ctx) => {
      gateTasks(era, ctx, 'tasks/get');
      return toDetailedTask(await ownTask(params.taskId, ctx)) as never;
    });

    // tasks/update (T-27..T-32): answers applied atomically before the ack.
    server.setRequestHandler('tasks/update', { params: TaskIdParams }, async (params, ctx) => {
      gateTasks(era, ctx, 'tasks/update');
      const rec = await ownTask(params.taskId, ctx);
      const responses = exchangeOf(ctx).rawInputResponses;
      const dropped = (ctx.mcpReq.droppedInputResponseKeys ?? []).filter((k) => k in rec.inputRequests);
      if (dropped.length) throw invalidParams(`inputResponses["${dropped[0]}"] is not a valid response`);
      if (rec.status !== 'input_required') {
        validateInputResponses({}, responses); // still -32602 when it is not an object (T-27)
        return {};
      }
      const r = await answerTask(rec, responses as Record<string, unknown>);
      const unknown = Object.keys(responses as Record<string, unknown>).filter((k) => !(k in rec.inputRequests));
      if (unknown.length) log.warn({ taskId: rec.taskId, keys: unknown.slice(0, 10) }, 'task.update_unknown_keys');
      log.info({ taskId: rec.taskId, outcome: r.code }, 'task.updated');
      return {};
    });

    // tasks/cancel (T-35..T-38): ack at once; terminal tasks ack unchanged.
    server.setRequestHandler('tasks/cancel', { params: TaskIdParams }, async (params, ctx) => {
      gateTasks(era, ctx, 'tasks/cancel');
      const rec = await ownTask(params.taskId, ctx);
      const r = await store.requestCancel(rec.taskId);
      if (r.code === 'gone') throw taskNotFound();
      log.info({ taskId: rec.taskId, outcome: r.code }, 'task.cancel');
      return {};
    });

    return server;
  };
  return Object.assign(factory, {
    handOffAll: () => {
      if (!handoffNow.signal.aborted) log.info('sync.hand_off_all');
      handoffNow.abort();
    },
  });
}
