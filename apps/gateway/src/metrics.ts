/**
 * Observation of `POST /mcp` and the `/metrics` route.
 *
 *  - `GET /metrics`: the Prometheus text of the gateway's registry, without credentials, when
 *    METRICS_ENABLED and no METRICS_PORT (then main.ts serves it on that port instead). What it
 *    shows is counts by method, tool, status and outcome: no principal, token or task id.
 *  - every `/mcp` exchange: `mcp_requests_total{method,status,outcome}` and
 *    `mcp_request_duration_seconds{method}` when its response ends, `mcp_sse_streams_open` while
 *    it streams, and its span (tracing.ts) when tracing is on.
 * The response is watched on the Node response itself (the MCP route hijacks its replies):
 * `writeHead` tells an SSE stream, the chunks written tell the JSON-RPC outcome (outcome.ts).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FastifyInstance } from 'fastify';
import type { Tracer } from '@opentelemetry/api';
import { codeLabel, methodLabel, type GatewayMetrics } from '@mcp-tasks/observability';
import { sniffResponse } from './outcome.js';
import { endRequestSpan, startRequestSpan } from './tracing.js';

export interface ObservationOptions {
  metrics?: GatewayMetrics;
  /** Serve `GET /metrics` on this app (false when disabled or bound to METRICS_PORT). */
  serveMetrics: boolean;
  /** Set when tracing is on. */
  tracer?: Tracer;
}

const MCP_PATH = '/mcp';

/** When each watched exchange arrived (ms since epoch), for its span's start time. */
const arrivals = new WeakMap<IncomingMessage, number>();

/**
 * Registers the `/metrics` route and the `/mcp` observation hooks on the root of `app` (before
 * the routes, so the hooks apply to them).
 */
export function registerObservation(app: FastifyInstance, o: ObservationOptions): void {
  const { metrics, tracer } = o;
  if (metrics && o.serveMetrics) {
    app.get('/metrics', async (_req, reply) => {
      const text = await metrics.registry.metrics();
      return reply.header('cache-control', 'no-store').type(metrics.registry.contentType).send(text);
    });
  }
  if (!metrics && !tracer) return;

  // A callback hook, not an async one: no promise per request.
  app.addHook('onRequest', (req, reply, done) => {
    if (req.routeOptions.url !== MCP_PATH) return done();
    if (tracer) arrivals.set(req.raw, Date.now());
    const startedHr = performance.now();
    const methodOf = () => methodLabel((req.body as { method?: unknown } | undefined)?.method);
    watchResponse(
      reply.raw,
      () => {
        const method = methodOf();
        metrics?.sseStreams.inc({ method });
        return method;
      },
      (status, outcome, sseMethod) => {
        const method = methodOf();
        if (sseMethod !== undefined) metrics?.sseStreams.dec({ method: sseMethod });
        metrics?.requests.inc({ method, status: String(status), outcome });
        metrics?.requestDuration.observe({ method }, (performance.now() - startedHr) / 1000);
        if (tracer) {
          startRequestSpan(tracer, req.raw, req.body, arrivals.get(req.raw) ?? Date.now());
          endRequestSpan(req.raw, status, outcome);
        }
      },
    );
    done();
  });
  if (tracer) {
    // The first preHandler: the body is parsed and nothing has run yet (authentication's
    // preHandler and the limits are the route's own, which run after the root's).
    app.addHook('preHandler', async (req) => {
      if (req.routeOptions.url === MCP_PATH)
        startRequestSpan(tracer, req.raw, req.body, arrivals.get(req.raw) ?? Date.now());
    });
  }
}

/**
 * Wraps `res` so `onSse` hears an SSE stream open (and names it) and `onEnd` gets the status
 * and outcome once the response closes: `aborted` when it closed before its end was written,
 * else the JSON-RPC code of the error it carried, `error` for an HTTP error without one, `ok`.
 */
function watchResponse(
  res: ServerResponse,
  onSse: () => string,
  onEnd: (status: number, outcome: string, sseMethod: string | undefined) => void,
): void {
  let sseMethod: string | undefined;
  let answer: number | 'ok' | undefined;
  const writeHead = res.writeHead.bind(res);
  res.writeHead = function (this: ServerResponse, ...args: Parameters<ServerResponse['writeHead']>) {
    const out = writeHead.apply(this, args);
    const type = this.getHeader('content-type') ?? headerIn(args);
    if (sseMethod === undefined && typeof type === 'string' && type.startsWith('text/event-stream'))
      sseMethod = onSse();
    return out;
  } as ServerResponse['writeHead'];
  const write = res.write.bind(res);
  res.write = function (this: ServerResponse, chunk: unknown, ...rest: unknown[]) {
    answer = sniffResponse(chunk) ?? answer;
    return (write as (...a: unknown[]) => boolean).call(this, chunk, ...rest);
  } as ServerResponse['write'];
  const end = res.end.bind(res);
  res.end = function (this: ServerResponse, chunk?: unknown, ...rest: unknown[]) {
    if (typeof chunk !== 'function') answer = sniffResponse(chunk) ?? answer;
    return (end as (...a: unknown[]) => ServerResponse).call(this, chunk, ...rest);
  } as ServerResponse['end'];
  res.once('close', () => {
    const status = res.statusCode;
    const outcome = !res.writableFinished
      ? 'aborted'
      : typeof answer === 'number'
        ? codeLabel(answer)
        : status >= 400
          ? 'error'
          : 'ok';
    onEnd(status, outcome, sseMethod);
  });
}

/** The content-type passed to `writeHead(status, headers)` as an object, if any. */
function headerIn(args: unknown[]): unknown {
  const h = args.find((a) => typeof a === 'object' && a !== null && !Array.isArray(a)) as
    Record<string, unknown> | undefined;
  if (!h) return undefined;
  const k = Object.keys(h).find((n) => n.toLowerCase() === 'content-type');
  return k ? h[k] : undefined;
}
