/**
 * The `testing` tool set: fixtures the handed cases (`shared/cases/cases.md`) call. Enabled
 * only by `MCP_TOOLSETS=...,testing`; never in production.
 */
import { appendFileSync, renameSync, writeFileSync } from 'node:fs';
import { rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ErrorCode } from '@mcp-tasks/errors';
import { z } from 'zod';
import {
  accepted,
  defineTool,
  elicitForm,
  inputRequired,
  mcpHeader,
  structuredResult,
  textResult,
  ToolProtocolError,
} from '../kit.js';
import type { ToolsetModule } from '../modules.js';
import { durableTestingTools } from './testing-durable.js';

/** What the testing tool set takes from configuration. */
export interface TestingSettings {
  /** Where `side_effect` and `confirm_once` write their marker files (TESTING_SIDE_EFFECT_DIR; unset = they refuse). */
  sideEffectDir?: string;
}

/** `slow_echo(seconds, text?)`: sleeps, then echoes. Cases B-02, B-07, B-16. */
export const slowEcho = defineTool({
  name: 'slow_echo',
  description:
    'Sleeps `seconds` (0-3600, fractions allowed), reporting progress each second (none with `quiet`), then echoes `text`.',
  inputSchema: z.object({
    seconds: z.number().min(0).max(3600),
    text: z.string().max(100_000).optional(),
    quiet: z.boolean().optional(),
  }),
  taskSupport: 'optional',
  async run({ seconds, text, quiet }, ctx) {
    if (quiet) {
      await ctx.sleep(seconds * 1000);
      return structuredResult({ summary: `echo: ${text ?? ''}`, seconds, text: text ?? '', attempt: ctx.attempt });
    }
    const total = seconds * 1000;
    let slept = 0;
    while (slept < total) {
      const slice = Math.min(1000, total - slept);
      await ctx.sleep(slice);
      slept += slice;
      await ctx.progress(Math.round(slept / 100) / 10, seconds, `slept ${Math.round(slept / 1000)} of ${seconds} s`);
    }
    return structuredResult({ summary: `echo: ${text ?? ''}`, seconds, text: text ?? '', attempt: ctx.attempt });
  },
});

/** `ask_confirm(question?)`: one elicitation (key `confirm`), then answers. Cases B-05, B-14. */
export const askConfirm = defineTool({
  name: 'ask_confirm',
  description:
    'Asks the user to confirm (one form elicitation with a boolean, `rounds` times, default 1), then reports the last answer.',
  inputSchema: z.object({
    question: z.string().max(500).optional(),
    rounds: z.number().int().min(1).max(10).optional(),
    /** Seconds to work (with progress each second) before the first question. */
    delaySeconds: z.number().min(0).max(3600).optional(),
    /** Seconds to work (with progress each second) after the last answer, before the result. */
    afterSeconds: z.number().min(0).max(3600).optional(),
  }),
  taskSupport: 'optional',
  requiresCapabilities: { elicitation: { form: {} } },
  async run({ question, rounds = 1, delaySeconds = 0, afterSeconds = 0 }, ctx) {
    if (ctx.step === 1) {
      for (let i = 1; i <= Math.ceil(delaySeconds); i++) {
        await ctx.sleep(Math.min(1, delaySeconds - (i - 1)) * 1000);
        await ctx.progress(i, Math.ceil(delaySeconds), `preparing the question (${i} s)`);
      }
    }
    // Asks `confirm` once per round (wire keys confirm.1, confirm.2, …: never reused, T-29).
    if (ctx.step <= rounds) {
      return inputRequired({
        inputRequests: {
          confirm: elicitForm(question ?? 'Confirm?', {
            type: 'object',
            properties: { confirm: { type: 'boolean', title: 'Confirm' } },
            required: ['confirm'],
          }),
        },
        statusMessage: 'Waiting for confirmation',
      });
    }
    for (let i = 1; i <= Math.ceil(afterSeconds); i++) {
      await ctx.sleep(Math.min(1, afterSeconds - (i - 1)) * 1000);
      await ctx.progress(i, Math.ceil(afterSeconds), `finishing (${i} s)`);
    }
    const r = ctx.inputResponses.confirm;
    const answer = accepted(ctx.inputResponses, 'confirm');
    const text = answer ? `confirmed: ${answer.confirm === true}` : `not confirmed (${r?.action ?? 'no answer'})`;
    return structuredResult({ summary: text, action: r?.action ?? null, content: answer ?? null, step: ctx.step });
  },
});

/**
 * `progress_sync(steps, intervalSeconds)`: `steps` progress reports `intervalSeconds` apart
 * (`progress` = step number, `total` = steps), then a result. Cases B-09, B-10, B-12. With
 * `stamp`, each message carries the emission time (`@<unix ms>`) for latency measurements.
 */
export const progressSync = defineTool({
  name: 'progress_sync',
  description: 'Reports progress `steps` times, `intervalSeconds` apart (total = steps), then returns.',
  inputSchema: z.object({
    steps: z.number().int().min(1).max(100_000),
    intervalSeconds: z.number().min(0).max(3600),
    stamp: z.boolean().optional(),
  }),
  taskSupport: 'optional',
  async run({ steps, intervalSeconds, stamp }, ctx) {
    for (let i = 1; i <= steps; i++) {
      await ctx.sleep(intervalSeconds * 1000);
      await ctx.progress(i, steps, stamp ? `step ${i} of ${steps} @${Date.now()}` : `step ${i} of ${steps}`);
    }
    return structuredResult({ summary: `progress_sync: ${steps} steps done`, steps });
  },
});

/**
 * `side_effect(marker, delaySeconds)`: works `delaySeconds` (abortable), then writes the file
 * `<TESTING_SIDE_EFFECT_DIR>/<marker>`: the effect a cancelled call must never have (C-01).
 * Writes when it started to `<marker>.started` and when its AbortSignal fired to
 * `<marker>.aborted` (and the signal's reason to `<marker>.abort-reason`: `cancelled`, `timeout`, …) (unix ms with sub-ms decimals: `performance.timeOrigin + performance.now()`,
 * comparable across the processes of one machine), so tests can measure disconnect → abort and
 * the benchmark handle → tool running. Every file is written whole before it appears (temp file
 * + rename): a test that sees it can read it.
 */
export const sideEffectTool = ({ sideEffectDir }: TestingSettings) =>
  defineTool({
    name: 'side_effect',
    description:
      'Waits `delaySeconds`, then writes a marker file (testing only): shows whether a cancelled call stopped in time.',
    inputSchema: z.object({
      marker: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/),
      delaySeconds: z.number().min(0).max(3600),
    }),
    taskSupport: 'optional',
    async run({ marker, delaySeconds }, ctx) {
      const dir = sideEffectDir;
      if (!dir) return textResult('side_effect is not configured (TESTING_SIDE_EFFECT_DIR)', { isError: true });
      const stamp = () => String(performance.timeOrigin + performance.now());
      const write = async (name: string) => {
        await writeFile(join(dir, `${name}.tmp`), stamp());
        await rename(join(dir, `${name}.tmp`), join(dir, name));
      };
      await write(`${marker}.started`);
      ctx.signal.addEventListener(
        'abort',
        () => {
          writeFileSync(join(dir, `${marker}.abort-reason.tmp`), String(ctx.signal.reason));
          renameSync(join(dir, `${marker}.abort-reason.tmp`), join(dir, `${marker}.abort-reason`));
          writeFileSync(join(dir, `${marker}.aborted.tmp`), stamp());
          renameSync(join(dir, `${marker}.aborted.tmp`), join(dir, `${marker}.aborted`));
        },
        { once: true },
      );
      await ctx.sleep(delaySeconds * 1000);
      await write(marker);
      return textResult(`side effect ${marker} written`);
    },
  });

/**
 * `big_result(bytes, kind)`: returns a result whose text is `bytes` long (N-09, MAX_RESULT_BYTES).
 * `kind: 'buffer'` puts a Node `Buffer` of that size where the text belongs, the bug of a tool
 * that returns `fs.readFile()` output without an encoding (bullmq #2397).
 */
export const bigResult = defineTool({
  name: 'big_result',
  description:
    'Returns a text result of `bytes` characters (testing only); with kind "buffer", a Node Buffer of that size instead of the text.',
  inputSchema: z.object({
    bytes: z
      .number()
      .int()
      .min(0)
      .max(64 * 1024 * 1024),
    kind: z.enum(['string', 'buffer']).optional(),
  }),
  taskSupport: 'optional',
  async run({ bytes, kind = 'string' }) {
    if (kind === 'buffer') return { content: [{ type: 'text', text: Buffer.alloc(bytes, 120) }] };
    // No structuredContent: the text is the result (D11), and is not stored twice.
    return textResult('x'.repeat(bytes));
  },
});

/**
 * `time_limited(seconds, ignoreSignal?)`: sleeps `seconds` under its own time limit of 2 s
 * (`defineTool({ timeoutMs: 2000 })`, overriding TOOL_TIMEOUT_MS). With `ignoreSignal` it sleeps
 * on a plain timer that its AbortSignal does not stop: the task must end at the limit anyway.
 */
export const TIME_LIMITED_TIMEOUT_MS = 2000;
export const timeLimited = defineTool({
  name: 'time_limited',
  description: 'Sleeps `seconds` under its own time limit of 2 s (testing only); `ignoreSignal` ignores the abort.',
  inputSchema: z.object({ seconds: z.number().min(0).max(60), ignoreSignal: z.boolean().optional() }),
  taskSupport: 'optional',
  timeoutMs: TIME_LIMITED_TIMEOUT_MS,
  async run({ seconds, ignoreSignal }, ctx) {
    if (ignoreSignal) await new Promise((r) => setTimeout(r, seconds * 1000));
    else await ctx.sleep(seconds * 1000);
    return structuredResult({ summary: `slept ${seconds} s`, seconds });
  },
});

/**
 * `throw_error(kind, message)`: fails on purpose. `unexpected` throws a plain
 * `Error` whose message (and stack) must reach only the log; `protocol` throws a
 * `ToolProtocolError` (-32602), whose message is for the client.
 */
export const throwError = defineTool({
  name: 'throw_error',
  description: 'Fails on purpose (testing only): an unexpected exception, or a deliberate JSON-RPC error.',
  inputSchema: z.object({ kind: z.enum(['unexpected', 'protocol']), message: z.string().max(10_000) }),
  taskSupport: 'optional',
  async run({ kind, message }) {
    if (kind === 'protocol') throw new ToolProtocolError(ErrorCode.InvalidParams, message);
    throw new Error(message);
  },
});

/**
 * `crash_inline(detail)`: a gateway tool that throws an unexpected error whose message names a
 * file path: the client must get a generic message with an error id, never the text (issue
 * "Safe to expose" §5).
 */
export const crashInline = defineTool({
  name: 'crash_inline',
  description: 'Throws an unexpected error (with a file path in its message) inside the gateway.',
  inputSchema: z.object({ detail: z.string().max(200).optional() }),
  taskSupport: 'forbidden',
  runsIn: 'gateway',
  async run({ detail }) {
    throw new Error(`ENOENT: no such file or directory, open '/srv/secret/${detail ?? 'config'}.json'`);
  },
});

/**
 * `confirm_once(marker)`: a gateway tool (MRTR) that asks for confirmation, then appends one
 * line to `<TESTING_SIDE_EFFECT_DIR>/<marker>.runs`: the guarded step of cases B-17 and N-02,
 * whose replays must never run it twice.
 */
export const confirmOnceTool = ({ sideEffectDir }: TestingSettings) =>
  defineTool({
    name: 'confirm_once',
    description: 'Asks for confirmation, then records one run of its guarded step (testing only).',
    inputSchema: z.object({ marker: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/) }),
    taskSupport: 'forbidden',
    runsIn: 'gateway',
    requiresCapabilities: { elicitation: {} },
    async run({ marker }, ctx) {
      if (ctx.step === 1) {
        return inputRequired({
          inputRequests: {
            confirm: elicitForm(`Run the guarded step for ${marker}?`, {
              type: 'object',
              properties: { ok: { type: 'boolean' } },
              required: ['ok'],
            }),
          },
        });
      }
      const dir = sideEffectDir;
      if (!dir) return textResult('confirm_once is not configured (TESTING_SIDE_EFFECT_DIR)', { isError: true });
      if (accepted(ctx.inputResponses, 'confirm')?.ok !== true)
        return structuredResult({ summary: `not run: ${marker}`, marker, ran: false });
      appendFileSync(join(dir, `${marker}.runs`), `${Date.now()}\n`);
      return structuredResult({ summary: `ran: ${marker}`, marker, ran: true });
    },
  });

/**
 * `header_echo(region, count?, dry?, seconds?)`: a worker tool whose `region`, `count` and `dry`
 * are mirrored into `Mcp-Param-Region`, `Mcp-Param-Count` and `Mcp-Param-Dry-Run` (SEP-2243),
 * so the header checks can be tried on the synchronous and task lanes.
 */
export const headerEcho = defineTool({
  name: 'header_echo',
  description:
    'Waits `seconds` (default 0), then echoes region, count and dry; they travel in Mcp-Param-* headers too (testing only).',
  inputSchema: z.object({
    region: mcpHeader('Region', z.string().max(200)),
    count: mcpHeader('Count', z.number().int().min(-1_000_000).max(1_000_000)).optional(),
    dry: mcpHeader('Dry-Run', z.boolean()).optional(),
    seconds: z.number().min(0).max(60).optional(),
  }),
  taskSupport: 'optional',
  async run({ region, count, dry, seconds }, ctx) {
    if (seconds) await ctx.sleep(seconds * 1000);
    return structuredResult({
      summary: `region=${region} count=${count ?? '-'} dry=${dry ?? '-'}`,
      region,
      count: count ?? null,
      dry: dry ?? null,
    });
  },
});

/** The testing tool set, in its listing order. */
export const testingToolset = (settings: TestingSettings): ToolsetModule => ({
  tools: [
    slowEcho,
    askConfirm,
    progressSync,
    sideEffectTool(settings),
    bigResult,
    throwError,
    crashInline,
    confirmOnceTool(settings),
    headerEcho,
    timeLimited,
    ...durableTestingTools,
  ],
});
