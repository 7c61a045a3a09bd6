/**
 * The `testing` tool set: fixtures the handed cases (`shared/cases/cases.md`) call. Enabled
 * only by `MCP_TOOLSETS=...,testing`; never in production.
 */
import { z } from 'zod';
import { accepted, defineTool, elicitForm, inputRequired, textResult } from '../kit.js';

/** `slow_echo(seconds, text?)`: sleeps, then echoes. B-02, B-07, B-16. */
export const slowEcho = defineTool({
  name: 'slow_echo',
  description: 'Sleeps `seconds` (0-3600, fractions allowed), reporting progress each second, then echoes `text`.',
  inputSchema: z.object({ seconds: z.number().min(0).max(3600), text: z.string().max(100_000).optional() }),
  taskSupport: 'optional',
  async run({ seconds, text }, ctx) {
    const total = seconds * 1000;
    let slept = 0;
    while (slept < total) {
      const slice = Math.min(1000, total - slept);
      await ctx.sleep(slice);
      slept += slice;
      await ctx.progress(Math.round(slept / 100) / 10, seconds, `slept ${Math.round(slept / 1000)} of ${seconds} s`);
    }
    return textResult(`echo: ${text ?? ''}`, { structuredContent: { seconds, text: text ?? '', reruns: 0 } });
  },
});

/** `ask_confirm(question?)`: one elicitation (key `confirm`), then answers. B-05, B-14. */
export const askConfirm = defineTool({
  name: 'ask_confirm',
  description: 'Asks the user to confirm (one form elicitation with a boolean, `rounds` times, default 1), then reports the last answer.',
  inputSchema: z.object({ question: z.string().max(500).optional(), rounds: z.number().int().min(1).max(10).optional() }),
  taskSupport: 'optional',
  requiresCapabilities: { elicitation: { form: {} } },
  async run({ question, rounds = 1 }, ctx) {
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
    const r = ctx.inputResponses.confirm;
    const answer = accepted(ctx.inputResponses, 'confirm');
    const text = answer ? `confirmed: ${answer.confirm === true}` : `not confirmed (${r?.action ?? 'no answer'})`;
    return textResult(text, { structuredContent: { action: r?.action ?? null, content: answer ?? null, step: ctx.step } });
  },
});

export const testingTools = [slowEcho, askConfirm];
