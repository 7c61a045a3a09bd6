// @needs redis
/**
 * The real Claude Code CLI (2.1.332, pinned in tools/claude-code/) as a client, in print mode
 * (`claude -p`), against two gateways and two workers behind the no-affinity round-robin proxy
 * (issue 7 §4). The model is the scripted loopback stub (support/anthropic-stub.ts); every
 * scenario asserts what the model received: the `tool_result` of the next Messages request.
 *
 * What print mode is (clients.md §0): it never declares the Tasks extension, so every call takes
 * the synchronous lane (§0.3); questions are answered `cancel` at once (§0.7) unless an
 * `Elicitation` hook answers them; MCP tools are deferred behind the `ToolSearch` tool, so each
 * script first loads the tool with `select:mcp__tasks__<tool>` (§0.12); the model sees only
 * `structuredContent` when a result has it (§0.6) — the assertions below state what the model
 * must read (the report, the hand-off's instruction), whatever shape the result takes.
 *
 * Authentication is real (issue 10: "Claude Code's HTTP connector sends Authorization from
 * .mcp.json headers … a bearer API key through two gateways"): the cluster has
 * `AUTH_API_KEYS=alice:<token>,bob:<other>` (so no anonymous access, even on loopback) and the
 * CLI gets the token only as MCP_TASKS_TOKEN, which Claude Code expands into
 * `Authorization: Bearer …` from the `.mcp.json` header `Bearer ${MCP_TASKS_TOKEN}`. Every
 * request must arrive with it, the gateways must serve it as principal `key:alice` (the task a
 * call hands off is owned by `key:alice`), and (e) a wrong token must leave Claude Code without
 * the server's tools: `server/discover` needs no credentials (200), `tools/list` answers 401
 * `invalid_token`, and Claude Code sends nothing more (no retry, no OAuth discovery: the
 * challenge names no `resource_metadata` without PUBLIC_URL); it lists the server as
 * "Needs authentication" and the model's tool search finds no tool of it.
 *
 * Budget profile: SYNC_BUDGET_MS_BY_TOOL = {"countdown":5000}: countdown(3) answers within it,
 * countdown(9) is handed off at 5 s and followed with task_status (design D1, case B-09d).
 * Takes about 30 s here (cluster start, seven CLI runs of 1–10 s each).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { startCluster, type Cluster } from '../support/cluster.js';
import {
  capturedMessages,
  startRoundRobinProxy,
  type ProxyLogEntry,
  type RoundRobinProxy,
} from '../support/round-robin-proxy.js';
import {
  toolExchanges,
  toolResults,
  toolResultText,
  type MessagesRequest,
  type Step,
  type ToolExchange,
  type Turn,
} from '../support/anthropic-stub.js';
import {
  claudeCodeBinary,
  CLAUDE_CODE_VERSION,
  claudeMcpList,
  describeWire,
  runClaudePrint,
  SERVER_NAME,
  type ElicitationAnswer,
  type PrintRun,
} from '../support/claude-code.js';
import { getTask, rpc, TASKS } from '../support/mcp.js';

const BUDGET_MS = 5000;
const TOKEN = `mcp-test-${randomBytes(16).toString('hex')}`;
/** Another principal's key (bob): a task of alice's must be unknown to it. */
const OTHER_TOKEN = `mcp-test-${randomBytes(16).toString('hex')}`;
const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/;

const mcpTool = (name: string) => `mcp__${SERVER_NAME}__${name}`;
/** The model loads deferred MCP tools through Claude Code's tool search (clients.md §0.12). */
const load = (...names: string[]): Turn => ({
  toolUse: { name: 'ToolSearch', input: { query: `select:${names.map(mcpTool).join(',')}`, max_results: 5 } },
});
const use = (name: string, input: Record<string, unknown>, delayMs?: number): Turn => ({
  toolUse: { name: mcpTool(name), input },
  ...(delayMs ? { delayMs } : {}),
});

/** The text of the last tool_result in a request (what the model just read). */
function lastResultText(req: MessagesRequest): string {
  const r = toolResults(req).at(-1);
  return r ? toolResultText(r) : '';
}

interface Scenario {
  run: PrintRun;
  /** The requests Claude Code sent to the gateways (through the proxy) during the run. */
  wire: ProxyLogEntry[];
  exchanges: ToolExchange[];
}

/** A readable account of a run, for assertion messages and the test log. */
function describeRun(s: Scenario): string {
  const lines = [
    `exit ${s.run.code}${s.run.timedOut ? ' (timed out)' : ''} after ${s.run.durationMs} ms; stderr: ${s.run.stderr.slice(0, 500) || '(none)'}`,
  ];
  for (const x of s.exchanges)
    lines.push(
      `model → ${x.name} ${JSON.stringify(x.input)}\n  model read${x.isError ? ' (is_error)' : ''}: ${x.text === undefined ? '(no tool_result)' : JSON.stringify(x.text).slice(0, 1500)}`,
    );
  lines.push('gateway requests:', ...describeWire(s.wire, TOKEN));
  return lines.join('\n');
}

describe(`Claude Code ${CLAUDE_CODE_VERSION} in print mode (-p) against 2 gateways + 2 workers behind a no-affinity proxy`, () => {
  let c: Cluster;
  let proxy: RoundRobinProxy;

  before(async () => {
    await claudeCodeBinary(); // installs tools/claude-code on first use
    c = await startCluster({
      gateways: 2,
      workers: 2,
      env: {
        MCP_TOOLSETS: 'demo',
        SYNC_BUDGET_MS_BY_TOOL: JSON.stringify({ countdown: BUDGET_MS }),
        AUTH_API_KEYS: `alice:${TOKEN},bob:${OTHER_TOKEN}`,
      },
    });
    proxy = await startRoundRobinProxy(c.urls, { capture: true });
  });

  it('the cluster enforces the API keys on both gateways (no anonymous access on loopback once keys are configured)', async () => {
    for (const url of c.urls) {
      const anonymous = await rpc(url, 'tools/list', {});
      assert.equal(anonymous.status, 401, JSON.stringify(anonymous.body));
      const alice = await rpc(url, 'tools/list', {}, { token: TOKEN });
      assert.equal(alice.status, 200, JSON.stringify(alice.body));
    }
  });
  after(async () => {
    await proxy?.close();
    await c?.stop();
  });

  /** Runs the CLI with a script and returns it with the gateway requests of its time window. */
  async function scenario(
    prompt: string,
    script: Step[],
    o: { elicitation?: ElicitationAnswer; timeoutMs?: number; token?: string } = {},
  ): Promise<Scenario> {
    const from = proxy.log.length;
    const run = await runClaudePrint({
      prompt,
      script,
      mcpUrl: proxy.url,
      token: o.token ?? TOKEN,
      timeoutMs: o.timeoutMs ?? 90_000,
      ...(o.elicitation ? { elicitation: o.elicitation } : {}),
    });
    const s = { run, wire: proxy.log.slice(from), exchanges: toolExchanges(run.mainRequests) };
    console.log(`--- claude -p "${prompt}"\n${describeRun(s)}`);
    return s;
  }

  /** The CLI ran the whole script and ended normally; the wire is what Claude Code always sends. */
  function assertCompleted(s: Scenario, tool: string, loaded: string[] = [tool]): ToolExchange {
    const why = describeRun(s);
    assert.equal(s.run.timedOut, false, why);
    assert.equal(s.run.code, 0, why);
    assert.deepEqual(s.run.scriptErrors, [], why);
    assert.equal(s.run.result?.is_error, false, why);
    assert.deepEqual(s.run.result?.permission_denials, [], `no permission prompt in print mode: ${why}`);
    assert.deepEqual(s.run.offLoopback, [], `nothing tried off loopback: ${why}`);
    // Tool search loaded the deferred MCP tool: the next request offers it to the model.
    const search = s.exchanges[0]!;
    assert.equal(search.name, 'ToolSearch', why);
    assert.deepEqual(
      search.result?.content,
      loaded.map((t) => ({ type: 'tool_reference', tool_name: mcpTool(t) })),
      why,
    );
    for (const t of loaded)
      assert.ok(
        s.run.mainRequests[1]?.body?.tools?.some((x) => x.name === mcpTool(t)),
        why,
      );
    const call = s.exchanges.find((x) => x.name === mcpTool(tool));
    assert.ok(call?.result, `the model received the ${tool} result: ${why}`);
    // The gateways' side: a fresh process handshakes (server/discover, tools/list; clients.md
    // §0.1), every request carries the 2026-07-28 headers, the bearer token expanded from the
    // environment, and never the Tasks extension (§0.3: print mode takes the synchronous lane).
    const methods = s.wire.map((e) => e.mcpMethod);
    assert.deepEqual(methods.slice(0, 2), ['server/discover', 'tools/list'], why);
    assert.ok(!methods.includes('initialize'), why);
    for (const e of s.wire) {
      assert.equal(e.method, 'POST', why);
      assert.equal(e.status, 200, why);
      assert.equal(
        e.headers?.authorization,
        `Bearer ${TOKEN}`,
        `Authorization from .mcp.json with \${MCP_TASKS_TOKEN} expanded: ${why}`,
      );
      assert.equal(e.headers?.['mcp-protocol-version'], '2026-07-28');
      assert.match(
        String(e.headers?.['user-agent']),
        new RegExp(`^claude-code/${CLAUDE_CODE_VERSION.replace(/\./g, '\\.')} \\(sdk-cli\\)`),
      );
      const body = JSON.parse(e.body!);
      assert.equal(e.headers?.['mcp-method'], body.method);
      const caps = body.params._meta['io.modelcontextprotocol/clientCapabilities'];
      assert.deepEqual(caps.elicitation, { form: {}, url: {} }, why);
      assert.equal(caps.extensions?.[TASKS], undefined, `print mode does not declare the Tasks extension: ${why}`);
      if (body.method === 'tools/call') {
        assert.equal(e.headers?.['mcp-name'], body.params.name);
        assert.equal(body.params._meta.progressToken, body.id, 'progressToken = the JSON-RPC id (clients.md §0.4)');
        const ids = s.exchanges.filter((x) => x.name === mcpTool(body.params.name)).map((x) => x.id);
        assert.ok(
          ids.includes(body.params._meta['claudecode/toolUseId']),
          `claudecode/toolUseId is the model's tool_use id: ${why}`,
        );
      }
    }
    // Both gateways served this run (no affinity).
    assert.deepEqual(new Set(s.wire.map((e) => e.upstream)), new Set([0, 1]), why);
    return call;
  }

  describe('(a) countdown {seconds: 3}: answered within its budget, with progress', () => {
    let s: Scenario;
    before(async () => {
      s = await scenario('Count down from 3.', [
        load('countdown'),
        use('countdown', { seconds: 3 }),
        { text: 'The countdown finished.' },
      ]);
    });

    it('the CLI ran the script; the model received "Countdown from 3 finished." in the next request', () => {
      const call = assertCompleted(s, 'countdown');
      assert.equal(call.text, 'Countdown from 3 finished.', describeRun(s));
      assert.equal(call.isError, false);
      assert.ok(s.run.durationMs >= 3000, `the tool ran its 3 s: ${s.run.durationMs} ms`);
    });

    it("the gateway streamed progress 1..3 of 3 on the call's progressToken, then the result", () => {
      const calls = s.wire.filter((e) => e.mcpMethod === 'tools/call');
      assert.equal(calls.length, 1, describeRun(s));
      const token = JSON.parse(calls[0]!.body!).params._meta.progressToken;
      const msgs = capturedMessages(calls[0]!);
      const progress = msgs.filter((m) => m.method === 'notifications/progress').map((m) => m.params);
      assert.deepEqual(
        progress.map((p) => [p.progressToken, p.progress, p.total]),
        [
          [token, 1, 3],
          [token, 2, 3],
          [token, 3, 3],
        ],
        calls[0]!.response,
      );
      assert.equal(msgs.at(-1)?.result?.content?.[0]?.text, 'Countdown from 3 finished.');
    });
  });

  describe('(b) deep_research: the question answered `cancel` (print mode, clients.md §0.7)', () => {
    let s: Scenario;
    before(async () => {
      s = await scenario('Research solar sails.', [
        load('deep_research'),
        use('deep_research', { topic: 'solar sails' }),
        { text: 'It was cancelled.' },
      ]);
    });

    it('one MRTR round: the retry carries inputResponses {action: "cancel"} and the echoed requestState', () => {
      assertCompleted(s, 'deep_research');
      const calls = s.wire.filter((e) => e.mcpMethod === 'tools/call').map((e) => ({ e, body: JSON.parse(e.body!) }));
      assert.equal(calls.length, 2, describeRun(s));
      const first = capturedMessages(calls[0]!.e).at(-1)!.result;
      assert.equal(first.resultType, 'input_required');
      const key = Object.keys(first.inputRequests)[0]!;
      assert.deepEqual(calls[1]!.body.params.inputResponses, { [key]: { action: 'cancel' } });
      assert.equal(calls[1]!.body.params.requestState, first.requestState, 'echoed byte for byte (§0.8)');
      assert.notEqual(calls[1]!.body.id, calls[0]!.body.id);
    });

    it('the model is told the research was cancelled because no audience was chosen (an error result)', () => {
      const call = s.exchanges.find((x) => x.name === mcpTool('deep_research'));
      assert.ok(call?.text, describeRun(s));
      assert.match(call.text, /cancel/i, describeRun(s));
      assert.match(call.text, /audience/i, describeRun(s));
      assert.equal(call.isError, true, describeRun(s));
    });
  });

  describe('(b2) deep_research: the question answered "team" by an Elicitation hook', () => {
    let s: Scenario;
    before(async () => {
      s = await scenario(
        'Research solar sails for my team.',
        [load('deep_research'), use('deep_research', { topic: 'solar sails' }), { text: 'Here is the report.' }],
        {
          elicitation: { action: 'accept', content: { audience: 'team' } },
        },
      );
    });

    it('the hook got the form question; the retry carried the accepted answer', () => {
      assertCompleted(s, 'deep_research');
      assert.equal(s.run.elicitations.length, 1, describeRun(s));
      const q = s.run.elicitations[0]!;
      assert.equal(q.mcp_server_name, SERVER_NAME);
      assert.equal(q.mode, 'form');
      assert.match(q.message, /solar sails/);
      assert.deepEqual(
        q.requested_schema.properties.audience.oneOf.map((o: { const: string }) => o.const),
        ['team', 'company'],
      );
      const retry = JSON.parse(s.wire.filter((e) => e.mcpMethod === 'tools/call')[1]!.body!).params;
      assert.deepEqual(Object.values(retry.inputResponses), [{ action: 'accept', content: { audience: 'team' } }]);
    });

    it('the model reads the report itself (topic, audience, summary), not only its metadata', () => {
      const call = s.exchanges.find((x) => x.name === mcpTool('deep_research'));
      assert.ok(call?.text !== undefined, describeRun(s));
      assert.equal(call.isError, false);
      assert.match(call.text, /solar sails/);
      assert.match(call.text, /team/);
      assert.match(
        call.text,
        /three sources agree on the main points of solar sails/,
        `the report's summary must reach the model; it read: ${JSON.stringify(call.text)}`,
      );
    });
  });

  describe('(c) share_report (MRTR in the gateway)', () => {
    it('answered `cancel`: the model is told it was not shared', async () => {
      const s = await scenario('Share the report to #research.', [
        load('share_report'),
        use('share_report', { channel: '#research' }),
        { text: 'Not shared.' },
      ]);
      const call = assertCompleted(s, 'share_report');
      const calls = s.wire.filter((e) => e.mcpMethod === 'tools/call');
      assert.equal(calls.length, 2, describeRun(s));
      assert.deepEqual(Object.values(JSON.parse(calls[1]!.body!).params.inputResponses), [{ action: 'cancel' }]);
      assert.match(call.text!, /not shared/i, describeRun(s));
      assert.match(call.text!, /#research/);
    });

    it('accepted with notify (Elicitation hook): the model is told it was shared to #research and the channel notified', async () => {
      const s = await scenario(
        'Share the report to #research and notify them.',
        [load('share_report'), use('share_report', { channel: '#research' }), { text: 'Shared.' }],
        {
          elicitation: { action: 'accept', content: { notify: true } },
        },
      );
      const call = assertCompleted(s, 'share_report');
      assert.equal(s.run.elicitations.length, 1, describeRun(s));
      assert.match(s.run.elicitations[0]!.message, /#research/);
      assert.equal(call.isError, false);
      assert.match(call.text!, /#research/, describeRun(s));
      assert.match(call.text!, /shared/i, describeRun(s));
      assert.doesNotMatch(call.text!, /not shared/i, describeRun(s));
      assert.match(call.text!, /notif/i, describeRun(s));
    });
  });

  describe(`(d) the budget hand-off: countdown {seconds: 9} with a ${BUDGET_MS} ms budget, then task_status until done`, () => {
    let s: Scenario;
    let taskId: string | undefined;
    const MAX_POLLS = 20;
    before(async () => {
      // After the hand-off the model calls task_status with the id it read, about once a
      // second (the stub holds each turn 1 s), until the result arrives.
      const poll: Step = (req) => {
        const last = lastResultText(req);
        if (taskId === undefined) taskId = UUID.exec(last)?.[0];
        if (!taskId) return { text: 'I could not find a task id.' };
        if (/Countdown from 9 finished/.test(last)) return { text: 'The countdown finished.' };
        return use('task_status', { taskId }, 1000);
      };
      s = await scenario(
        'Count down from 9.',
        [
          load('countdown', 'task_status'),
          use('countdown', { seconds: 9 }),
          ...Array.from({ length: MAX_POLLS }, () => poll),
        ],
        { timeoutMs: 60_000 },
      );
    });

    it('the CLI ran the loop to the end: the call handed off at the budget, task_status (on both gateways) returned the result to the model', () => {
      const call = assertCompleted(s, 'countdown', ['countdown', 'task_status']);
      assert.ok(taskId, `a task id in the hand-off: ${describeRun(s)}`);
      const handOff = s.wire.find((e) => e.mcpMethod === 'tools/call' && e.headers?.['mcp-name'] === 'countdown')!;
      const sent = capturedMessages(handOff).at(-1)!.result;
      assert.equal(sent.structuredContent?.taskId, taskId, handOff.response);
      const heldMs = handOff.endedAt! - handOff.at;
      assert.ok(heldMs >= BUDGET_MS && heldMs < 9000, `handed off at the budget: the call was held ${heldMs} ms`);
      assert.ok(call.text!.includes(taskId!), describeRun(s));
      const polls = s.exchanges.filter((x) => x.name === mcpTool('task_status'));
      assert.ok(polls.length >= 2, describeRun(s));
      assert.ok(polls.every((p) => p.input.taskId === taskId));
      assert.match(polls.at(-1)!.text!, /^Countdown from 9 finished\.$/, describeRun(s));
      assert.equal(polls.at(-1)!.isError, false);
      const served = new Set(s.wire.filter((e) => e.headers?.['mcp-name'] === 'task_status').map((e) => e.upstream));
      assert.deepEqual(served, new Set([0, 1]), 'task_status answered by both gateways');
      assert.equal(s.run.mainRequests.at(-1)?.served.kind, 'script');
    });

    it("the gateways served Claude Code as principal key:alice (its bearer): the handed-off task is alice's, unknown to bob", async () => {
      assert.ok(taskId, describeRun(s));
      assert.equal(await c.redis.hget(`${c.prefix}:{t:${taskId}}:task`, 'owner'), 'key:alice');
      for (const url of c.urls) {
        const mine = await getTask(url, taskId!, { token: TOKEN });
        assert.equal(mine.body.result?.status, 'completed', JSON.stringify(mine.body));
        const bobs = await getTask(url, taskId!, { token: OTHER_TOKEN });
        assert.equal(bobs.body.error?.code, -32602, JSON.stringify(bobs.body));
      }
    });

    it('the hand-off reaches the model as an instruction: the task id, that it continues in the background, and to call task_status', () => {
      const call = s.exchanges.find((x) => x.name === mcpTool('countdown'));
      const text = call?.text ?? '';
      assert.ok(taskId && text.includes(taskId), describeRun(s));
      assert.match(text, /task_status/, describeRun(s));
      assert.match(
        text,
        /in the background|still running/i,
        `the model must read the hand-off sentence; it read: ${JSON.stringify(text)}`,
      );
    });

    it('while the task runs, task_status tells the model it is still working and to call task_status again', () => {
      const working = s.exchanges.filter((x) => x.name === mcpTool('task_status') && !/finished/.test(x.text ?? ''));
      assert.ok(working.length >= 1, describeRun(s));
      for (const w of working) {
        assert.equal(w.isError, false, describeRun(s));
        assert.match(w.text!, /working/i, describeRun(s));
        assert.match(w.text!, /\d\/9 s/, 'the latest progress');
        assert.match(
          w.text!,
          /task_status/,
          `the model must read when to check again; it read: ${JSON.stringify(w.text)}`,
        );
      }
    });
  });

  describe('(e) a wrong token in MCP_TASKS_TOKEN: Claude Code cannot use the server', () => {
    const WRONG = `mcp-test-${randomBytes(16).toString('hex')}`;
    let s: Scenario;
    let listed: { code: number | null; stdout: string; offLoopback: string[] };
    before(async () => {
      s = await scenario(
        'Count down from 1.',
        [load('countdown'), use('countdown', { seconds: 1 }), { text: 'The countdown tool is not available.' }],
        { token: WRONG },
      );
      const from = proxy.log.length;
      listed = await claudeMcpList({ mcpUrl: proxy.url, token: WRONG });
      console.log(
        `--- claude mcp list (wrong token): exit ${listed.code}\n${listed.stdout}\n${describeWire(proxy.log.slice(from), TOKEN).join('\n')}`,
      );
    });

    it('server/discover (no credentials needed) then tools/list refused 401 invalid_token on the other gateway; nothing more is sent', () => {
      const why = describeRun(s);
      assert.deepEqual(
        s.wire.map((e) => [e.mcpMethod, e.status]),
        [
          ['server/discover', 200],
          ['tools/list', 401],
        ],
        why,
      );
      assert.deepEqual(new Set(s.wire.map((e) => e.upstream)), new Set([0, 1]), why);
      for (const e of s.wire)
        assert.equal(
          e.headers?.authorization,
          `Bearer ${WRONG}`,
          `the wrong token, expanded from the environment: ${why}`,
        );
      const refusal = capturedMessages(s.wire[1]!).at(-1)!;
      assert.equal(refusal.error?.code, -32600, s.wire[1]!.response);
      assert.equal(refusal.error?.data?.error, 'invalid_token', s.wire[1]!.response);
    });

    it('the model finds no tool of the server (tool search: none; the call: "No such tool available"); the CLI still ends normally', () => {
      const why = describeRun(s);
      assert.equal(s.run.timedOut, false, why);
      assert.equal(s.run.code, 0, why);
      assert.deepEqual(s.run.scriptErrors, [], why);
      assert.deepEqual(
        s.run.offLoopback,
        [],
        `nothing tried off loopback (no OAuth discovery elsewhere either): ${why}`,
      );
      assert.equal(s.exchanges[0]?.name, 'ToolSearch', why);
      assert.match(s.exchanges[0]?.text ?? '', /No matching deferred tools found/, why);
      const call = s.exchanges.find((x) => x.name === mcpTool('countdown'));
      assert.equal(call?.isError, true, why);
      assert.match(call?.text ?? '', /No such tool available: mcp__tasks__countdown/, why);
      assert.ok(
        !s.run.mainRequests[1]?.body?.tools?.some((t) => t.name.startsWith(`mcp__${SERVER_NAME}__`)),
        `no tool of the server offered to the model: ${why}`,
      );
    });

    it('`claude mcp list` shows the server as "Needs authentication"', () => {
      assert.equal(listed.code, 0, listed.stdout);
      assert.deepEqual(listed.offLoopback, []);
      assert.match(listed.stdout, new RegExp(`^${SERVER_NAME}: .*Needs authentication`, 'm'), listed.stdout);
    });
  });
});
