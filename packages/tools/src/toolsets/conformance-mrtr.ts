/**
 * MRTR fixtures of the `conformance` tool set (SEP-2322, spec transport §6): the tools the
 * suite's `input-required-result-*` scenarios call, with the reference server's input keys and
 * messages. Each runs in the gateway and asks through the kit (`inputRequired`); the gateway
 * signs every round into `requestState` (M-05..M-07), so a tampered or replayed state is refused
 * with `-32602` before the tool runs again.
 */
import { z } from 'zod';
import {
  accepted,
  defineTool,
  elicitForm,
  inputRequired,
  rootsRequest,
  samplingRequest,
  textResult,
  type InputRequest,
} from '../kit.js';

const instant = { taskSupport: 'forbidden', runsIn: 'gateway' } as const;
const noArgs = z.object({});

const askName = () =>
  elicitForm('What is your name?', { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] });
const askGreeting = () =>
  samplingRequest({
    messages: [{ role: 'user', content: { type: 'text', text: 'Generate a greeting' } }],
    maxTokens: 50,
  });
const askConfirm = () =>
  elicitForm('Please confirm', { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] });

/** Text of a sampling answer (`CreateMessageResult.content.text`), if any. */
function sampledText(answer: unknown): string | undefined {
  const content = (answer as { content?: { type?: string; text?: unknown } } | undefined)?.content;
  return typeof content?.text === 'string' ? content.text : undefined;
}

/** `basic-elicitation`, `result-type`, `missing-input-response`, `ignore-extra-params`, `validate-input`. */
export const testInputRequiredElicitation = defineTool({
  name: 'test_input_required_result_elicitation',
  description: 'Asks for your name (one elicitation), then greets you (MRTR conformance fixture).',
  inputSchema: noArgs,
  ...instant,
  requiresCapabilities: { elicitation: {} },
  async run(_args, ctx) {
    if (ctx.step === 1) return inputRequired({ inputRequests: { user_name: askName() } });
    const name = accepted(ctx.inputResponses, 'user_name')?.name;
    return textResult(typeof name === 'string' ? `Hello, ${name}!` : 'Hello, stranger (no name was given)!');
  },
});

/** `basic-sampling`. */
export const testInputRequiredSampling = defineTool({
  name: 'test_input_required_result_sampling',
  description:
    'Asks the client model a question (one sampling request), then reports its answer (MRTR conformance fixture).',
  inputSchema: noArgs,
  ...instant,
  requiresCapabilities: { sampling: {} },
  async run(_args, ctx) {
    if (ctx.step === 1) {
      return inputRequired({
        inputRequests: {
          capital_question: samplingRequest({
            messages: [{ role: 'user', content: { type: 'text', text: 'What is the capital of France?' } }],
            maxTokens: 100,
          }),
        },
      });
    }
    return textResult(`Sampling response: ${sampledText(ctx.inputResponses.capital_question) ?? '(no text)'}`);
  },
});

/** `basic-list-roots`. */
export const testInputRequiredListRoots = defineTool({
  name: 'test_input_required_result_list_roots',
  description: 'Asks the client for its roots, then lists them (MRTR conformance fixture).',
  inputSchema: noArgs,
  ...instant,
  requiresCapabilities: { roots: {} },
  async run(_args, ctx) {
    if (ctx.step === 1) return inputRequired({ inputRequests: { client_roots: rootsRequest() } });
    const roots = (ctx.inputResponses.client_roots as { roots?: { uri?: unknown }[] } | undefined)?.roots;
    const list = Array.isArray(roots) ? roots : [];
    return textResult(`Client exposed ${list.length} root(s): ${list.map((r) => String(r?.uri)).join(', ')}`);
  },
});

/** `request-state`: the confirmation comes back with the signed state. */
export const testInputRequiredRequestState = defineTool({
  name: 'test_input_required_result_request_state',
  description: 'Asks for a confirmation and carries its round in requestState (MRTR conformance fixture).',
  inputSchema: noArgs,
  ...instant,
  requiresCapabilities: { elicitation: {} },
  async run(_args, ctx) {
    if (ctx.step === 1) return inputRequired({ inputRequests: { confirm: askConfirm() }, state: { round: 1 } });
    return textResult(
      `state-ok: requestState verified (round ${String((ctx.state as { round?: number } | null)?.round)}) and confirmation received`,
    );
  },
});

/** `multiple-input-requests`: an elicitation, a sampling and a roots request in one round. */
export const testInputRequiredMultipleInputs = defineTool({
  name: 'test_input_required_result_multiple_inputs',
  description: 'Asks for your name, a model greeting and the client roots in one round (MRTR conformance fixture).',
  inputSchema: noArgs,
  ...instant,
  requiresCapabilities: { elicitation: {}, sampling: {}, roots: {} },
  async run(_args, ctx) {
    if (ctx.step === 1)
      return inputRequired({
        inputRequests: { user_name: askName(), greeting: askGreeting(), client_roots: rootsRequest() },
      });
    const name = accepted(ctx.inputResponses, 'user_name')?.name;
    const roots = (ctx.inputResponses.client_roots as { roots?: unknown[] } | undefined)?.roots;
    return textResult(
      `${sampledText(ctx.inputResponses.greeting) ?? 'Hello'} ${String(name)}: ${Array.isArray(roots) ? roots.length : 0} root(s) visible`,
    );
  },
});

/** `multi-round`: two rounds of questions, a new `requestState` each time. */
export const testInputRequiredMultiRound = defineTool({
  name: 'test_input_required_result_multi_round',
  description: 'Asks your name, then your favourite colour, then answers (MRTR conformance fixture).',
  inputSchema: noArgs,
  ...instant,
  requiresCapabilities: { elicitation: {} },
  async run(_args, ctx) {
    if (ctx.step === 1) {
      return inputRequired({
        inputRequests: {
          step1: elicitForm('Step 1: What is your name?', {
            type: 'object',
            properties: { name: { type: 'string' } },
            required: ['name'],
          }),
        },
      });
    }
    if (ctx.step === 2) {
      const name = accepted(ctx.inputResponses, 'step1')?.name;
      return inputRequired({
        inputRequests: {
          step2: elicitForm('Step 2: What is your favorite color?', {
            type: 'object',
            properties: { color: { type: 'string' } },
            required: ['color'],
          }),
        },
        state: { name: typeof name === 'string' ? name : 'unknown' },
      });
    }
    const color = accepted(ctx.inputResponses, 'step2')?.color;
    return textResult(
      `Multi-round complete: ${(ctx.state as { name: string }).name} likes ${typeof color === 'string' ? color : 'unknown'}`,
    );
  },
});

/** `tampered-state`: a retry whose `requestState` was altered is refused before this runs. */
export const testInputRequiredTamperedState = defineTool({
  name: 'test_input_required_result_tampered_state',
  description: 'Asks for a confirmation; a retry with an altered requestState is refused (MRTR conformance fixture).',
  inputSchema: noArgs,
  ...instant,
  requiresCapabilities: { elicitation: {} },
  async run(_args, ctx) {
    if (ctx.step === 1) return inputRequired({ inputRequests: { confirm: askConfirm() } });
    return textResult('integrity-ok: requestState verified');
  },
});

/** `capability-check`: asks only for what the request's client capabilities cover (M-04). */
export const testInputRequiredCapabilities = defineTool({
  name: 'test_input_required_result_capabilities',
  description:
    'Asks for input only of the kinds the client declared (elicitation, sampling, roots) (MRTR conformance fixture).',
  inputSchema: noArgs,
  ...instant,
  async run(_args, ctx) {
    if (ctx.step > 1) return textResult('Capability-aware input requests fulfilled');
    const caps = ctx.clientCapabilities;
    const inputRequests: Record<string, InputRequest> = {};
    if (caps.elicitation !== undefined) inputRequests.user_name = askName();
    if (caps.sampling !== undefined) inputRequests.greeting = askGreeting();
    if (caps.roots !== undefined) inputRequests.client_roots = rootsRequest();
    if (Object.keys(inputRequests).length === 0)
      return textResult('No declared client capability supports an in-band input request');
    return inputRequired({ inputRequests });
  },
});

export const conformanceMrtrTools = [
  testInputRequiredElicitation,
  testInputRequiredSampling,
  testInputRequiredListRoots,
  testInputRequiredRequestState,
  testInputRequiredMultipleInputs,
  testInputRequiredMultiRound,
  testInputRequiredTamperedState,
  testInputRequiredCapabilities,
];
