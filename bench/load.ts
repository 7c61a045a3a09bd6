/**
 * The benchmark's load generator (issue 8 §5): a child process of bench/run.ts, so the load
 * never shares an event loop with the orchestrator or the servers it measures. It runs
 * autocannon (programmatic API) once per IPC message and answers with a summary.
 *
 * Message in:  `{ id, spec: LoadSpec }`
 * Message out: `{ id, result: LoadResult }` or `{ id, error: string }`
 * Every response body is checked (`verifyBody`): a JSON-RPC error object, or a body without a
 * `result`, counts as a mismatch; the orchestrator fails the figure on any mismatch, non-2xx
 * answer or connection error, so a fast error never passes for a fast answer.
 */
import autocannon from 'autocannon';

/** One autocannon run. Bodies are JSON-RPC requests; headers are sent as given. */
export interface LoadSpec {
  url: string;
  connections: number;
  /** Seconds; ignored when `amount` is set. */
  duration?: number;
  /** Total requests, then stop. */
  amount?: number;
  /** Requests sent in turn on each connection. */
  requests: { headers: Record<string, string>; body: string }[];
  /**
   * Task ids to cycle through: each request's `params.taskId` (and `Mcp-Name`) is replaced by
   * the next id (the "10,000 tasks polled" figure).
   */
  taskIds?: string[];
}

/** What a run measured. Latencies in ms (autocannon's histogram: whole ms). */
export interface LoadResult {
  rps: number;
  total: number;
  p50: number;
  p99: number;
  errors: number;
  timeouts: number;
  non2xx: number;
  mismatches: number;
  durationS: number;
}

const verifyBody = (body: unknown) => {
  const s = String(body);
  return s.includes('"result"') && !s.includes('"error":{');
};

async function run(spec: LoadSpec): Promise<LoadResult> {
  let next = 0;
  const requests = spec.requests.map((r) => {
    // Built once, not per request: the generator's CPU goes to sending.
    const variants = (spec.taskIds ?? []).map((id) => {
      const body = JSON.parse(r.body) as { params: { taskId: string } };
      body.params.taskId = id;
      return { body: JSON.stringify(body), headers: { ...r.headers, 'mcp-name': id } };
    });
    return {
      method: 'POST' as const,
      headers: r.headers,
      body: r.body,
      ...(variants.length
        ? { setupRequest: (req: autocannon.Request) => ({ ...req, ...variants[next++ % variants.length]! }) }
        : {}),
    };
  });
  const opts: autocannon.Options = {
    url: spec.url,
    connections: spec.connections,
    requests,
    verifyBody,
    timeout: 30,
    ...(spec.amount ? { amount: spec.amount } : { duration: spec.duration ?? 5 }),
  };
  const r = await autocannon(opts);
  const total = r['2xx'] + r.non2xx;
  return {
    rps: Math.round(total / r.duration),
    total,
    p50: r.latency.p50,
    p99: r.latency.p99,
    errors: r.errors,
    timeouts: r.timeouts,
    non2xx: r.non2xx,
    mismatches: r.mismatches,
    durationS: r.duration,
  };
}

process.on('message', (m: { id: number; spec: LoadSpec }) => {
  run(m.spec).then(
    (result) => process.send!({ id: m.id, result }),
    (e: Error) => process.send!({ id: m.id, error: e.message }),
  );
});
process.on('disconnect', () => process.exit(0));
process.send!({ ready: true });
