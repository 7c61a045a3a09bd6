// @needs redis tmux
/**
 * The real Claude Code CLI (2.1.332) in interactive mode, in a terminal (tmux), against two
 * gateways and two workers behind the no-affinity round-robin proxy (issue 7 §4). Interactive
 * Claude Code declares the Tasks extension (clients.md §0.3), so a long tool becomes a task that
 * Claude Code moves to the background and polls with `tasks/get` (§0.5); the model is the
 * scripted loopback stub.
 *
 * One CLI session, two scenarios in order:
 *  1. `deep_research` as a task: polled every `pollIntervalMs` (700 ms here, not the test
 *     default, so an accidental match with the client's own default cannot pass); the question
 *     is shown as a form dialog and answered "My team" with the keyboard → `tasks/update`; the
 *     model's completion notice must contain the report (clients.md §0.6: it gets only
 *     `structuredContent`, so the report is in `structuredContent.summary`, design D11).
 *  2. `countdown` {seconds: 10} cancelled from the task panel (↓, Enter, `x`) → `tasks/cancel`,
 *     the task ends `cancelled` on the server, and Claude Code stops polling it.
 *
 * The token goes to the CLI as MCP_TASKS_TOKEN (`.mcp.json` header `Bearer ${MCP_TASKS_TOKEN}`)
 * and to the cluster as AUTH_API_KEYS, which the gateways enforce (no anonymous access once
 * keys are configured).
 * Each `deep_research` phase lasts RESEARCH_PHASE_MS = 2500 ms: the cadence check needs three
 * polls before the answer (two gaps), so the second poll must come before the question exists,
 * i.e. a first poll within 2500 − 700 = 1800 ms of the handle (observed 6–420 ms; with 1500 ms
 * two loaded test runs saw exactly two gaps).
 * Takes about 20 s here.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { startCluster, waitFor, sleep, type Cluster } from '../support/cluster.js';
import { capturedMessages, startRoundRobinProxy, type RoundRobinProxy } from '../support/round-robin-proxy.js';
import {
  toolResults,
  type ContentBlock,
  type MessagesRequest,
  type Step,
  type Turn,
} from '../support/anthropic-stub.js';
import {
  CLAUDE_CODE_VERSION,
  describeWire,
  SERVER_NAME,
  startClaudeInteractive,
  type InteractiveSession,
} from '../support/claude-code.js';
import { getTask, TASKS } from '../support/mcp.js';

const POLL_MS = 700;
const RESEARCH_PHASE_MS = 2500;
/** Pause between a screen change and the next key (see the dialog steps). */
const SETTLE_MS = 300;
const TOKEN = `mcp-test-${randomBytes(16).toString('hex')}`;
const mcpTool = (name: string) => `mcp__${SERVER_NAME}__${name}`;

/** The text blocks of the last user message (the prompt, or a notification turn). */
function lastUserBlocks(req: MessagesRequest): ContentBlock[] {
  const m = [...req.messages].reverse().find((x) => x.role === 'user');
  if (!m) return [];
  return typeof m.content === 'string' ? [{ type: 'text', text: m.content }] : m.content;
}

/**
 * The model: a prompt mentioning research → load and call deep_research; mentioning a countdown
 * → load and call countdown {seconds: 10}; a tool_result → acknowledge; a task notification →
 * acknowledge. (Interactive Claude Code puts the environment in a trailing system message, so
 * the last *user* message is what the model answers.)
 */
let pending: Turn | undefined;
const model: Step = (req) => {
  const blocks = lastUserBlocks(req);
  const result = blocks.find((b) => b.type === 'tool_result');
  if (result) {
    if (JSON.stringify(result.content).includes('tool_reference') && pending) {
      const call = pending;
      pending = undefined;
      return call;
    }
    return { text: 'Started; I will report when it is done.' };
  }
  const text = blocks.map((b) => (b.type === 'text' ? b.text : '')).join('\n');
  if (/<task-notification>/.test(text)) return { text: 'Noted.' };
  const load = (tool: string, input: Record<string, unknown>): Turn => {
    pending = { toolUse: { name: mcpTool(tool), input } };
    return { toolUse: { name: 'ToolSearch', input: { query: `select:${mcpTool(tool)}`, max_results: 5 } } };
  };
  if (/research/i.test(text)) return load('deep_research', { topic: 'solar sails' });
  if (/count down/i.test(text)) return load('countdown', { seconds: 10 });
  return { text: 'Hello.' };
};

describe(`Claude Code ${CLAUDE_CODE_VERSION} interactive (tmux) against 2 gateways + 2 workers behind a no-affinity proxy`, () => {
  let c: Cluster;
  let proxy: RoundRobinProxy;
  let cc: InteractiveSession;
  const wire = (from = 0) => proxy.log.slice(from);
  const explain = (from = 0) =>
    `screen:\n${cc.term.screen().replace(/\n\s*\n/g, '\n')}\ngateway requests:\n${describeWire(wire(from), TOKEN).join('\n')}\nmodel requests: ${cc.stub
      .mainRequests()
      .map((r) =>
        JSON.stringify(lastUserBlocks(r.body!).map((b) => (b.type === 'text' ? b.text.slice(0, 120) : b.type))),
      )
      .join('\n  ')}`;
  /** Runs a step of the interaction; a failure carries the screen and the wire. */
  const step = async <T>(from: number, p: Promise<T>): Promise<T> => {
    try {
      return await p;
    } catch (e) {
      throw new Error(`${(e as Error).message}\n${explain(from)}`);
    }
  };

  /**
   * Sends `keys` and waits for `gone` to leave the screen; sends them once more if it is still
   * there after 3 s (a key that arrived while Ink re-subscribed its handler is dropped). Only for
   * keys that are harmless if they land twice: the one that closes a view.
   */
  async function pressUntilGone(keys: string[], gone: RegExp, what: string): Promise<void> {
    const absent = new RegExp(`^(?![\\s\\S]*(?:${gone.source}))`);
    cc.term.keys(keys);
    try {
      await cc.term.waitScreen(absent, 3000, what);
    } catch {
      cc.term.keys(keys);
      await cc.term.waitScreen(absent, 5000, what);
    }
  }

  before(async () => {
    c = await startCluster({
      gateways: 2,
      workers: 2,
      env: {
        MCP_TOOLSETS: 'demo',
        TASK_POLL_INTERVAL_MS: String(POLL_MS),
        DEMO_RESEARCH_PHASE_MS: String(RESEARCH_PHASE_MS),
        AUTH_API_KEYS: `alice:${TOKEN}`,
      },
    });
    proxy = await startRoundRobinProxy(c.urls, { capture: true });
    cc = await startClaudeInteractive({
      script: Array.from({ length: 40 }, () => model),
      mcpUrl: proxy.url,
      token: TOKEN,
    });
    // The prompt can be drawn before the MCP server is connected: wait for its tool list.
    await waitFor(() => proxy.log.find((e) => e.mcpMethod === 'tools/list' && e.endedAt), 20_000, 50, 'tools/list');
  });
  after(async () => {
    await cc?.close();
    await proxy?.close();
    await c?.stop();
  });

  it('handshake: server/discover then tools/list, the Tasks extension declared, the bearer token expanded, User-Agent "(cli)"', () => {
    const w = wire();
    assert.deepEqual(
      w.slice(0, 2).map((e) => e.mcpMethod),
      ['server/discover', 'tools/list'],
      explain(),
    );
    for (const e of w) {
      assert.equal(e.headers?.authorization, `Bearer ${TOKEN}`, explain());
      assert.match(String(e.headers?.['user-agent']), /^claude-code\/2\.1\.332 \(cli\)/);
      const caps = JSON.parse(e.body!).params._meta['io.modelcontextprotocol/clientCapabilities'];
      assert.deepEqual(
        caps.extensions?.[TASKS],
        {},
        `interactive Claude Code declares the Tasks extension: ${explain()}`,
      );
    }
  });

  describe('deep_research as a task: polled, its question answered in the dialog, the report in the completion notice', () => {
    let from = 0;
    let taskId = '';
    let notice: MessagesRequest | undefined;
    before(async () => {
      from = proxy.log.length;
      cc.prompt('Research solar sails for me.');
      // The dialog: a form with the audience as a radio list (clients.md §0.5).
      await step(
        from,
        cc.term.waitScreen(
          /requests your input[\s\S]*Who is the report on "solar sails" for\?/,
          20_000,
          'the question dialog',
        ),
      );
      // Ink re-subscribes its key handler after each render: a key sent the instant the screen
      // changed can be dropped, so each key waits for the screen to settle (SETTLE_MS).
      await sleep(SETTLE_MS);
      cc.term.keys(['Right']); // expand the choice list
      await step(from, cc.term.waitScreen(/◯ My team/, 5000, 'the choices'));
      await sleep(SETTLE_MS);
      cc.term.keys(['Space']); // choose the first: My team
      await step(from, cc.term.waitScreen(/Audience: ▸ My team/, 5000, 'the chosen audience'));
      await sleep(SETTLE_MS);
      cc.term.keys(['Down']); // to Accept
      await step(from, cc.term.waitScreen(/❯ Accept/, 5000, 'Accept selected'));
      await sleep(SETTLE_MS);
      await step(from, pressUntilGone(['Enter'], /requests your input/, 'the dialog closed'));
      // The task finishes (its second phase) and Claude Code gives the model a notification turn.
      const req = await step(
        from,
        waitFor(
          () =>
            cc.stub
              .mainRequests()
              .find((r) =>
                lastUserBlocks(r.body!).some((b) => b.type === 'text' && /<task-notification>/.test(b.text)),
              ),
          30_000,
          100,
          'the task notification turn',
        ),
      );
      notice = req.body;
      const created = wire(from).find(
        (e) => e.mcpMethod === 'tools/call' && e.headers?.['mcp-name'] === 'deep_research',
      );
      taskId = created ? (capturedMessages(created).at(-1)?.result?.taskId ?? '') : '';
      console.log(`--- interactive deep_research (task ${taskId})\n${explain(from)}`);
    });

    it('tools/call answered with a task; the model is told it runs in the background', () => {
      assert.match(taskId, /^[0-9a-f-]{36}$/, explain(from));
      const call = cc.stub
        .mainRequests()
        .flatMap((r) => toolResults(r.body!))
        .find((b) => JSON.stringify(b.content).includes(`started server-side task ${taskId}`));
      assert.ok(call, `Claude Code's own background message reaches the model: ${explain(from)}`);
    });

    it(`tasks/get every pollIntervalMs (${POLL_MS} ms), the answer sent with tasks/update, then polled to completion`, () => {
      const w = wire(from);
      const gets = w.filter((e) => e.mcpMethod === 'tasks/get');
      assert.ok(
        gets.every((e) => e.headers?.['mcp-name'] === taskId && e.status === 200),
        explain(from),
      );
      const update = w.find((e) => e.mcpMethod === 'tasks/update');
      assert.ok(update, explain(from));
      assert.equal(update.headers?.['mcp-name'], taskId);
      assert.equal(update.status, 200);
      // The key of the question, from the tasks/get that returned it.
      const asked = gets.map((e) => capturedMessages(e).at(-1)?.result).find((r) => r?.status === 'input_required');
      assert.ok(asked, explain(from));
      const key = Object.keys(asked.inputRequests)[0]!;
      assert.deepEqual(JSON.parse(update.body!).params.inputResponses, {
        [key]: { action: 'accept', content: { audience: 'team' } },
      });
      // Cadence: the gaps between polls while nothing else happens (before the dialog was answered).
      const before = gets.filter((e) => e.at < update.at).map((e) => e.at);
      const gaps = before.slice(1).map((t, i) => t - before[i]!);
      console.log(
        `tasks/get gaps before the answer (ms): ${gaps.join(', ')}; first poll ${before[0]! - w.find((e) => e.mcpMethod === 'tools/call')!.endedAt!} ms after the task handle`,
      );
      assert.ok(gaps.length >= 2, explain(from));
      assert.ok(Math.min(...gaps) >= POLL_MS - 50, `never faster than pollIntervalMs: ${gaps.join(', ')}`);
      const median = [...gaps].sort((a, b) => a - b)[Math.floor(gaps.length / 2)]!;
      assert.ok(median < POLL_MS + 400, `about every pollIntervalMs: median ${median} ms (${gaps.join(', ')})`);
      // After the answer: polled on to completion.
      const last = capturedMessages(gets.at(-1)!).at(-1)?.result;
      assert.equal(last?.status, 'completed', explain(from));
      assert.ok(gets.some((e) => e.at > update.at));
    });

    it('the screen shows the completion line', async () => {
      await step(
        from,
        cc.term.waitScreen(
          new RegExp(`MCP task ${taskId} \\(tasks/deep_research\\) completed`),
          5000,
          'the completion line',
        ),
      );
    });

    it("the model's completion notice carries the report itself (topic, audience, summary)", () => {
      const text = lastUserBlocks(notice!)
        .map((b) => b.text ?? '')
        .join('\n');
      console.log(`completion notice the model received:\n${text}`);
      assert.match(text, new RegExp(taskId));
      assert.match(text, /<status>completed<\/status>/);
      assert.match(
        text,
        /three sources agree on the main points of solar sails/,
        `the report must reach the model; it read:\n${text}`,
      );
    });
  });

  describe('countdown {seconds: 10} cancelled from the task panel', () => {
    let from = 0;
    let taskId = '';
    let cancelledAt = 0;
    before(async () => {
      from = proxy.log.length;
      cc.prompt('Count down from 10.');
      const created = await step(
        from,
        waitFor(
          () =>
            wire(from).find(
              (e) => e.mcpMethod === 'tools/call' && e.headers?.['mcp-name'] === 'countdown' && e.endedAt,
            ),
          20_000,
          50,
          'the countdown call',
        ),
      );
      taskId = capturedMessages(created).at(-1)?.result?.taskId ?? '';
      await step(from, cc.term.waitScreen(/1 MCP task/, 10_000, 'the task footer'));
      await sleep(SETTLE_MS);
      cc.term.keys(['Down']);
      await step(from, cc.term.waitScreen(/enter to view tasks/, 5000, 'the footer focused'));
      await sleep(SETTLE_MS);
      cc.term.keys(['Enter']);
      await step(from, cc.term.waitScreen(/tasks\/countdown[\s\S]*x to stop/, 5000, 'the task panel'));
      await sleep(SETTLE_MS);
      await step(from, pressUntilGone(['x'], /x to stop/, 'the task view closed'));
      await step(
        from,
        waitFor(() => wire(from).some((e) => e.mcpMethod === 'tasks/cancel'), 5000, 50, 'tasks/cancel'),
      );
      cancelledAt = wire(from).find((e) => e.mcpMethod === 'tasks/cancel')!.at;
      await sleep(POLL_MS * 3); // long enough to see any poll that should not happen
      console.log(`--- interactive countdown cancelled (task ${taskId})\n${explain(from)}`);
    });

    it('x sends tasks/cancel for the task; the server records it cancelled before its 10 s', async () => {
      assert.match(taskId, /^[0-9a-f-]{36}$/, explain(from));
      const cancels = wire(from).filter((e) => e.mcpMethod === 'tasks/cancel');
      assert.ok(cancels.length >= 1, explain(from));
      for (const e of cancels) {
        assert.equal(e.headers?.['mcp-name'], taskId);
        assert.equal(JSON.parse(e.body!).params.taskId, taskId);
        assert.equal(e.status, 200);
        assert.equal(capturedMessages(e).at(-1)?.error, undefined, e.response);
      }
      const got = await getTask(c.urls[0]!, taskId, { token: TOKEN });
      assert.equal(got.body.result?.status, 'cancelled', JSON.stringify(got.body));
      const createdAt = wire(from).find((e) => e.mcpMethod === 'tools/call')!.at;
      assert.ok(cancelledAt - createdAt < 10_000, 'cancelled while it ran');
    });

    it('Claude Code stops polling the cancelled task, and the panel shows nothing running', async () => {
      // A poll Claude Code sent just before the x (already on its way) may arrive a little after
      // the cancel on a busy machine; a client that kept polling would poll again every
      // POLL_MS, i.e. at least twice more within the 3 × POLL_MS watched after the cancel.
      const late = wire(from).filter((e) => e.mcpMethod === 'tasks/get' && e.at > cancelledAt + POLL_MS / 2);
      assert.deepEqual(
        late.map((e) => e.at - cancelledAt),
        [],
        `no tasks/get after the cancel: ${explain(from)}`,
      );
      await step(from, cc.term.waitScreen(/No tasks currently running/, 5000, 'the empty task panel'));
    });
  });

  it('nothing was tried off loopback during the session (the tripwire proxy saw no request)', () => {
    assert.deepEqual(cc.offLoopback(), [], explain());
  });
});
