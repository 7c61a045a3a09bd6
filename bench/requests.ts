/**
 * The HTTP requests the benchmark sends: 2026-07-28 JSON-RPC bodies with the `_meta` envelope and
 * the headers a real client sends (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`,
 * `Authorization: Bearer <API key>`), built once by test/support/mcp.ts' `requestBody`.
 */
import { PROTOCOL_VERSION, requestBody, type CallOptions } from '../test/support/mcp.js';

/** One request for the load generator: headers and a serialized body. */
export interface BenchRequest {
  headers: Record<string, string>;
  body: string;
}

/**
 * A request for `method` with `params`; `name` is the `Mcp-Name` header (tool name or task id).
 * `o.tasks` (default true) declares the Tasks extension.
 */
export function benchRequest(
  apiKey: string,
  method: string,
  params: Record<string, unknown>,
  name?: string,
  o: CallOptions = {},
): BenchRequest {
  return {
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': PROTOCOL_VERSION,
      'mcp-method': method,
      ...(name === undefined ? {} : { 'mcp-name': name }),
      authorization: `Bearer ${apiKey}`,
    },
    body: requestBody(method, params, o, 1),
  };
}

/** `tasks/get` of `taskId`. */
export const tasksGet = (apiKey: string, taskId: string) => benchRequest(apiKey, 'tasks/get', { taskId }, taskId);

/** `tools/call` of `countdown(seconds)` declaring the Tasks extension: answered with a task handle. */
export const createCountdown = (apiKey: string, seconds = 1) =>
  benchRequest(apiKey, 'tools/call', { name: 'countdown', arguments: { seconds } }, 'countdown');

/** Sends `req` to `url` once (fetch) and returns the parsed JSON body; throws on a non-2xx status. */
export async function sendOnce(url: string, req: BenchRequest): Promise<Record<string, any>> {
  const res = await fetch(url, { method: 'POST', headers: req.headers, body: req.body });
  const text = await res.text();
  if (!res.ok) throw new Error(`${url}: HTTP ${res.status}: ${text.slice(0, 300)}`);
  return JSON.parse(text) as Record<string, any>;
}
