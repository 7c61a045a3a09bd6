/**
 * A tool's input keys on the wire (T-29): a tool names its input requests with logical keys
 * (`confirm`); the task stores them with the step's number appended (`confirm.2`), so a key
 * stays unique for the task's life, and the next step's tool gets its answers back under the
 * logical keys.
 */
import type { InputResponse } from '@mcp-tasks/tools';

/** Suffix that makes a tool's logical input key unique for the task's life (T-29). */
export const wireKey = (key: string, step: number) => `${key}.${step}`;

/** The answers to step `prevStep`'s requests, under the tool's logical keys (`ctx.inputResponses`). */
export function fromWireKeys(responses: Record<string, unknown>, prevStep: number): Record<string, InputResponse> {
  const out: Record<string, InputResponse> = {};
  const suffix = `.${prevStep}`;
  for (const [k, v] of Object.entries(responses)) {
    out[k.endsWith(suffix) ? k.slice(0, -suffix.length) : k] = v as InputResponse;
  }
  return out;
}
