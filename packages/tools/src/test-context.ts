/**
 * A `ToolContext` for unit tests of a tool (docs/writing-tools.md, "Test it"): call
 * `tool.run(args, t.ctx)` directly, without Redis, a gateway or a worker, and look at what the
 * tool reported. Defaults: step 1 of a task (`mode: 'task'`), no answers, no state, the client
 * declares form elicitation, first run of the step (`attempt: 1`), `sleep` returns at once (still rejecting once cancelled).
 * Checkpoints: every `ctx.checkpoint(value)` is recorded (`checkpoints`, a JSON copy, refused
 * over `maxCheckpointBytes` like a worker does); pass `lastCheckpoint` to test a resumed run and
 * call `drain()` to test a hand-over (`ctx.drainSignal` aborts with a `ToolHandOver`).
 *
 *     const t = testContext();
 *     const out = await myTool.run(myTool.inputSchema.parse({ version: '1.0.0' }), t.ctx);
 *     assert.ok(isInputRequired(out));
 *     const next = testContext({ step: 2, state: out.state, inputResponses: { audience: { action: 'accept', content: { audience: 'users' } } } });
 */
import { abortableSleep, type LogLevel, type ToolContext } from './kit.js';
import { ToolHandOver } from './durable.js';
import { checkpointJson } from './checkpoint-json.js';

/** One `ctx.progress` call. */
export interface RecordedProgress {
  done: number;
  total?: number;
  message?: string;
}

/** What `testContext` returns. */
export interface TestContext {
  ctx: ToolContext;
  /** Every `ctx.progress` call, in order. */
  progress: RecordedProgress[];
  /** Every `ctx.log` call, in order. */
  logs: { level: LogLevel; data: unknown }[];
  /** Aborts `ctx.signal`, as `tasks/cancel` or a closed synchronous request does. */
  cancel(reason?: string): void;
  /** Every `ctx.checkpoint` value, in order (parsed back from its JSON, as the next run gets it). */
  checkpoints: unknown[];
  /** Aborts `ctx.drainSignal` with a `ToolHandOver`, as a worker's SIGTERM does. */
  drain(): void;
}

/**
 * Builds a context; `over` replaces any field (e.g. `step`, `state`, `inputResponses`, `mode`).
 * @param o.realSleep make `ctx.sleep(ms)` really wait (default: it returns at once)
 * @param o.maxCheckpointBytes largest checkpoint (bytes of JSON; default 65,536 as CHECKPOINT_MAX_BYTES)
 */
export function testContext(
  over: Partial<ToolContext> = {},
  o: { realSleep?: boolean; maxCheckpointBytes?: number } = {},
): TestContext {
  const ac = new AbortController();
  const drainAc = new AbortController();
  const checkpoints: unknown[] = [];
  const progress: RecordedProgress[] = [];
  const logs: { level: LogLevel; data: unknown }[] = [];
  const signal = over.signal ?? ac.signal;
  const ctx: ToolContext = {
    signal,
    mode: 'task',
    step: 1,
    attempt: 1,
    taskId: 'test-task-0000',
    inputResponses: {},
    state: undefined,
    clientCapabilities: { elicitation: { form: {} } },
    principal: 'test',
    sleep: (ms) => abortableSleep(o.realSleep ? ms : 0, signal),
    async progress(done, total, message) {
      progress.push({ done, ...(total === undefined ? {} : { total }), ...(message === undefined ? {} : { message }) });
    },
    async log(level, data) {
      logs.push({ level, data });
    },
    async checkpoint(value) {
      checkpoints.push(JSON.parse(checkpointJson(value, o.maxCheckpointBytes ?? 65_536)));
    },
    lastCheckpoint: undefined,
    drainSignal: drainAc.signal,
    get draining() {
      return drainAc.signal.aborted;
    },
    ...over,
  };
  return {
    ctx,
    progress,
    logs,
    checkpoints,
    cancel: (reason = 'cancelled') => ac.abort(reason),
    drain: () => drainAc.abort(new ToolHandOver()),
  };
}
