/**
 * The `demo` tool set (the seed tools): `countdown`, `deep_research`, `share_report`, `add`.
 * Its one setting, the length of deep_research's phases, is given when the set is built
 * (`demoToolset`, from DEMO_RESEARCH_PHASE_MS), not through the tools' context.
 */
import { z } from 'zod';
import {
  accepted,
  defineTool,
  elicitForm,
  inputRequired,
  structuredResult,
  textResult,
  ToolCancelled,
  type ToolContext,
} from '../kit.js';
import type { ToolsetModule } from '../modules.js';

/**
 * Sleeps `ms` in slices, reporting progress from `from` to `to` (of 100) along the way. The
 * message names the phase only: clients show the percentage from `total` (D11). Each slice is
 * checkpointed, so a run of the step moved to another worker goes on with the phase where it
 * stopped (D14).
 */
async function phase(ctx: ToolContext, ms: number, from: number, to: number, label: string): Promise<void> {
  const slices = Math.max(1, Math.min(20, Math.ceil(ms / 1000)));
  const doneSlices = (ctx.lastCheckpoint as { slices?: number } | undefined)?.slices ?? 0;
  for (let i = doneSlices + 1; i <= slices; i++) {
    await ctx.sleep(ms / slices);
    await ctx.checkpoint({ slices: i });
    await ctx.progress(Math.round(from + ((to - from) * i) / slices), 100, label);
  }
}

export const countdown = defineTool({
  name: 'countdown',
  title: 'Countdown',
  description:
    'Counts down from `seconds` (1-10), one step per second, reporting progress. Runs as a task for clients that support tasks.',
  inputSchema: z.object({ seconds: z.number().int().min(1).max(10).describe('Seconds to count down from (1-10)') }),
  taskSupport: 'optional',
  async run({ seconds }, ctx) {
    // A checkpoint per second: a run moved to another worker goes on from there (D14).
    const from = (ctx.lastCheckpoint as { done?: number } | undefined)?.done ?? 0;
    for (let i = from + 1; i <= seconds; i++) {
      await ctx.sleep(1000);
      await ctx.checkpoint({ done: i });
      await ctx.progress(i, seconds, `${i}/${seconds} s (${seconds - i} left)`);
    }
    return textResult(`Countdown from ${seconds} finished.`);
  },
});

const AUDIENCE_SCHEMA = {
  type: 'object',
  properties: {
    audience: {
      type: 'string',
      title: 'Audience',
      description: 'Who will read the report?',
      oneOf: [
        { const: 'team', title: 'My team' },
        { const: 'company', title: 'The whole company' },
      ],
    },
  },
  required: ['audience'],
} as const;

/** What the demo tool set takes from configuration. */
export interface DemoSettings {
  /** Length of each of deep_research's two phases (ms; DEMO_RESEARCH_PHASE_MS, default 20,000). */
  researchPhaseMs: number;
}

/** `deep_research`, its phases `researchPhaseMs` long each. */
export const deepResearchTool = ({ researchPhaseMs }: DemoSettings) =>
  defineTool({
    name: 'deep_research',
    title: 'Deep research',
    description:
      'Researches a topic in two phases (about 20 s each by default). Between them it asks who the report is for (team or company). Declining ends it cancelled. Returns a short report.',
    inputSchema: z.object({ topic: z.string().min(1).max(500).describe('What to research') }),
    taskSupport: 'optional',
    requiresCapabilities: { elicitation: { form: {} } },
    async run({ topic }, ctx) {
      if (ctx.step === 1) {
        await phase(ctx, researchPhaseMs, 0, 50, `Collecting sources on ${topic.slice(0, 80)} (phase 1 of 2)`);
        return inputRequired({
          inputRequests: {
            audience: elicitForm(`Who is the report on "${topic.slice(0, 120)}" for?`, AUDIENCE_SCHEMA),
          },
          state: { topic },
          statusMessage: 'Waiting for you to choose the audience',
        });
      }
      const answer = accepted(ctx.inputResponses, 'audience');
      const audience = answer?.audience;
      if (audience !== 'team' && audience !== 'company') {
        throw new ToolCancelled('Research cancelled: no audience was chosen');
      }
      await phase(ctx, researchPhaseMs, 50, 100, `Writing the report for the ${audience} (phase 2 of 2)`);
      const text =
        `Research report: "${topic}"\n` +
        `Audience: ${audience === 'team' ? 'your team' : 'the whole company'}\n` +
        `Summary: three sources agree on the main points of ${topic}; details are tailored for the ${audience}.`;
      // The report itself is in structuredContent: a model shown only that must read it (D11).
      return structuredResult({ summary: text, topic, audience });
    },
  });

export const shareReport = defineTool({
  name: 'share_report',
  title: 'Share report',
  description:
    'Shares the latest report to a channel after asking for confirmation (and whether to notify). No task; answers at once.',
  inputSchema: z.object({ channel: z.string().min(1).max(200).describe('Channel to share to, e.g. #research') }),
  taskSupport: 'forbidden',
  runsIn: 'gateway',
  requiresCapabilities: { elicitation: { form: {} } },
  async run({ channel }, ctx) {
    if (ctx.step === 1) {
      return inputRequired({
        inputRequests: {
          confirm: elicitForm(`Share to ${channel}?`, {
            type: 'object',
            properties: { notify: { type: 'boolean', title: 'Notify the channel', default: false } },
          }),
        },
        state: { channel },
      });
    }
    const answer = accepted(ctx.inputResponses, 'confirm');
    if (!answer) return textResult(`Not shared to ${channel}.`);
    const notify = answer.notify === true;
    return structuredResult({
      summary: `Shared the report to ${channel}${notify ? ' and notified its members' : ''}.`,
      channel,
      shared: true,
      notify,
    });
  },
});

export const add = defineTool({
  name: 'add',
  title: 'Add',
  description: 'Adds two numbers.',
  inputSchema: z.object({ a: z.number(), b: z.number() }),
  taskSupport: 'forbidden',
  runsIn: 'gateway',
  async run({ a, b }) {
    const sum = a + b;
    if (!Number.isFinite(sum)) return textResult(`${a} + ${b} is not a finite number`, { isError: true });
    return structuredResult({ summary: `${a} + ${b} = ${sum}`, sum });
  },
});

/** The demo tool set, in its listing order. */
export const demoToolset = (settings: DemoSettings): ToolsetModule => ({
  tools: [countdown, deepResearchTool(settings), shareReport, add],
});
