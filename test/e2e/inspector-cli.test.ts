// @needs redis
/**
 * A client nobody here wrote, as a user runs it: the MCP Inspector CLI
 * (`@modelcontextprotocol/inspector` 2.12.0 `--cli`, pinned in tools/inspector, run by
 * scripts/inspector.mjs on the Node 22 of tools/conformance with a temporary HOME), against two
 * gateways and two workers behind the per-request round-robin proxy, with API-key
 * authentication on (`--header "Authorization: Bearer …"`). Both protocol eras: the default
 * (`legacy`, `initialize` at 2025-11-25) and `--protocol-era modern` (`server/discover`,
 * 2026-07-28).
 *
 * What the Inspector does with tasks (its bundle, clients/cli/build/index.js): it takes its
 * `callToolStream` branch only for a tool whose `tools/list` entry says
 * `execution.taskSupport: "required"`. That field belongs to the 2025-11-25 tasks, which this
 * service does not offer (T-07); the SDK deletes it on the 2026 wire, and the Tasks extension
 * has no per-tool declaration (the server decides per request, T-02). So our `tools/list`
 * carries no `execution` in either era, and the test asserts that. In the modern era the
 * Inspector's ordinary `tools/call` still runs through `@modelcontextprotocol/ext-tasks` with
 * the extension declared ("allow" a task), so a task-only tool (`failing_job`) runs end to
 * end: CreateTaskResult, `tasks/get` polls on both gateways, the final result printed. In the
 * legacy era there are no tasks, so the same tool is answered with an `isError` result saying
 * why (a 2025 client cannot declare the 2026 extension, so `-32021` would tell it nothing it
 * can act on; apps/gateway/src/tools-call.ts), which the Inspector prints and exits 5 for.
 *
 * The first run installs tools/conformance and tools/inspector (`npm ci`, about 20 s).
 */
import { after, before, describe, it, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { ensureInstalled, runInspector, type InspectorRun } from '../../scripts/inspector.mjs';
import { startCluster, waitFor, type Cluster } from '../support/cluster.js';
import { getTask, TASKS } from '../support/mcp.js';
import { startRoundRobinProxy, type RoundRobinProxy } from '../support/round-robin-proxy.js';

const KEY = `inspector-${randomBytes(16).toString('hex')}`;
const BEARER = `Authorization: Bearer ${KEY}`;
/** The principal the gateways derive from the key (`key:<name>`, see the Authenticator). */
const PRINCIPAL = 'key:alice';

type Era = 'legacy' | 'modern';

/** One Inspector run plus what went through the proxy meanwhile. */
interface Seen extends InspectorRun {
  /** stdout parsed (`--format json` prints one object), or undefined when empty. */
  out?: { result?: Record<string, any> };
  /** stderr parsed when it is one JSON error envelope. */
  err?: { error?: { code: string; message: string } };
  wire: RoundRobinProxy['log'];
}

const parse = (s: string) => {
  const t = s.trim();
  if (!t) return undefined;
  try {
    return JSON.parse(t);
  } catch {
    return undefined;
  }
};

const textOf = (r: Record<string, any> | undefined) =>
  ((r?.content ?? []) as { type: string; text?: string }[])
    .filter((c) => c.type === 'text')
    .map((c) => c.text)
    .join('\n');

/** Human-readable summary of a run for assertion messages and diagnostics. */
const show = (r: Seen) =>
  `exit ${r.code} in ${r.ms} ms; stdout: ${r.stdout.trim().slice(0, 400) || '(empty)'}; stderr: ${r.stderr.trim().slice(0, 400) || '(empty)'}; wire: ${r.wire
    .map((e) => `${e.mcpMethod ?? e.method}→gw${e.upstream + 1}:${e.status}`)
    .join(' ')}`;

describe('MCP Inspector CLI 2.12.0 (both eras, bearer credential), 2 gateways + 2 workers behind a round-robin proxy', () => {
  let c: Cluster;
  let proxy: RoundRobinProxy;

  before(async () => {
    ensureInstalled({ log: (l) => process.stderr.write(`${l}\n`) });
    c = await startCluster({ gateways: 2, workers: 2, env: { AUTH_API_KEYS: `alice:${KEY}` } });
    proxy = await startRoundRobinProxy(c.urls, { capture: true }); // request bodies: which 2025 method each POST was
  });
  after(async () => {
    await proxy?.close();
    await c?.stop();
  });

  /** Runs `mcp-inspector --cli <proxy> --transport http [--protocol-era modern] --format json [bearer] ...args`. */
  async function inspect(
    t: TestContext,
    era: Era,
    args: string[],
    { auth = BEARER as string | null } = {},
  ): Promise<Seen> {
    const from = proxy.log.length;
    const r = await runInspector([
      proxy.url,
      '--transport',
      'http',
      ...(era === 'modern' ? ['--protocol-era', 'modern'] : []),
      '--format',
      'json',
      ...(auth ? ['--header', auth] : []),
      ...args,
    ]);
    const seen: Seen = { ...r, out: parse(r.stdout), err: parse(r.stderr), wire: proxy.log.slice(from) };
    t.diagnostic(`mcp-inspector --cli [${era}] ${args.join(' ')} → ${show(seen)}`);
    assert.equal(r.timedOut, false, `the Inspector hung: ${show(seen)}`);
    // The credential never shows up in what the client printed.
    assert.ok(!r.stdout.includes(KEY) && !r.stderr.includes(KEY), 'the API key appears in the Inspector output');
    return seen;
  }

  /** `task.created` lines the gateways logged for `tool` (both gateways). */
  const created = (tool: string) =>
    c.gateways.flatMap((g) => g.logs.filter((l) => l.msg === 'task.created' && l.tool === tool));

  it('without a credential (or with a wrong one) it stops with exit 3 auth_required, never an interactive login (--stored-auth-only)', async (t) => {
    const none = await inspect(t, 'legacy', ['--method', 'tools/list', '--stored-auth-only'], { auth: null });
    assert.equal(none.code, 3, show(none));
    assert.equal(none.err?.error?.code, 'auth_required', show(none));
    assert.equal(none.stdout.trim(), '');
    assert.ok(
      none.wire.some((e) => e.status === 401),
      show(none),
    );
    const wrong = await inspect(t, 'modern', ['--method', 'tools/list', '--stored-auth-only'], {
      auth: 'Authorization: Bearer not-a-key-of-this-service-000000',
    });
    assert.equal(wrong.code, 3, show(wrong));
    assert.equal(wrong.err?.error?.code, 'auth_required', show(wrong));
  });

  describe('legacy era (the default: initialize at 2025-11-25)', () => {
    it('initialize: 2025-11-25, no tasks offered (neither the 2025-11-25 capability nor the extension, T-07)', async (t) => {
      const r = await inspect(t, 'legacy', ['--method', 'initialize']);
      assert.equal(r.code, 0, show(r));
      assert.equal(r.out?.result?.protocolVersion, '2025-11-25', show(r));
      assert.equal(r.out?.result?.serverInfo?.name, 'mcp-task-service');
      // tools, plus logging, and the prompts, resources and completions of the conformance tool
      // set this cluster enables; no `tasks`, no `extensions`.
      assert.deepEqual(
        r.out?.result?.capabilities,
        { logging: {}, completions: {}, prompts: {}, resources: {}, tools: {} },
        show(r),
      );
      // initialize, notifications/initialized, then logging/setLevel: the Inspector sets its log
      // level on a legacy server that offers `logging` (its connect(), clients/cli/build/index.js).
      const posts = r.wire
        .filter((e) => e.method === 'POST')
        .map((e) => [(JSON.parse(e.body ?? '{}') as { method?: string }).method, e.status]);
      assert.deepEqual(
        posts,
        [
          ['initialize', 200],
          ['notifications/initialized', 202],
          ['logging/setLevel', 200],
        ],
        show(r),
      );
    });

    it('tools/list: every tool, no `execution` field (we offer no 2025-11-25 tasks, so none is declared)', async (t) => {
      const r = await inspect(t, 'legacy', ['--method', 'tools/list']);
      assert.equal(r.code, 0, show(r));
      const tools = r.out?.result?.tools as Record<string, any>[];
      const names = tools.map((t) => t.name);
      for (const n of [
        'task_status',
        'countdown',
        'deep_research',
        'share_report',
        'add',
        'failing_job',
        'slow_compute',
      ])
        assert.ok(names.includes(n), `${n} missing from ${names.join(', ')}`);
      for (const t of tools) {
        assert.ok(!('execution' in t), `${t.name} carries execution: ${JSON.stringify(t.execution)}`);
        assert.equal(t.inputSchema?.type, 'object', t.name);
      }
    });

    it('tools/call countdown {seconds: 2}: exit 0 and the result on the same request (synchronous lane, run by a worker as principal alice)', async (t) => {
      const before = created('countdown').length;
      const r = await inspect(t, 'legacy', [
        '--method',
        'tools/call',
        '--tool-name',
        'countdown',
        '--tool-arg',
        'seconds=2',
      ]);
      assert.equal(r.code, 0, show(r));
      assert.equal(textOf(r.out?.result), 'Countdown from 2 finished.', show(r));
      assert.equal(r.out?.result?.isError, undefined);
      assert.ok(!r.wire.some((e) => e.mcpMethod?.startsWith('tasks/')), show(r));
      // Log lines come through a pipe a loaded machine may deliver late: wait for this one.
      const mine = await waitFor(
        () => (created('countdown').length > before ? created('countdown').slice(before) : undefined),
        5000,
        50,
        'task.created',
      );
      assert.deepEqual(
        mine.map((l) => [l.principal, l.mode]),
        [[PRINCIPAL, 'sync']],
      );
    });

    it('tools/call failing_job (task-only): an isError result saying it runs only as a task for a 2026-07-28 client with the Tasks extension; exit 5, nothing runs (no tasks on the 2025 lane, T-07)', async (t) => {
      const r = await inspect(t, 'legacy', ['--method', 'tools/call', '--tool-name', 'failing_job']);
      assert.equal(r.code, 5, show(r));
      assert.equal(r.err?.error?.code, 'tool_is_error', show(r));
      assert.equal(r.out?.result?.isError, true, show(r));
      assert.equal(
        textOf(r.out?.result),
        'failing_job runs only as a task, which needs a client that speaks MCP 2026-07-28 with the Tasks extension.',
        show(r),
      );
      // An ordinary answer to the call (HTTP 200), not a JSON-RPC error, and nothing polled.
      const calls = r.wire.filter((e) => e.method === 'POST' && e.status !== 202);
      assert.ok(
        calls.every((e) => e.status === 200),
        show(r),
      );
      assert.ok(!r.wire.some((e) => e.mcpMethod?.startsWith('tasks/')), show(r));
      // Nothing was created on this lane (the modern-era tests create failing_job tasks meanwhile).
      assert.deepEqual(
        created('failing_job').filter((l) => l.mode !== 'task'),
        [],
        'no synchronous record for the refused call',
      );
    });
  });

  describe('modern era (--protocol-era modern: server/discover, 2026-07-28)', () => {
    it('initialize: 2026-07-28 with the Tasks extension offered', async (t) => {
      const r = await inspect(t, 'modern', ['--method', 'initialize']);
      assert.equal(r.code, 0, show(r));
      assert.equal(r.out?.result?.protocolVersion, '2026-07-28', show(r));
      assert.deepEqual(r.out?.result?.capabilities?.extensions, { [TASKS]: {} }, show(r));
      assert.equal(r.wire[0]?.mcpMethod, 'server/discover', show(r));
    });

    it('tools/list: every tool, no `execution` (deleted on the 2026 wire; the extension has no per-tool declaration, T-02)', async (t) => {
      const r = await inspect(t, 'modern', ['--method', 'tools/list']);
      assert.equal(r.code, 0, show(r));
      const tools = r.out?.result?.tools as Record<string, any>[];
      assert.ok(tools.some((t) => t.name === 'failing_job'));
      for (const t of tools) assert.ok(!('execution' in t), `${t.name} carries execution`);
      // Its own listing: the CLI lists twice (discover, list, list), on alternating gateways.
      const lists = r.wire.filter((e) => e.mcpMethod === 'tools/list');
      assert.ok(lists.length >= 1 && lists.every((e) => e.status === 200), show(r));
    });

    it('tools/call failing_job (taskSupport required) end to end: a task created as alice, tasks/get polled on both gateways, the isError result printed, exit 5 (T-02, T-14, T-42)', async (t) => {
      const before = created('failing_job').length;
      const r = await inspect(t, 'modern', ['--method', 'tools/call', '--tool-name', 'failing_job']);
      assert.equal(r.code, 5, `exit 5 = the tool returned isError: ${show(r)}`);
      assert.equal(r.out?.result?.isError, true, show(r));
      assert.equal(r.out?.result?.resultType, 'complete');
      assert.equal(textOf(r.out?.result), 'failing_job: simulated tool failure');
      assert.equal(r.err?.error?.code, 'tool_is_error', show(r));
      // The server made it a task for alice (the request declared the extension), and the
      // Inspector polled it: tools/call, then tasks/get with Mcp-Name = taskId, on both gateways.
      const mine = await waitFor(
        () => (created('failing_job').length > before ? created('failing_job').slice(before) : undefined),
        5000,
        50,
        'task.created',
      );
      assert.deepEqual(
        mine.map((l) => [l.principal, l.mode]),
        [[PRINCIPAL, 'task']],
      );
      const taskId = mine[0]!.taskId as string;
      const calls = r.wire.filter((e) => e.mcpMethod === 'tools/call');
      const gets = r.wire.filter((e) => e.mcpMethod === 'tasks/get');
      assert.equal(calls.length, 1, show(r));
      assert.ok(gets.length >= 2, `expected several tasks/get: ${show(r)}`);
      assert.ok(r.wire.indexOf(calls[0]!) < r.wire.indexOf(gets[0]!));
      for (const g of gets) {
        assert.equal(g.status, 200);
        assert.equal(g.mcpName, taskId);
      }
      assert.equal(new Set(gets.map((g) => g.upstream)).size, 2, 'polls reached both gateways');
      assert.ok(!r.wire.some((e) => e.mcpMethod === 'tasks/cancel' || e.mcpMethod === 'tasks/update'), show(r));
      // The record agrees: completed with the isError result, readable by alice only.
      const rec = await getTask(c.urls[0]!, taskId, { token: KEY });
      assert.equal(rec.body.result?.status, 'completed', JSON.stringify(rec.body));
      assert.equal(rec.body.result?.result?.isError, true);
    });

    it('tools/call countdown {seconds: 2} (taskSupport optional): a task too, polled to completed, exit 0', async (t) => {
      const r = await inspect(t, 'modern', [
        '--method',
        'tools/call',
        '--tool-name',
        'countdown',
        '--tool-args-json',
        '{"seconds":2}',
      ]);
      assert.equal(r.code, 0, show(r));
      assert.equal(textOf(r.out?.result), 'Countdown from 2 finished.', show(r));
      const gets = r.wire.filter((e) => e.mcpMethod === 'tasks/get');
      assert.ok(gets.length >= 2, show(r));
      // The task it polled (Mcp-Name = taskId) was created as alice's task. Found by its id: the
      // gateways' log lines come through a pipe that a loaded machine may deliver late.
      const taskId = gets[0]!.mcpName!;
      const line = await waitFor(
        () => created('countdown').find((l) => l.taskId === taskId),
        5000,
        50,
        `task.created for ${taskId}`,
      );
      assert.deepEqual([line.principal, line.mode], [PRINCIPAL, 'task']);
    });

    it('tools/call test_tool_with_task (task-only, asks first): exit 1, -32021 for elicitation, which the CLI never declares; nothing created', async (t) => {
      const r = await inspect(t, 'modern', ['--method', 'tools/call', '--tool-name', 'test_tool_with_task']);
      assert.equal(r.code, 1, show(r));
      assert.equal(
        r.err?.error?.message,
        'Missing required client capability: test_tool_with_task needs elicitation',
        show(r),
      );
      assert.equal(created('test_tool_with_task').length, 0);
    });
  });
});
