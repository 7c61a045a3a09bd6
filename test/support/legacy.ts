/**
 * A raw 2025-era client for tests (test/e2e/legacy-sessions.test.ts): `initialize` and its
 * session, 2025 requests (no `_meta` envelope, no 2026 headers, the `Mcp-Session-Id` of the
 * session), held `tools/call`s read frame by frame (sse.ts). Kept raw on purpose: the tests send
 * what a real client sends, and what it never would.
 */
import assert from 'node:assert/strict';
import { waitFor, type Cluster } from './cluster.js';
import { sseCall, type SseCall } from './sse.js';

export interface Posted {
  status: number;
  headers: Headers;
  text: string;
  /** The JSON-RPC message of the answer (JSON, or the first SSE `data:` message). */
  message?: Record<string, any>;
}

/** POSTs one 2025-era message (no `_meta` envelope, no 2026 headers), with `o.token` as the bearer key. */
export async function post(
  url: string,
  message: Record<string, unknown>,
  o: { sid?: string; token: string; version?: string | null },
): Promise<Posted> {
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    authorization: `Bearer ${o.token}`,
  };
  if (o.version !== null) headers['mcp-protocol-version'] = o.version ?? '2025-11-25';
  if (o.sid) headers['mcp-session-id'] = o.sid;
  const r = await fetch(url, { method: 'POST', headers, body: JSON.stringify(message) });
  const text = await r.text();
  let parsed: Record<string, any> | undefined;
  try {
    parsed = JSON.parse(text);
  } catch {
    const data = text
      .split(/\r?\n/)
      .filter((l) => l.startsWith('data:'))
      .map((l) => l.slice(5).trim());
    parsed = data.length ? JSON.parse(data[0]!) : undefined;
  }
  return { status: r.status, headers: r.headers, text, ...(parsed ? { message: parsed } : {}) };
}

/** `initialize` + `notifications/initialized` (on the other gateway); returns the session id. */
export async function open(
  c: Cluster,
  version: string,
  capabilities: Record<string, unknown>,
  o: { token: string; via?: number },
): Promise<string> {
  const via = o.via ?? 0;
  const init = await post(
    c.urls[via]!,
    {
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: { protocolVersion: version, capabilities, clientInfo: { name: 'raw-2025-client', version: '1.0.0' } },
    },
    { version: null, token: o.token },
  );
  assert.equal(init.status, 200, init.text);
  assert.equal(init.message?.result?.protocolVersion, version, init.text);
  const sid = init.headers.get('mcp-session-id');
  assert.ok(sid, 'initialize answered with an Mcp-Session-Id');
  const initialized = await post(
    c.urls[(via + 1) % 2]!,
    { jsonrpc: '2.0', method: 'notifications/initialized' },
    { sid, version, token: o.token },
  );
  assert.equal(initialized.status, 202, initialized.text);
  return sid;
}

/** A held 2025 `tools/call` on gateway `via` of session `sid`. */
export function call(
  c: Cluster,
  via: number,
  sid: string | undefined,
  id: number,
  name: string,
  args: Record<string, unknown>,
  token: string,
  version = '2025-11-25',
): SseCall {
  return sseCall(
    c.urls[via]!,
    'tools/call',
    { name, arguments: args },
    {
      id,
      rawBody: JSON.stringify({
        jsonrpc: '2.0',
        id,
        method: 'tools/call',
        params: { name, arguments: args, _meta: { progressToken: id } },
      }),
      token,
      headers: {
        'mcp-protocol-version': version,
        'mcp-method': null,
        'mcp-name': null,
        ...(sid ? { 'mcp-session-id': sid } : {}),
      },
    },
  );
}

export const isElicitation = (f: { message?: Record<string, any> }) => f.message?.method === 'elicitation/create';
export const textOf = (r: Record<string, any> | undefined) =>
  ((r?.content ?? []) as { type: string; text?: string }[]).map((x) => x.text ?? '').join('\n');

/** The id of the task a gateway created for `tool` after log line `from` (any gateway). */
export async function createdTask(c: Cluster, tool: string, seen: Set<string>): Promise<string> {
  const line = await waitFor(
    () =>
      c.gateways
        .flatMap((g) => g.logs)
        .find((l) => l.msg === 'task.created' && l.tool === tool && !seen.has(String(l.taskId))),
    10_000,
    20,
    `task.created for ${tool}`,
  );
  const id = String(line.taskId);
  seen.add(id);
  return id;
}
