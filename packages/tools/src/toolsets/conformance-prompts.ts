/**
 * Prompts of the `conformance` tool set: the ones the suite's `prompts-*`,
 * `completion-complete` and `input-required-result-non-tool-request` scenarios get by name,
 * with the reference server's messages.
 */
import { accepted, elicitForm, inputRequired } from '../kit.js';
import { definePrompt } from '../prompts.js';
import { TEST_IMAGE_BASE64 } from './conformance-core.js';

/** Values `completion/complete` offers for `arg1` of `test_prompt_with_arguments`. */
const ARG1_VALUES = ['paris', 'park', 'party', 'test', 'testing', 'testValue1'];

export const testSimplePrompt = definePrompt({
  name: 'test_simple_prompt',
  title: 'Simple Test Prompt',
  description: 'A simple prompt without arguments (conformance fixture).',
  async get() {
    return { messages: [{ role: 'user', content: { type: 'text', text: 'This is a simple prompt for testing.' } }] };
  },
});

export const testPromptWithArguments = definePrompt({
  name: 'test_prompt_with_arguments',
  title: 'Prompt With Arguments',
  description: 'A prompt with two required arguments; arg1 can be completed (conformance fixture).',
  arguments: {
    arg1: {
      description: 'First test argument',
      required: true,
      complete: (value) => ARG1_VALUES.filter((v) => v.startsWith(value)),
    },
    arg2: { description: 'Second test argument', required: true },
  },
  async get({ arg1, arg2 }) {
    return {
      messages: [
        { role: 'user', content: { type: 'text', text: `Prompt with arguments: arg1='${arg1}', arg2='${arg2}'` } },
      ],
    };
  },
});

export const testPromptWithEmbeddedResource = definePrompt({
  name: 'test_prompt_with_embedded_resource',
  title: 'Prompt With Embedded Resource',
  description: 'A prompt that embeds a text resource at the given URI (conformance fixture).',
  arguments: { resourceUri: { description: 'URI of the resource to embed', required: true } },
  async get({ resourceUri }) {
    return {
      messages: [
        {
          role: 'user',
          content: {
            type: 'resource',
            resource: { uri: resourceUri, mimeType: 'text/plain', text: 'Embedded resource content for testing.' },
          },
        },
        { role: 'user', content: { type: 'text', text: 'Please process the embedded resource above.' } },
      ],
    };
  },
});

export const testPromptWithImage = definePrompt({
  name: 'test_prompt_with_image',
  title: 'Prompt With Image',
  description: 'A prompt that includes an image (conformance fixture).',
  async get() {
    return {
      messages: [
        { role: 'user', content: { type: 'image', data: TEST_IMAGE_BASE64, mimeType: 'image/png' } },
        { role: 'user', content: { type: 'text', text: 'Please analyze the image above.' } },
      ],
    };
  },
});

/** MRTR on `prompts/get` (SEP-2322: `input_required` is not only for tools). */
export const testInputRequiredPrompt = definePrompt({
  name: 'test_input_required_result_prompt',
  title: 'MRTR Prompt',
  description: 'Asks what context to use (one elicitation), then renders (conformance fixture).',
  async get(_args, ctx) {
    if (ctx.step === 1) {
      return inputRequired({
        inputRequests: {
          user_context: elicitForm('What context should the prompt use?', {
            type: 'object',
            properties: { context: { type: 'string' } },
            required: ['context'],
          }),
        },
      });
    }
    const context = accepted(ctx.inputResponses, 'user_context')?.context;
    return {
      messages: [
        {
          role: 'user',
          content: {
            type: 'text',
            text: `Use the following context: ${typeof context === 'string' ? context : '(none)'}`,
          },
        },
      ],
    };
  },
});

export const conformancePrompts = [
  testSimplePrompt,
  testPromptWithArguments,
  testPromptWithEmbeddedResource,
  testPromptWithImage,
  testInputRequiredPrompt,
];
