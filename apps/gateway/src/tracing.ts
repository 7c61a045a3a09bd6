/**
 * The span of one `POST /mcp` exchange (case N-14), when tracing is on (packages/observability
 * tracing.ts): kind SERVER, named `<method> <tool>` (`tools/call countdown`, `tasks/get`), a
 * child of the client's context: `params._meta.traceparent` / `tracestate` (reserved by
 * 2026-07-28), else the `traceparent` / `tracestate` headers, else a new trace.
 *
 * Started when the body has been parsed (the first preHandler, with the time the request
 * arrived as its start), or at the end for a request refused before (401, 415, 400), from the
 * headers only. Ended when the response ends, with the HTTP status and the JSON-RPC outcome.
 * Attributes (MCP semantic conventions where they exist): `mcp.method.name`,
 * `gen_ai.tool.name`, `mcp.protocol.version`, `mcp.task.id` (a task created or addressed),
 * `http.response.status_code`, `rpc.response.status_code` and `error.type` (a JSON-RPC error).
 * Never the principal, a token or arguments.
 */
import type { IncomingMessage } from 'node:http';
import { SpanKind, SpanStatusCode, type Span, type Tracer } from '@opentelemetry/api';
import { contextFrom, hasParent } from '@mcp-tasks/observability';
import { isWellFormedTaskId } from '@mcp-tasks/task-store';

interface Body {
  method?: unknown;
  params?: { name?: unknown; taskId?: unknown; _meta?: Record<string, unknown> };
}

const spans = new WeakMap<IncomingMessage, Span>();

/** The span of the exchange `raw` belongs to (undefined when tracing is off). */
export function requestSpan(raw: IncomingMessage): Span | undefined {
  return spans.get(raw);
}

/** Starts (once) the span of an exchange; `body` is the parsed body when there is one. */
export function startRequestSpan(tracer: Tracer, raw: IncomingMessage, body: unknown, startTime: number): Span {
  const existing = spans.get(raw);
  if (existing) return existing;
  const b = (body && typeof body === 'object' ? body : {}) as Body;
  const meta = b.params?._meta;
  const fromMeta = contextFrom(
    meta && typeof meta === 'object' ? { traceparent: meta.traceparent, tracestate: meta.tracestate } : undefined,
  );
  const parent = hasParent(fromMeta)
    ? fromMeta
    : contextFrom({ traceparent: raw.headers.traceparent, tracestate: raw.headers.tracestate });
  const method = typeof b.method === 'string' ? b.method.slice(0, 64) : undefined;
  const tool = method === 'tools/call' && typeof b.params?.name === 'string' ? b.params.name.slice(0, 128) : undefined;
  const span = tracer.startSpan(
    method ? (tool ? `${method} ${tool}` : method) : `${raw.method ?? 'HTTP'} /mcp`,
    { kind: SpanKind.SERVER, startTime, attributes: { 'http.request.method': raw.method ?? '', 'url.path': '/mcp' } },
    parent,
  );
  if (method) span.setAttribute('mcp.method.name', method);
  if (tool) span.setAttribute('gen_ai.tool.name', tool);
  const version = raw.headers['mcp-protocol-version'];
  if (typeof version === 'string') span.setAttribute('mcp.protocol.version', version.slice(0, 32));
  if (method?.startsWith('tasks/') && isWellFormedTaskId(b.params?.taskId))
    span.setAttribute('mcp.task.id', b.params.taskId);
  spans.set(raw, span);
  return span;
}

/** Ends the span of an exchange with its HTTP status and outcome (`ok`, a JSON-RPC code label, `error`, `aborted`). */
export function endRequestSpan(raw: IncomingMessage, status: number, outcome: string): void {
  const span = spans.get(raw);
  if (!span) return;
  spans.delete(raw);
  span.setAttribute('http.response.status_code', status);
  if (outcome !== 'ok') {
    if (/^-?\d+$/.test(outcome)) span.setAttribute('rpc.response.status_code', outcome);
    span.setAttribute('error.type', outcome);
    span.setStatus({ code: SpanStatusCode.ERROR });
  }
  span.end();
}
