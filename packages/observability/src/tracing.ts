/**
 * Traces (case N-14) with OpenTelemetry, exported over OTLP/HTTP, and off unless
 * configured: `OTEL_TRACES_EXPORTER=otlp`, or an `OTEL_EXPORTER_OTLP_ENDPOINT` /
 * `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (and not `OTEL_TRACES_EXPORTER=none`). Off, the tracer is
 * the API's no-op one and nothing is created per request.
 *
 * On, the SDK reads its usual variables: the endpoint (default `http://localhost:4318`,
 * `/v1/traces` appended to OTEL_EXPORTER_OTLP_ENDPOINT), `OTEL_EXPORTER_OTLP_HEADERS`,
 * `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` / `OTEL_EXPORTER_OTLP_PROTOCOL` (`http/protobuf`, the
 * default, or `http/json`), `OTEL_SERVICE_NAME` (default `mcp-task-<role>`),
 * `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER` (default `parentbased_always_on`: a request
 * whose `traceparent` says "not sampled" records nothing, here or on the worker) and the batch
 * processor's `OTEL_BSP_*`.
 *
 * How a trace crosses the queue (N-14): the gateway's request span is a child of the client's
 * context (`_meta.traceparent` / `tracestate`, which 2026-07-28 reserves, else the HTTP
 * `traceparent` header); the task keeps that span's context (task record and job payload,
 * `carrierOf`), and every step a worker runs is a span that is a child of it and links to it
 * (`contextFrom`), so one task is one trace across gateways and workers. Trace values are
 * parsed strictly (W3C) and never grant anything.
 */
import {
  DiagLogLevel,
  ROOT_CONTEXT,
  defaultTextMapGetter,
  defaultTextMapSetter,
  diag,
  trace,
  type Context,
  type Span,
  type Tracer,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter as OtlpJsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as OtlpProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import type { Logger } from 'pino';
import { SERVICE_NAME } from '@mcp-tasks/config';

export type { Span, Tracer, Context };

/** A W3C trace context as stored with a task and a job. */
export interface TraceCarrier {
  traceparent: string;
  tracestate?: string;
}

export interface Tracing {
  /** True when spans are recorded and exported. */
  readonly enabled: boolean;
  readonly tracer: Tracer;
  /** Flushes pending spans and stops the exporter (at shutdown; bounded by the SDK's timeouts). */
  shutdown(): Promise<void>;
}

const TRACER_NAME = SERVICE_NAME;
const w3c = new W3CTraceContextPropagator();

/**
 * Starts tracing for `role` when `cfg.enabled` (see the module doc); else returns the no-op
 * tracer. Registers the provider globally (context manager and W3C propagators), so code that
 * uses `@opentelemetry/api` directly (a tool's own spans) joins the same traces.
 * @param log receives the SDK's warnings and errors (an unreachable collector), as `otel.*` lines.
 */
export function startTracing(
  role: 'gateway' | 'worker',
  cfg: { enabled: boolean; protocol: 'http/protobuf' | 'http/json' },
  log?: Logger,
): Tracing {
  if (!cfg.enabled) return { enabled: false, tracer: trace.getTracer(TRACER_NAME), shutdown: async () => undefined };
  if (log) {
    const warn = (msg: string) => log.warn({ detail: msg }, 'otel.warning');
    diag.setLogger(
      { error: warn, warn, info: () => undefined, debug: () => undefined, verbose: () => undefined },
      DiagLogLevel.WARN,
    );
  }
  const exporter = cfg.protocol === 'http/json' ? new OtlpJsonExporter() : new OtlpProtoExporter();
  const resource = resourceFromAttributes({
    'service.name': process.env.OTEL_SERVICE_NAME || `mcp-task-${role}`,
  }).merge(detectResources({ detectors: [envDetector] }));
  const provider = new NodeTracerProvider({ resource, spanProcessors: [new BatchSpanProcessor(exporter)] });
  provider.register();
  return {
    enabled: true,
    tracer: provider.getTracer(TRACER_NAME),
    shutdown: () => provider.shutdown().catch(() => undefined),
  };
}

/**
 * The context a W3C carrier describes (strict parse: a malformed `traceparent` gives the root
 * context, i.e. a new trace). Only string values are read.
 */
export function contextFrom(carrier: { traceparent?: unknown; tracestate?: unknown } | undefined): Context {
  if (!carrier || typeof carrier.traceparent !== 'string') return ROOT_CONTEXT;
  const c: Record<string, string> = { traceparent: carrier.traceparent };
  if (typeof carrier.tracestate === 'string') c.tracestate = carrier.tracestate;
  return w3c.extract(ROOT_CONTEXT, c, defaultTextMapGetter);
}

/** True when `ctx` holds a valid remote span context (a parent to continue). */
export function hasParent(ctx: Context): boolean {
  return trace.getSpanContext(ctx) !== undefined;
}

/** The W3C carrier of `span`'s context (to store with a task or job); undefined for an invalid one. */
export function carrierOf(span: Span | undefined): TraceCarrier | undefined {
  if (!span) return undefined;
  const out: Record<string, string> = {};
  w3c.inject(trace.setSpan(ROOT_CONTEXT, span), out, defaultTextMapSetter);
  if (!out.traceparent) return undefined;
  return out.tracestate
    ? { traceparent: out.traceparent, tracestate: out.tracestate }
    : { traceparent: out.traceparent };
}
