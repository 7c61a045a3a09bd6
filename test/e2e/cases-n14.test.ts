// @needs redis
/**
 * Case N-14: trace context through the queue. Real gateway and worker processes export their
 * spans over OTLP/HTTP (JSON) to a receiver this test runs on loopback; nothing is mocked.
 *
 *  - `tools/call` with a sampled `_meta.traceparent`: the gateway's request span is a child of
 *    the client's span; each step the worker runs (before and after the question, answered with
 *    `tasks/update` on the other gateway) is a span in the same trace, a child of and linked to
 *    the request span, carrying `mcp.task.id`; ten polls are ten separate short spans;
 *  - a `traceparent` that says "not sampled": nothing of that trace is recorded anywhere;
 *  - the HTTP `traceparent` header is used when `_meta` has none; a malformed one starts a new
 *    trace and changes nothing else (trace values never grant anything).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { randomBytes } from 'node:crypto';
import { startCluster, waitFor, type Cluster } from '../support/cluster.js';
import { callTool, getTask, pollTask, roundRobin, updateTask, isTerminal } from '../support/mcp.js';

interface RecordedSpan {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  startNs: bigint;
  endNs: bigint;
  attributes: Record<string, unknown>;
  links: { traceId: string; spanId: string }[];
}

/** An id as hex whether the exporter wrote hex (OTLP/JSON) or base64. */
const hexId = (v: unknown): string => {
  const s = typeof v === 'string' ? v : '';
  return /^[0-9a-f]*$/i.test(s) && (s.length === 32 || s.length === 16 || s.length === 0)
    ? s.toLowerCase()
    : Buffer.from(s, 'base64').toString('hex');
};
const attrValue = (v: Record<string, unknown>): unknown =>
  v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : undefined) ?? v.boolValue ?? v.doubleValue;
const attrs = (list: unknown): Record<string, unknown> =>
  Object.fromEntries(
    ((list as { key: string; value: Record<string, unknown> }[]) ?? []).map((a) => [a.key, attrValue(a.value)]),
  );

/** A minimal OTLP/HTTP JSON receiver: POST /v1/traces. */
async function startReceiver(): Promise<{ server: Server; url: string; spans: RecordedSpan[] }> {
  const spans: RecordedSpan[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.url === '/v1/traces') {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}');
        for (const rs of body.resourceSpans ?? []) {
          const service = String(attrs(rs.resource?.attributes)['service.name'] ?? '');
          for (const ss of rs.scopeSpans ?? []) {
            for (const s of ss.spans ?? []) {
              spans.push({
                service,
                traceId: hexId(s.traceId),
                spanId: hexId(s.spanId),
                parentSpanId: hexId(s.parentSpanId ?? ''),
                name: s.name,
                kind: s.kind,
                startNs: BigInt(s.startTimeUnixNano),
                endNs: BigInt(s.endTimeUnixNano),
                attributes: attrs(s.attributes),
                links: (s.links ?? []).map((l: { traceId: string; spanId: string }) => ({
                  traceId: hexId(l.traceId),
                  spanId: hexId(l.spanId),
                })),
              });
            }
          }
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, spans };
}

const SERVER = 2;
const CONSUMER = 5;
const newTraceId = () => randomBytes(16).toString('hex');
const newSpanId = () => randomBytes(8).toString('hex');

describe('N-14: trace context through the queue', () => {
  let c: Cluster;
  let rx: Awaited<ReturnType<typeof startReceiver>>;
  before(async () => {
    rx = await startReceiver();
    c = await startCluster({
      gateways: 2,
      workers: 1,
      env: {
        OTEL_EXPORTER_OTLP_ENDPOINT: rx.url,
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
        OTEL_BSP_SCHEDULE_DELAY: '100',
        DEMO_RESEARCH_PHASE_MS: '300',
      },
    });
  });
  after(async () => {
    await c?.stop();
    rx?.server.close();
  });

  it('sampled: request span child of the client, every step a child of and linked to it with mcp.task.id; polls are separate short spans', async () => {
    const traceId = newTraceId();
    const clientSpan = newSpanId();
    const next = roundRobin(c.urls);
    const created = await callTool(
      c.urls[0]!,
      'deep_research',
      { topic: 'traces' },
      { meta: { traceparent: `00-${traceId}-${clientSpan}-01` } },
    );
    const taskId = created.body.result!.taskId as string;
    let polls = 0;
    const parked = await pollTask(next, taskId, (t) => (polls++, t.status === 'input_required'), 15_000);
    while (polls < 10) (await getTask(next(), taskId), polls++);
    const key = Object.keys(parked.inputRequests)[0]!;
    await updateTask(c.urls[1]!, taskId, { [key]: { action: 'accept', content: { audience: 'team' } } });
    await pollTask(next, taskId, (t) => isTerminal(t.status), 15_000);

    const inTrace = () => rx.spans.filter((s) => s.traceId === traceId);
    // Each process exports on its own schedule (every 100 ms here): wait for both sides.
    await waitFor(
      () => inTrace().some((s) => s.kind === SERVER) && inTrace().filter((s) => s.kind === CONSUMER).length >= 2,
      10_000,
      100,
      'the request span and two worker step spans',
    );
    const request = inTrace().find((s) => s.kind === SERVER);
    assert.ok(request, JSON.stringify(inTrace().map((s) => [s.name, s.kind, s.service, s.parentSpanId])));
    assert.equal(request.name, 'tools/call deep_research');
    assert.equal(request.parentSpanId, clientSpan, 'the request span is a child of the client context');
    assert.equal(request.service, 'mcp-task-gateway');
    assert.equal(request.attributes['mcp.method.name'], 'tools/call');
    assert.equal(request.attributes['gen_ai.tool.name'], 'deep_research');
    assert.equal(request.attributes['mcp.task.id'], taskId);

    const steps = inTrace()
      .filter((s) => s.kind === CONSUMER)
      .sort((a, b) => Number(a.attributes['mcp.task.step']) - Number(b.attributes['mcp.task.step']));
    assert.deepEqual(
      steps.map((s) => s.attributes['mcp.task.step']),
      [1, 2],
    );
    assert.deepEqual(
      steps.map((s) => s.attributes['mcp.task.step.outcome']),
      ['input_required', 'completed'],
    );
    for (const s of steps) {
      assert.equal(s.name, 'execute_tool deep_research');
      assert.equal(s.service, 'mcp-task-worker');
      assert.equal(s.parentSpanId, request.spanId, 'each step is a child of the request span');
      assert.deepEqual(s.links, [{ traceId, spanId: request.spanId }], 'and linked to it');
      assert.equal(s.attributes['mcp.task.id'], taskId);
    }
    // Polls and the answer: their own spans and traces (no traceparent sent), short, naming the task.
    const polled = rx.spans.filter((s) => s.name === 'tasks/get' && s.attributes['mcp.task.id'] === taskId);
    assert.ok(polled.length >= 10, `${polled.length} poll spans`);
    for (const p of polled) {
      assert.notEqual(p.traceId, traceId);
      assert.equal(p.parentSpanId, '');
      assert.ok(p.endNs - p.startNs < 1_000_000_000n, 'a poll span is short');
    }
    assert.equal(new Set(polled.map((p) => p.traceId)).size, polled.length, 'one trace per poll');
    const update = rx.spans.find((s) => s.name === 'tasks/update' && s.attributes['mcp.task.id'] === taskId);
    assert.ok(update && update.traceId !== traceId);
  });

  it('not sampled: nothing of the trace is recorded, on the gateway or the worker', async () => {
    const traceId = newTraceId();
    const created = await callTool(
      c.urls[1]!,
      'slow_echo',
      { seconds: 0.2, quiet: true },
      { meta: { traceparent: `00-${traceId}-${newSpanId()}-00` } },
    );
    const taskId = created.body.result!.taskId as string;
    await pollTask(roundRobin(c.urls), taskId, (t) => t.status === 'completed', 10_000);
    // A sampled marker request after it: once its spans arrived, the unsampled ones would have too.
    const marker = newTraceId();
    await callTool(
      c.urls[1]!,
      'slow_echo',
      { seconds: 0, quiet: true },
      { meta: { traceparent: `00-${marker}-${newSpanId()}-01` } },
    );
    await waitFor(
      () =>
        rx.spans.some((s) => s.traceId === marker && s.kind === CONSUMER) &&
        rx.spans.some((s) => s.traceId === marker && s.kind === SERVER),
      10_000,
      100,
      'the marker trace',
    );
    assert.deepEqual(
      rx.spans.filter((s) => s.traceId === traceId),
      [],
    );
    // Only the polls (their own traces, no traceparent sent) name the task.
    assert.deepEqual(
      rx.spans.filter((s) => s.attributes['mcp.task.id'] === taskId && s.name !== 'tasks/get'),
      [],
      'no request or step span of the unsampled task',
    );
  });

  it('the traceparent header is used without _meta; a malformed one starts a new trace and changes nothing else', async () => {
    const traceId = newTraceId();
    const parent = newSpanId();
    const viaHeader = await callTool(
      c.urls[0]!,
      'slow_echo',
      { seconds: 0, quiet: true },
      { headers: { traceparent: `00-${traceId}-${parent}-01` } },
    );
    const id1 = viaHeader.body.result!.taskId as string;
    await waitFor(
      () =>
        rx.spans.some((s) => s.traceId === traceId && s.kind === CONSUMER && s.attributes['mcp.task.id'] === id1) &&
        rx.spans.some((s) => s.traceId === traceId && s.kind === SERVER),
      10_000,
      100,
      'the request and worker spans in the header trace',
    );
    assert.equal(rx.spans.find((s) => s.traceId === traceId && s.kind === SERVER)?.parentSpanId, parent);

    const bad = await callTool(
      c.urls[0]!,
      'slow_echo',
      { seconds: 0, quiet: true },
      { meta: { traceparent: '00-not-a-trace-id-01', tracestate: 'x'.repeat(5000) } },
    );
    assert.equal(bad.body.result?.resultType, 'task', JSON.stringify(bad.body));
    const id2 = bad.body.result!.taskId as string;
    await pollTask(roundRobin(c.urls), id2, (t) => t.status === 'completed', 10_000);
    await waitFor(
      () =>
        rx.spans.some((s) => s.kind === CONSUMER && s.attributes['mcp.task.id'] === id2) &&
        rx.spans.some((s) => s.kind === SERVER && s.attributes['mcp.task.id'] === id2),
      10_000,
      100,
      'the request and worker spans of the malformed request',
    );
    const req = rx.spans.find((s) => s.kind === SERVER && s.attributes['mcp.task.id'] === id2)!;
    assert.equal(req.parentSpanId, '', 'a new trace');
    assert.equal(
      rx.spans.find((s) => s.kind === CONSUMER && s.attributes['mcp.task.id'] === id2)!.traceId,
      req.traceId,
    );
  });
});
