/**
 * Core fixtures of the `conformance` tool set: the tools the official suite's non-tasks
 * scenarios call by name (`@modelcontextprotocol/conformance@0.2.0-alpha.12`, scored set
 * 2026-07-28 and the pending SEP-2243 / JSON Schema scenarios; docs/conformance-fixtures.md),
 * with the behaviour the reference server (the SDK's `test/conformance/src/everythingServer.ts`)
 * gives them. All run in the gateway: they are instant.
 */
import { z } from 'zod';
import { defineTool, inputRequired, mcpHeader, samplingRequest, textResult, type ToolResult } from '../kit.js';

/** A 1×1 red PNG (Base64), the suite's reference image. */
export const TEST_IMAGE_BASE64 =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==';
/** A minimal WAV file (Base64), the suite's reference audio. */
export const TEST_AUDIO_BASE64 = 'UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=';

const instant = { taskSupport: 'forbidden', runsIn: 'gateway' } as const;
const noArgs = z.object({});

/** `tools-call-simple-text`. */
export const testSimpleText = defineTool({
  name: 'test_simple_text',
  description: 'Returns one text block (conformance fixture).',
  inputSchema: noArgs,
  ...instant,
  async run() {
    return textResult('This is a simple text response for testing.');
  },
});

/** `tools-call-image`. */
export const testImageContent = defineTool({
  name: 'test_image_content',
  description: 'Returns one image block, a 1×1 PNG (conformance fixture).',
  inputSchema: noArgs,
  ...instant,
  async run() {
    return { content: [{ type: 'image', data: TEST_IMAGE_BASE64, mimeType: 'image/png' }] };
  },
});

/** `tools-call-audio`. */
export const testAudioContent = defineTool({
  name: 'test_audio_content',
  description: 'Returns one audio block, a short WAV (conformance fixture).',
  inputSchema: noArgs,
  ...instant,
  async run() {
    return { content: [{ type: 'audio', data: TEST_AUDIO_BASE64, mimeType: 'audio/wav' }] };
  },
});

/** `tools-call-embedded-resource`. */
export const testEmbeddedResource = defineTool({
  name: 'test_embedded_resource',
  description: 'Returns one embedded text resource (conformance fixture).',
  inputSchema: noArgs,
  ...instant,
  async run() {
    return {
      content: [
        {
          type: 'resource',
          resource: {
            uri: 'test://embedded-resource',
            mimeType: 'text/plain',
            text: 'This is an embedded resource content.',
          },
        },
      ],
    };
  },
});

/** `tools-call-mixed-content`. */
export const testMultipleContentTypes = defineTool({
  name: 'test_multiple_content_types',
  description: 'Returns a text, an image and an embedded resource block (conformance fixture).',
  inputSchema: noArgs,
  ...instant,
  async run() {
    return {
      content: [
        { type: 'text', text: 'Multiple content types test:' },
        { type: 'image', data: TEST_IMAGE_BASE64, mimeType: 'image/png' },
        {
          type: 'resource',
          resource: {
            uri: 'test://mixed-content-resource',
            mimeType: 'application/json',
            text: JSON.stringify({ test: 'data', value: 123 }),
          },
        },
      ],
    };
  },
});

/** `tools-call-error`: a tool execution error (`isError: true`), not a JSON-RPC error. */
export const testErrorHandling = defineTool({
  name: 'test_error_handling',
  description: 'Always fails with a tool execution error (isError: true) (conformance fixture).',
  inputSchema: noArgs,
  ...instant,
  async run(): Promise<ToolResult> {
    return textResult('This tool intentionally returns an error for testing', { isError: true });
  },
});

/**
 * `http-custom-header-server-validation` (SEP-2243): `region` is mirrored into
 * `Mcp-Param-Region`; the gateway refuses a call whose header and argument disagree.
 */
export const testXMcpHeader = defineTool({
  name: 'test_x_mcp_header',
  description: 'Echoes its region; `region` travels in the Mcp-Param-Region header too (SEP-2243 conformance fixture).',
  inputSchema: z.object({
    region: mcpHeader('Region', z.string().max(500).describe('Mirrored into the Mcp-Param-Region header')).optional(),
    level: z.number().int().describe('Not mirrored').optional(),
  }),
  ...instant,
  async run({ region }) {
    return textResult(`region=${region ?? '<none>'}`);
  },
});

/** The schema `json-schema-2020-12` expects verbatim in `tools/list` (SEP-1613, SEP-2106). */
export const JSON_SCHEMA_2020_12_INPUT_SCHEMA = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  $defs: {
    address: {
      $anchor: 'addressDef',
      type: 'object',
      properties: { street: { type: 'string' }, city: { type: 'string' } },
    },
  },
  properties: {
    name: { type: 'string' },
    address: { $ref: '#/$defs/address' },
    contactMethod: { type: 'string', enum: ['phone', 'email'] },
    phone: { type: 'string' },
    email: { type: 'string' },
  },
  allOf: [{ anyOf: [{ required: ['phone'] }, { required: ['email'] }] }],
  if: { properties: { contactMethod: { const: 'phone' } }, required: ['contactMethod'] },
  then: { required: ['phone'] },
  else: { required: ['email'] },
  additionalProperties: false,
};

/** `json-schema-2020-12`: advertises `JSON_SCHEMA_2020_12_INPUT_SCHEMA` and enforces it. */
export const jsonSchema202012Tool = defineTool({
  name: 'json_schema_2020_12_tool',
  description:
    'Tool with JSON Schema 2020-12 features ($defs, $anchor, allOf/anyOf, if/then/else) (conformance fixture).',
  inputSchema: z.object({
    name: z.string().optional(),
    address: z.object({ street: z.string().optional(), city: z.string().optional() }).optional(),
    contactMethod: z.enum(['phone', 'email']).optional(),
    phone: z.string().optional(),
    email: z.string().optional(),
  }),
  inputJsonSchema: JSON_SCHEMA_2020_12_INPUT_SCHEMA,
  ...instant,
  async run(args) {
    return textResult(`JSON Schema 2020-12 tool called with: ${JSON.stringify(args)}`);
  },
});

/**
 * `server-stateless` (sep-2575-server-rejects-undeclared-capability): needs `sampling`; a call
 * that does not declare it gets `-32021` with `requiredCapabilities: {sampling: {}}` (B-07).
 */
export const testMissingCapability = defineTool({
  name: 'test_missing_capability',
  description:
    'Needs the sampling client capability: asks the client for one completion, then reports (conformance fixture).',
  inputSchema: noArgs,
  ...instant,
  requiresCapabilities: { sampling: {} },
  async run(_args, ctx) {
    if (ctx.step === 1) {
      return inputRequired({
        inputRequests: {
          llm_answer: samplingRequest({
            messages: [{ role: 'user', content: { type: 'text', text: 'Reply with the single word: pong' } }],
            maxTokens: 16,
          }),
        },
      });
    }
    return textResult('sampling round-trip complete');
  },
});

/** `server-stateless` (no independent requests on a response stream): a plain result. */
export const testStreamingElicitation = defineTool({
  name: 'test_streaming_elicitation',
  description: 'Returns a plain result; its response carries no server-to-client request (conformance fixture).',
  inputSchema: noArgs,
  ...instant,
  async run() {
    return textResult('stream observed: result frames only, no top-level requests');
  },
});

/** `server-stateless` (no log without `_meta.logLevel`, L-01): logs through `ctx.log`. */
export const testLoggingTool = defineTool({
  name: 'test_logging_tool',
  description:
    'Logs one info message (sent only when the request sets a log level), then returns (conformance fixture).',
  inputSchema: noArgs,
  ...instant,
  async run(_args, ctx) {
    await ctx.log('info', 'test_logging_tool ran (delivered only when the request set _meta.logLevel)');
    return textResult('logged through the request-scoped, logLevel-gated channel');
  },
});

export const conformanceCoreTools = [
  testSimpleText,
  testImageContent,
  testAudioContent,
  testEmbeddedResource,
  testMultipleContentTypes,
  testErrorHandling,
  testXMcpHeader,
  jsonSchema202012Tool,
  testMissingCapability,
  testStreamingElicitation,
  testLoggingTool,
];
