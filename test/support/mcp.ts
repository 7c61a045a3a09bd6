/**
 * A raw 2026-07-28 HTTP client for tests: adds the `_meta` envelope and the standard headers
 * (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`), parses a JSON or SSE answer.
 * Kept raw on purpose: negative tests need to send what a real client never would.
 * The wire code is `@mcp-tasks/client` (shared with the `mcp-tasks` CLI); this file adds the
 * tests' defaults (client info `test-client`, ids `t-<n>`) and polling helpers.
 */
import { rpc as clientRpc, requestBody as envelopeBody, type RpcOptions, type RpcResponse } from '@mcp-tasks/client';

export { PROTOCOL_VERSION, TASKS_EXTENSION as TASKS, type RpcResponse } from '@mcp-tasks/client';

/**
 * Options of one test request: which capabilities to declare (`tasks`, `elicitation` default
 * true, or a whole `capabilities` object), extra or dropped headers (`null` drops), a bearer
 * `token`, the JSON-RPC `id`, an abort `signal`, extra `_meta` keys, or a verbatim `rawBody`.
 */
export type CallOptions = Omit<RpcOptions, 'onMessage' | 'clientInfo'>;

const TEST_CLIENT_INFO = { name: 'test-client', version: '0.0.1' };
let nextId = 1;

/** The JSON body of a 2026-07-28 request with the `_meta` envelope (or `o.rawBody` verbatim). */
export function requestBody(method: string, params: Record<string, any>, o: CallOptions, id: string | number): string {
  return o.rawBody ?? envelopeBody(method, params, { ...o, clientInfo: TEST_CLIENT_INFO }, id);
}

/** Sends one JSON-RPC request to `url`. Never throws on HTTP errors; returns status and body. */
export function rpc(
  url: string,
  method: string,
  params: Record<string, any> = {},
  o: CallOptions = {},
): Promise<RpcResponse> {
  return clientRpc(url, method, params, { ...o, clientInfo: TEST_CLIENT_INFO, id: o.id ?? `t-${nextId++}` });
}

/** tools/call; returns the response. */
export const callTool = (
  url: string,
  name: string,
  args: Record<string, unknown> = {},
  o: CallOptions = {},
  extraParams: Record<string, unknown> = {},
) => rpc(url, 'tools/call', { name, arguments: args, ...extraParams }, o);

export const getTask = (url: string, taskId: string, o: CallOptions = {}) => rpc(url, 'tasks/get', { taskId }, o);
export const updateTask = (url: string, taskId: string, inputResponses: Record<string, unknown>, o: CallOptions = {}) =>
  rpc(url, 'tasks/update', { taskId, inputResponses }, o);
export const cancelTask = (url: string, taskId: string, o: CallOptions = {}) => rpc(url, 'tasks/cancel', { taskId }, o);

/** Round-robin over `urls`: each call goes to the next gateway. */
export function roundRobin(urls: string[]): () => string {
  let i = 0;
  return () => urls[i++ % urls.length]!;
}

/**
 * Polls `tasks/get` (each poll on the next URL) until `until(result)` holds.
 * @returns the last `tasks/get` result.
 */
export async function pollTask(
  next: () => string,
  taskId: string,
  until: (r: Record<string, any>) => boolean,
  timeoutMs = 20_000,
  everyMs = 100,
  o: CallOptions = {},
): Promise<Record<string, any>> {
  const end = Date.now() + timeoutMs;
  let last: Record<string, any> | undefined;
  for (;;) {
    const r = await getTask(next(), taskId, o);
    if (r.body.error) throw new Error(`tasks/get failed: ${JSON.stringify(r.body.error)}`);
    last = r.body.result!;
    if (until(last)) return last;
    if (Date.now() > end)
      throw new Error(
        `task ${taskId} did not reach the expected state in ${timeoutMs} ms; last: ${JSON.stringify(last)}`,
      );
    await new Promise((res) => setTimeout(res, everyMs));
  }
}

export const isTerminal = (s: string) => s === 'completed' || s === 'failed' || s === 'cancelled';
