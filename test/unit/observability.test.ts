/**
 * Unit tests of the pure parts of metrics, traces and worker visibility (issue 9 §3-§5, N-14):
 * the JSON-RPC outcome read from response bytes, the bounded labels, the W3C carriers, the
 * "no worker" notice, and the configuration of the new variables. No Redis, no processes.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { loadConfig } from '@mcp-tasks/config';
import {
  carrierOf,
  codeLabel,
  contextFrom,
  createGatewayMetrics,
  hasParent,
  methodLabel,
} from '@mcp-tasks/observability';
import { trace } from '@opentelemetry/api';
import type { TaskRecord } from '@mcp-tasks/task-store';
import { sniffResponse } from '../../apps/gateway/src/outcome.js';
import { NO_WORKER_MESSAGE, withWorkerNotice } from '../../apps/gateway/src/workers.js';

describe('outcome of a response from its bytes', () => {
  it('reads the error code of a JSON body and of an SSE data line; a result is ok; notifications and big chunks are ignored', () => {
    assert.equal(sniffResponse('{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"x"}}'), -32602);
    assert.equal(
      sniffResponse(Buffer.from('{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"x"}}')),
      -32600,
    );
    const sse = 'event: message\ndata: {"jsonrpc":"2.0","id":"a","error":{"code":-32603,"message":"boom"}}\n\n';
    assert.equal(sniffResponse(new TextEncoder().encode(sse)), -32603);
    assert.equal(
      sniffResponse('{"jsonrpc":"2.0","id":1,"result":{"status":"failed","error":{"code":-32603,"message":"x"}}}'),
      'ok',
    );
    assert.equal(
      sniffResponse('data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"message":"error"}}\n\n'),
      undefined,
    );
    assert.equal(sniffResponse('{"jsonrpc":"2.0","id":1,"result":{}}'), undefined, 'no "error": not parsed at all');
    assert.equal(
      sniffResponse(`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"${'x'.repeat(70_000)}"}}`),
      undefined,
    );
    assert.equal(sniffResponse(': keepalive\n\n'), undefined);
    assert.equal(sniffResponse(undefined), undefined);
  });

  it('labels stay bounded', () => {
    assert.equal(methodLabel('tasks/get'), 'tasks/get');
    assert.equal(methodLabel('notifications/cancelled'), 'notifications');
    assert.equal(methodLabel('x'.repeat(500)), 'other');
    assert.equal(methodLabel(undefined), 'none');
    assert.equal(codeLabel(-32021), '-32021');
    assert.equal(codeLabel(-31429), '-31429');
    assert.equal(codeLabel(42), 'other_error');
    assert.equal(codeLabel(-1.5), 'other_error');
  });

  it('a registry per process: two gateways in one process do not collide', async () => {
    const a = createGatewayMetrics();
    const b = createGatewayMetrics();
    a.requests.inc({ method: 'tasks/get', status: '200', outcome: 'ok' });
    assert.match(await a.registry.metrics(), /mcp_requests_total\{method="tasks\/get",status="200",outcome="ok"\} 1/);
    assert.doesNotMatch(await b.registry.metrics(), /mcp_requests_total\{/);
  });
});

describe('W3C carriers (N-14)', () => {
  const tp = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
  it('a valid traceparent is a parent; a malformed or missing one is not', () => {
    const ctx = contextFrom({ traceparent: tp, tracestate: 'vendor=1' });
    assert.ok(hasParent(ctx));
    assert.equal(trace.getSpanContext(ctx)!.traceId, '0af7651916cd43dd8448eb211c80319c');
    assert.ok(!hasParent(contextFrom({ traceparent: '00-zz-01' })));
    assert.ok(!hasParent(contextFrom({ traceparent: 42 })));
    assert.ok(!hasParent(contextFrom(undefined)));
  });
  it('carrierOf round-trips a span context (sampled flag included)', () => {
    const span = trace.wrapSpanContext(trace.getSpanContext(contextFrom({ traceparent: tp.replace(/-01$/, '-00') }))!);
    assert.deepEqual(carrierOf(span), { traceparent: tp.replace(/-01$/, '-00') });
    assert.equal(carrierOf(undefined), undefined);
  });
});

describe('the no-worker notice', () => {
  const rec = { status: 'working', statusMessage: '3/10' } as TaskRecord;
  it('only a working task while no worker is alive', () => {
    assert.equal(withWorkerNotice(rec, 0).statusMessage, NO_WORKER_MESSAGE);
    assert.equal(withWorkerNotice(rec, 1).statusMessage, '3/10');
    assert.equal(withWorkerNotice(rec, undefined).statusMessage, '3/10', 'an unknown count changes nothing');
    assert.equal(withWorkerNotice({ ...rec, status: 'input_required' }, 0).statusMessage, '3/10');
    assert.equal(rec.statusMessage, '3/10', 'the record is not changed');
  });
});

describe('configuration of metrics, worker port and traces', () => {
  it('defaults', () => {
    const c = loadConfig({});
    assert.deepEqual(c.metrics, { enabled: true });
    assert.deepEqual(c.workerHttp, { host: '127.0.0.1', port: 9464, freePortIfTaken: true });
    // Set explicitly (even to the default): that port or nothing.
    assert.deepEqual(loadConfig({ WORKER_HTTP_PORT: '9464' }).workerHttp, {
      host: '127.0.0.1',
      port: 9464,
      freePortIfTaken: false,
    });
    assert.equal(loadConfig({ WORKER_HTTP_PORT: '0' }).workerHttp?.freePortIfTaken, false);
    assert.equal(c.heartbeatMs, 5000);
    assert.deepEqual(c.tracing, { enabled: false, protocol: 'http/protobuf' });
  });
  it('settings', () => {
    const c = loadConfig({
      HOST: '0.0.0.0',
      AUTH_API_KEYS: 'a:0123456789abcdef0123456789abcdef',
      REQUEST_STATE_KEYS: 'k:0123456789abcdef0123456789abcdef0123',
      METRICS_PORT: '9100',
      WORKER_HTTP_PORT: 'off',
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    });
    assert.deepEqual(c.metrics, { enabled: true, listen: { host: '0.0.0.0', port: 9100 } });
    assert.equal(c.workerHttp, undefined);
    assert.deepEqual(c.tracing, { enabled: true, protocol: 'http/json' });
    assert.equal(
      loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'none' }).tracing.enabled,
      false,
    );
    assert.equal(loadConfig({ OTEL_TRACES_EXPORTER: 'otlp' }).tracing.enabled, true);
  });
  it('refusals name the variable', () => {
    assert.throws(
      () => loadConfig({ OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'grpc' }),
      /OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: .*grpc is not supported/,
    );
    assert.throws(() => loadConfig({ WORKER_HTTP_PORT: 'abc' }), /WORKER_HTTP_PORT/);
    assert.throws(() => loadConfig({ METRICS_ENABLED: 'yes' }), /METRICS_ENABLED/);
  });
});
