/**
 * The `conformance` tool set: every fixture the official suite (`@modelcontextprotocol/
 * conformance@0.2.0-alpha.12`) calls by name, so that its 2026-07-28 requirement set, the
 * pending SEP-2243 / JSON Schema scenarios and the `tasks-*` scenarios can all run against this
 * service (see docs/conformance-fixtures.md). Enabled by `MCP_TOOLSETS=...,conformance`; never
 * in production.
 *  - this file: the Tasks extension fixtures (`tasks-*`) and `test_tool_with_progress`, run by
 *    workers like any tool;
 *  - conformance-core.ts: content, errors, `x-mcp-header`, JSON Schema 2020-12, diagnostics;
 *  - conformance-mrtr.ts: `input_required` fixtures;
 *  - conformance-prompts.ts, conformance-resources.ts: prompts, resources, a template.
 */
import { ErrorCode } from '@mcp-tasks/errors';
import { z } from 'zod';
import { accepted, defineTool, elicitForm, inputRequired, textResult, ToolProtocolError } from '../kit.js';
import type { ToolsetModule } from '../index.js';
import { conformanceCoreTools } from './conformance-core.js';
import { conformanceMrtrTools } from './conformance-mrtr.js';
import { conformancePrompts } from './conformance-prompts.js';
import { conformanceResources, conformanceResourceTemplates } from './conformance-resources.js';

export const greet = defineTool({
  name: 'greet',
  description: 'Returns "Hello, <name>!" synchronously (never a task).',
  inputSchema: z.object({ name: z.string() }),
  taskSupport: 'forbidden',
  runsIn: 'gateway',
  async run({ name }) {
    return textResult(`Hello, ${name}!`);
  },
});

export const slowCompute = defineTool({
  name: 'slow_compute',
  description: 'Sleeps `seconds`, then returns. Settles to cancelled when tasks/cancel arrives while it runs.',
  inputSchema: z.object({
    seconds: z.number().min(0).max(3600),
    label: z.string().optional(),
    needConfirm: z.boolean().optional(),
  }),
  taskSupport: 'optional',
  async run({ seconds, label }, ctx) {
    const total = seconds * 1000;
    let slept = 0;
    while (slept < total) {
      const slice = Math.min(500, total - slept);
      await ctx.sleep(slice);
      slept += slice;
      await ctx.progress(
        slept / 1000,
        seconds,
        `computing${label ? ` ${label}` : ''}: ${slept / 1000} of ${seconds} s`,
      );
    }
    return textResult(`done after ${seconds}s${label ? `: ${label}` : ''}`);
  },
});

export const failingJob = defineTool({
  name: 'failing_job',
  description:
    'Task-only tool that ends with a tool error (isError: true) after about 1 s; the task is completed, not failed.',
  inputSchema: z.object({}),
  taskSupport: 'required',
  async run(_args, ctx) {
    await ctx.sleep(1000);
    return textResult('failing_job: simulated tool failure', { isError: true });
  },
});

export const protocolErrorJob = defineTool({
  name: 'protocol_error_job',
  description: 'Fails with a JSON-RPC error after about 300 ms; as a task it ends failed.',
  inputSchema: z.object({}),
  taskSupport: 'optional',
  async run(_args, ctx) {
    await ctx.sleep(300);
    throw new ToolProtocolError(ErrorCode.InternalError, 'protocol_error_job: simulated internal failure');
  },
});

export const confirmDelete = defineTool({
  name: 'confirm_delete',
  description: 'Asks for confirmation (one elicitation), then "deletes" the file.',
  inputSchema: z.object({ filename: z.string() }),
  taskSupport: 'optional',
  requiresCapabilities: { elicitation: {} },
  async run({ filename }, ctx) {
    if (ctx.step === 1) {
      return inputRequired({
        inputRequests: {
          confirm: elicitForm(`Delete ${filename}?`, {
            type: 'object',
            properties: { confirm: { type: 'boolean', title: 'Delete the file' } },
            required: ['confirm'],
          }),
        },
        statusMessage: `Waiting for confirmation to delete ${filename}`,
      });
    }
    const answer = accepted(ctx.inputResponses, 'confirm');
    return textResult(answer && answer.confirm !== false ? `Deleted ${filename}` : `Kept ${filename}`);
  },
});

export const multiInput = defineTool({
  name: 'multi_input',
  description: 'Asks two questions at once; stays input_required until both are answered.',
  inputSchema: z.object({}),
  taskSupport: 'optional',
  requiresCapabilities: { elicitation: {} },
  async run(_args, ctx) {
    if (ctx.step === 1) {
      return inputRequired({
        inputRequests: {
          name: elicitForm('What is your name?', {
            type: 'object',
            properties: { name: { type: 'string', title: 'Name' } },
            required: ['name'],
          }),
          confirm: elicitForm('Proceed?', {
            type: 'object',
            properties: { confirm: { type: 'boolean', title: 'Proceed' } },
            required: ['confirm'],
          }),
        },
        statusMessage: 'Waiting for two answers',
      });
    }
    const name = accepted(ctx.inputResponses, 'name')?.name;
    const confirm = accepted(ctx.inputResponses, 'confirm')?.confirm;
    return textResult(`name=${String(name)}, confirm=${String(confirm)}`);
  },
});

export const testToolWithTask = defineTool({
  name: 'test_tool_with_task',
  description: 'MRTR then task: asks for a name (input_required, no task yet), then runs a task that greets it.',
  inputSchema: z.object({ name: z.string().optional() }),
  taskSupport: 'required',
  requiresCapabilities: { elicitation: {} },
  async preTask(args, ctx) {
    const name = accepted(ctx.inputResponses, 'user_name')?.name;
    if (typeof name !== 'string' || name === '') {
      return inputRequired({
        inputRequests: {
          user_name: elicitForm('What is your name?', {
            type: 'object',
            properties: { name: { type: 'string', title: 'Name' } },
            required: ['name'],
          }),
        },
      });
    }
    return { args: { ...args, name } };
  },
  async run({ name }, ctx) {
    await ctx.sleep(200);
    return textResult(`Hello, ${name ?? 'stranger'}! Your task is complete.`);
  },
});

/**
 * `test_tool_with_progress`: scenario `tools-call-with-progress` (docs/conformance-fixtures.md):
 * progress 0, 50, 100 of 100, then a text result. The steps are 250 ms apart so the worker's
 * 200 ms coalescing (P-04) keeps all three. The messages count steps, not percent (clients show
 * the percentage from `total`, D11).
 */
export const testToolWithProgress = defineTool({
  name: 'test_tool_with_progress',
  description: 'Reports progress 0, 50 and 100 of 100 (250 ms apart), then returns a text result.',
  inputSchema: z.object({}),
  taskSupport: 'optional',
  async run(_args, ctx) {
    for (const [i, p] of [0, 50, 100].entries()) {
      if (p > 0) await ctx.sleep(250);
      await ctx.progress(p, 100, `step ${i + 1} of 3`);
    }
    return textResult('Progress test complete');
  },
});

export const conformanceTools = [
  greet,
  slowCompute,
  failingJob,
  protocolErrorJob,
  confirmDelete,
  multiInput,
  testToolWithTask,
  testToolWithProgress,
];

/** The whole set: tools (tasks fixtures first), prompts, resources. */
export const conformanceToolset: ToolsetModule = {
  tools: [...conformanceTools, ...conformanceCoreTools, ...conformanceMrtrTools],
  prompts: conformancePrompts,
  resources: conformanceResources,
  resourceTemplates: conformanceResourceTemplates,
};
