// @needs redis
/**
 * The official `@modelcontextprotocol/client` 2.4.0 on the 2026-07-28 wire
 * (`versionNegotiation: { mode: { pin: '2026-07-28' } }`), with an API key sent as
 * `Authorization: Bearer …` through the transport's `requestInit`, against two gateways and two
 * workers behind the per-request round-robin proxy (every request of one client may land on
 * the other replica). The 2025 era of the same client is in legacy-client.test.ts.
 *
 * Without the Tasks extension declared: tools/list, a synchronous worker-run call whose
 * `notifications/progress` reach `onprogress` (P-01), and MRTR answered by the client's
 * automatic input handling (a registered `elicitation/create` handler; the retry carries the
 * signed `requestState` to the other gateway, M-05). With the extension declared the client
 * cannot decode a CreateTaskResult: it throws `Unsupported result type 'task'` (clients.md,
 * conformance.md §7). That failure is asserted exactly, so an SDK release that handles tasks
 * makes this test fail and gets noticed.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import {
  Client,
  SdkError,
  SdkErrorCode,
  SdkHttpError,
  StreamableHTTPClientTransport,
} from '@modelcontextprotocol/client';
import { startCluster, waitFor, type Cluster } from '../support/cluster.js';
import { getTask, TASKS } from '../support/mcp.js';
import { startRoundRobinProxy, type RoundRobinProxy } from '../support/round-robin-proxy.js';

const KEY = `modern-${randomBytes(16).toString('hex')}`;
/** The principal the gateways derive from the key (`key:<name>`). */
const PRINCIPAL = 'key:alice';

/** One HTTP exchange the client made (recorded by its `fetch`). */
interface Exchange {
  httpMethod: string;
  rpcMethod?: string;
  authorization: string | null;
  status: number;
}

const textOf = (r: { content?: unknown }) =>
  ((r.content ?? []) as { type: string; text?: string }[])
    .filter((c) => c.type === 'text')
    .map((c) => c.text)
    .join('\n');

describe('@modelcontextprotocol/client 2.4.0 pinned to 2026-07-28 with a bearer key, 2 gateways + 2 workers behind a round-robin proxy', () => {
  let c: Cluster;
  let proxy: RoundRobinProxy;
  const clients: Client[] = [];

  before(async () => {
    c = await startCluster({ gateways: 2, workers: 2, env: { AUTH_API_KEYS: `alice:${KEY}` } });
    proxy = await startRoundRobinProxy(c.urls);
  });
  after(async () => {
    await Promise.allSettled(clients.map((cl) => cl.close()));
    await proxy?.close();
    await c?.stop();
  });

  /** A pinned 2026 client over the proxy, recording every exchange; `token: null` sends no credential. */
  async function connectModern(capabilities: Record<string, unknown>, { token = KEY as string | null } = {}) {
    const exchanges: Exchange[] = [];
    const recordingFetch = async (input: string | URL, init?: RequestInit): Promise<Response> => {
      let rpcMethod: string | undefined;
      if (typeof init?.body === 'string') {
        try {
          rpcMethod = (JSON.parse(init.body) as { method?: string }).method;
        } catch {
          /* not JSON */
        }
      }
      const res = await fetch(input, init);
      exchanges.push({
        httpMethod: init?.method ?? 'GET',
        ...(rpcMethod ? { rpcMethod } : {}),
        authorization: new Headers(init?.headers).get('authorization'),
        status: res.status,
      });
      return res;
    };
    const client = new Client(
      { name: 'modern-sdk-client', version: '2.4.0' },
      { capabilities: capabilities as never, versionNegotiation: { mode: { pin: '2026-07-28' } } },
    );
    const transport = new StreamableHTTPClientTransport(new URL(proxy.url), {
      fetch: recordingFetch,
      ...(token === null ? {} : { requestInit: { headers: { Authorization: `Bearer ${token}` } } }),
    });
    await client.connect(transport);
    clients.push(client);
    return { client, exchanges };
  }

  /** `task.created` lines both gateways logged for `tool`. */
  const created = (tool: string) =>
    c.gateways.flatMap((g) => g.logs.filter((l) => l.msg === 'task.created' && l.tool === tool));
  /**
   * The `task.created` lines of `tool` after the first `before`, once there is at least one: a
   * gateway's stdout reaches this process through a pipe and can trail the HTTP answer on a
   * loaded machine (seen with npm test run twice at once, issue 9 §8).
   */
  const createdSince = (tool: string, before: number) =>
    waitFor(
      () => created(tool).length > before && created(tool).slice(before),
      10_000,
      20,
      `the gateway's task.created line for ${tool}`,
    );

  it('connect() probes server/discover and settles on 2026-07-28 with the Tasks extension offered; tools/list on both gateways, the key on every request', async () => {
    const { client, exchanges } = await connectModern({});
    assert.equal(client.getProtocolEra(), 'modern');
    assert.equal(client.getNegotiatedProtocolVersion(), '2026-07-28');
    assert.deepEqual((client.getServerCapabilities() as Record<string, any>).extensions, { [TASKS]: {} });
    assert.equal(exchanges[0]?.rpcMethod, 'server/discover');
    const from = proxy.log.length;
    const seen = new Set<number>();
    for (let i = 0; i < 2; i++) {
      const { tools } = await client.listTools(undefined, { cacheMode: 'bypass' });
      const names = tools.map((x) => x.name);
      for (const n of ['task_status', 'countdown', 'deep_research', 'share_report', 'add'])
        assert.ok(names.includes(n), `${n} missing from ${names.join(', ')}`);
      for (const tool of tools) assert.ok(!('execution' in tool), `${tool.name} carries execution`);
    }
    for (const e of proxy.log.slice(from)) if (e.mcpMethod === 'tools/list') seen.add(e.upstream);
    assert.equal(seen.size, 2, 'the two tools/list calls were served by the two gateways');
    for (const e of exchanges) {
      assert.equal(e.authorization, `Bearer ${KEY}`, `${e.rpcMethod}: no credential sent`);
      assert.equal(e.status, 200, JSON.stringify(e));
    }
  });

  it('without the header: connect() succeeds (server/discover is public) but tools/list is refused, SdkHttpError 401 (no authProvider, so no OAuth attempt)', async () => {
    const { client, exchanges } = await connectModern({}, { token: null });
    await assert.rejects(client.listTools(undefined, { cacheMode: 'bypass' }), (e: unknown) => {
      assert.ok(e instanceof SdkHttpError, `${(e as Error).name}: ${(e as Error).message}`);
      assert.equal(e.status, 401);
      assert.match(e.message, /Unauthorized: authentication required/);
      return true;
    });
    assert.deepEqual(
      exchanges.map((e) => [e.rpcMethod, e.status]),
      [
        ['server/discover', 200],
        ['tools/list', 401],
      ],
    );
  });

  it('callTool countdown({seconds: 3}) without the extension: synchronous, onprogress gets 1, 2, 3 of 3 while it runs, then the result (P-01, D1)', async () => {
    const { client } = await connectModern({});
    const before = created('countdown').length;
    const progress: { progress: number; total?: number; at: number }[] = [];
    const t0 = Date.now();
    const result = await client.callTool(
      { name: 'countdown', arguments: { seconds: 3 } },
      {
        onprogress: (p) => progress.push({ ...(p as { progress: number; total?: number }), at: Date.now() }),
        timeout: 20_000,
      },
    );
    const resultAt = Date.now();
    assert.ok(!result.isError, JSON.stringify(result));
    assert.equal(textOf(result), 'Countdown from 3 finished.');
    assert.deepEqual(
      progress.map((p) => [p.progress, p.total]),
      [
        [1, 3],
        [2, 3],
        [3, 3],
      ],
      JSON.stringify(progress),
    );
    // Streamed while the worker ran (about one a second), not flushed with the result.
    assert.ok(
      resultAt - progress[0]!.at >= 1500,
      `first progress only ${resultAt - progress[0]!.at} ms before the result`,
    );
    assert.ok(progress[0]!.at - t0 < 2500, `first progress after ${progress[0]!.at - t0} ms`);
    assert.deepEqual(
      (await createdSince('countdown', before)).map((l) => [l.principal, l.mode]),
      [[PRINCIPAL, 'sync']],
    );
  });

  it('MRTR, share_report (gateway inline): input_required answered by the elicitation/create handler, the retry on the other gateway completes (M-05)', async () => {
    const { client, exchanges } = await connectModern({ elicitation: { form: {} } });
    const asked: Record<string, any>[] = [];
    client.setRequestHandler('elicitation/create', async (req) => {
      asked.push(req.params as Record<string, any>);
      return { action: 'accept', content: { notify: true } };
    });
    const from = proxy.log.length;
    const result = await client.callTool({ name: 'share_report', arguments: { channel: '#sdk' } }, { timeout: 10_000 });
    assert.ok(!result.isError, JSON.stringify(result));
    assert.match(textOf(result), /#sdk/);
    assert.match(textOf(result), /notified/);
    assert.equal(asked.length, 1, JSON.stringify(asked));
    assert.equal(asked[0]!.message, 'Share to #sdk?');
    assert.equal(asked[0]!.mode, 'form');
    const calls = proxy.log.slice(from).filter((e) => e.mcpMethod === 'tools/call');
    assert.equal(calls.length, 2, 'round 1 (input_required), round 2 (answers + requestState)');
    assert.notEqual(calls[0]!.upstream, calls[1]!.upstream, 'the retry went to the other gateway');
    assert.ok(
      exchanges
        .filter((e) => e.rpcMethod === 'tools/call')
        .every((e) => e.status === 200 && e.authorization === `Bearer ${KEY}`),
    );
  });

  it('MRTR, deep_research (worker, synchronous): progress from both phases, the audience asked once and answered by the handler, one task record for the whole call, report for the team', async () => {
    const { client } = await connectModern({ elicitation: { form: {} } });
    const asked: Record<string, any>[] = [];
    client.setRequestHandler('elicitation/create', async (req) => {
      asked.push(req.params as Record<string, any>);
      return { action: 'accept', content: { audience: 'team' } };
    });
    const before = created('deep_research').length;
    const progress: { progress: number; total?: number; message?: string }[] = [];
    const from = proxy.log.length;
    const result = await client.callTool(
      { name: 'deep_research', arguments: { topic: 'tidal power' } },
      {
        onprogress: (p) => progress.push(p as { progress: number; total?: number; message?: string }),
        timeout: 30_000,
      },
    );
    assert.ok(!result.isError, JSON.stringify(result));
    assert.match(textOf(result), /tidal power/);
    assert.match(textOf(result), /team/);
    assert.doesNotMatch(textOf(result), /company/);
    assert.equal(asked.length, 1);
    assert.match(String(asked[0]!.message), /tidal power/);
    assert.deepEqual(
      asked[0]!.requestedSchema?.properties?.audience?.oneOf?.map((o: { const: string }) => o.const),
      ['team', 'company'],
    );
    // The server's progress (total 100) from phase 1 (before the question) and phase 2 (after),
    // each phase strictly increasing; the SDK adds its own "Fulfilling input required" note.
    const server = progress.filter((p) => p.total === 100).map((p) => p.progress);
    assert.ok(server.some((p) => p <= 50) && server.some((p) => p > 50), JSON.stringify(progress));
    for (let i = 1; i < server.length; i++) assert.ok(server[i]! > server[i - 1]!, JSON.stringify(progress));
    assert.ok(
      progress.some((p) => p.total === undefined && /input required/i.test(p.message ?? '')),
      JSON.stringify(progress),
    );
    const calls = proxy.log.slice(from).filter((e) => e.mcpMethod === 'tools/call');
    assert.equal(calls.length, 2);
    assert.notEqual(calls[0]!.upstream, calls[1]!.upstream, 'the retry went to the other gateway');
    // One synchronous task record behind both rounds (the retry resumed it, no second task).
    assert.deepEqual(
      (await createdSince('deep_research', before)).map((l) => [l.principal, l.mode]),
      [[PRINCIPAL, 'sync']],
    );
  });

  it("with the Tasks extension declared: a task-eligible call throws SdkError UNSUPPORTED_RESULT_TYPE \"Unsupported result type 'task' for tools/call\" (the SDK's limit; the task itself runs to completed); a forbidden tool still answers", async () => {
    const { client } = await connectModern({ elicitation: { form: {} }, extensions: { [TASKS]: {} } });
    const before = created('countdown').length;
    await assert.rejects(
      client.callTool({ name: 'countdown', arguments: { seconds: 1 } }, { timeout: 10_000 }),
      (e: unknown) => {
        assert.ok(e instanceof SdkError, `${(e as Error).name}: ${(e as Error).message}`);
        assert.equal(e.code, SdkErrorCode.UnsupportedResultType);
        assert.equal(e.message, "Unsupported result type 'task' for tools/call");
        assert.deepEqual(e.data, { resultType: 'task', method: 'tools/call' });
        return true;
      },
    );
    // The server did what the declaration asked: a task for alice. The client lost its id, so
    // the task runs on, unobserved, to completed (and expires with its ttlMs).
    const mine = await createdSince('countdown', before);
    assert.deepEqual(
      mine.map((l) => [l.principal, l.mode]),
      [[PRINCIPAL, 'task']],
    );
    const taskId = mine[0]!.taskId as string;
    const done = await waitFor(
      async () => {
        const r = await getTask(c.urls[1]!, taskId, { token: KEY });
        return r.body.result?.status === 'completed' ? r.body.result : undefined;
      },
      10_000,
      200,
      'the orphaned task to complete',
    );
    assert.equal(textOf(done.result), 'Countdown from 1 finished.');
    // A tool that never becomes a task is unaffected by the declaration.
    const add = await client.callTool({ name: 'add', arguments: { a: 2, b: 3 } });
    assert.equal(textOf(add), '2 + 3 = 5');
    assert.deepEqual(add.structuredContent, { summary: '2 + 3 = 5', sum: 5 }); // D11: the model reads this
  });
});
