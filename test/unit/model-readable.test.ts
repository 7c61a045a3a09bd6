/**
 * Results the model can read, and progress it is shown once (design D11; issue 7 §1;
 * clients.md §0.6, §0.10). Claude Code hands the model only `structuredContent` when a result
 * has it, so every fact of a result's text must be inside `structuredContent` (or the result has
 * none); and it appends its own "(NN%)" to a progress message sent with a `total`, so such a
 * message carries no percentage of its own.
 *
 * Checked over **every tool of every tool set** (demo, conformance, testing): each tool runs
 * with a fake ToolContext (sleep resolves at once, progress is recorded) along every path its
 * questions allow: each question answered cancel, decline, accept with empty content, and accept
 * with the first and with the second choice of each field of its form (oneOf / enum values,
 * true / false, a string, a number), up to 4 rounds; pre-task rounds (`preTask`) the same way.
 * The built-in `task_status` (every status) and the hand-off results (budget, shutdown, an
 * earlier request) are checked on records of every shape. A tool added to a tool set without a
 * scenario here fails the test.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRegistry } from '@mcp-tasks/tools/internal';
import {
  isInputRequired,
  structuredResult,
  textResult,
  unreadableFacts,
  type InputRequired,
  type InputResponse,
  type StepOutcome,
  type ToolContext,
  type ToolDefinition,
  type ToolResult,
} from '@mcp-tasks/tools';
import type { TaskRecord } from '@mcp-tasks/task-store';
import { handedOffResult, type HandOffReason } from '../../apps/gateway/src/handoff.js';
import { noSuchTaskResult, statusResult } from '../../apps/gateway/src/task-status.js';
import { SETTINGS } from '../support/toolset-settings.js';

const TOOLSETS = ['demo', 'conformance', 'testing'] as const;
const MAX_ROUNDS = 4;

/** Arguments each tool is run with (every tool of every tool set must have an entry). */
const SCENARIOS: Record<string, Record<string, unknown>[]> = {
  countdown: [{ seconds: 3 }],
  deep_research: [{ topic: 'tidal energy' }],
  share_report: [{ channel: '#research' }],
  add: [
    { a: 2, b: 3 },
    { a: 1e308, b: 1e308 },
  ],
  greet: [{ name: 'Ada' }],
  slow_compute: [{ seconds: 2, label: 'lifecycle' }, { seconds: 1.5 }],
  failing_job: [{}],
  protocol_error_job: [{}],
  confirm_delete: [{ filename: 'notes.txt' }],
  multi_input: [{}],
  test_tool_with_task: [{}, { name: 'Ada' }],
  test_tool_with_progress: [{}],
  test_simple_text: [{}],
  test_image_content: [{}],
  test_audio_content: [{}],
  test_embedded_resource: [{}],
  test_multiple_content_types: [{}],
  test_error_handling: [{}],
  test_x_mcp_header: [{ region: 'eu-west-1', level: 2 }, {}],
  json_schema_2020_12_tool: [{ name: 'Ada', contactMethod: 'email', email: 'ada@example.org' }],
  test_missing_capability: [{}],
  test_streaming_elicitation: [{}],
  test_logging_tool: [{}],
  test_input_required_result_elicitation: [{}],
  test_input_required_result_sampling: [{}],
  test_input_required_result_list_roots: [{}],
  test_input_required_result_request_state: [{}],
  test_input_required_result_multiple_inputs: [{}],
  test_input_required_result_multi_round: [{}],
  test_input_required_result_tampered_state: [{}],
  test_input_required_result_capabilities: [{}],
  header_echo: [{ region: 'eu', count: 3, dry: true, seconds: 1 }, { region: 'us' }],
  slow_echo: [{ seconds: 2, text: 'hello' }, { seconds: 1, quiet: true }, { seconds: 0 }],
  ask_confirm: [{}, { question: 'Go ahead?', rounds: 2, delaySeconds: 2, afterSeconds: 1 }],
  progress_sync: [
    { steps: 3, intervalSeconds: 0 },
    { steps: 2, intervalSeconds: 1, stamp: true },
  ],
  side_effect: [{ marker: 'm1', delaySeconds: 1 }],
  big_result: [{ bytes: 64 }, { bytes: 0 }],
  time_limited: [{ seconds: 0 }, { seconds: 0, ignoreSignal: true }],
  throw_error: [
    { kind: 'unexpected', message: 'boom' },
    { kind: 'protocol', message: 'bad' },
  ],
  crash_inline: [{}],
  confirm_once: [{ marker: 'm2' }],
  checkpoint_count: [{ seconds: 3 }],
  retry_flaky: [{ failures: 0 }],
};
/** Tools whose every path throws (a JSON-RPC error or an unexpected error: no result to read). */
const ALWAYS_THROWS = new Set(['protocol_error_job', 'throw_error', 'crash_inline']);

interface Progress {
  done: number;
  total: number | undefined;
  message: string | undefined;
}
/** One way through a tool: the answers given, and how it ended. */
interface Path {
  label: string;
  end: { result: ToolResult } | { error: unknown } | { stopped: 'rounds' };
}

function fakeCtx(
  mode: ToolContext['mode'],
  step: number,
  state: unknown,
  inputResponses: Record<string, InputResponse>,
  progress: Progress[],
): ToolContext {
  return {
    signal: new AbortController().signal,
    mode,
    step,
    attempt: 1,
    taskId: '6f1c2d4e-8a9b-4c3d-9e8f-0a1b2c3d4e5f',
    inputResponses,
    state,
    clientCapabilities: { elicitation: { form: {} } },
    principal: 'key:alice',
    async progress(done, total, message) {
      progress.push({ done, total, message });
    },
    async sleep() {},
    async checkpoint() {},
    lastCheckpoint: undefined,
    drainSignal: new AbortController().signal,
    draining: false,
    async log() {},
  };
}

/** Candidate values of one form field: its choices, both booleans, a string, a number. */
function candidates(prop: Record<string, any>): unknown[] {
  if (Array.isArray(prop.oneOf)) return prop.oneOf.map((o: { const: unknown }) => o.const);
  if (Array.isArray(prop.enum)) return prop.enum;
  if (prop.type === 'boolean') return [true, false];
  if (prop.type === 'number' || prop.type === 'integer') return [1, 2];
  return ['Ada', 'Grace'];
}

/** The answer sets tried for one round of questions: cancel, decline, accept {}, accept first/second choices. */
function answerSets(q: InputRequired): [string, Record<string, InputResponse>][] {
  const all = (f: (params: Record<string, any>) => InputResponse) =>
    Object.fromEntries(
      Object.entries(q.inputRequests).map(([k, r]) => [k, f((r.params ?? {}) as Record<string, any>)]),
    );
  const accept =
    (pick: number) =>
    (params: Record<string, any>): InputResponse => {
      const props: Record<string, Record<string, any>> = params.requestedSchema?.properties ?? {};
      return {
        action: 'accept',
        content: Object.fromEntries(
          Object.entries(props).map(([name, p]) => {
            const c = candidates(p);
            return [name, c[Math.min(pick, c.length - 1)]];
          }),
        ),
      };
    };
  return [
    ['cancel', all(() => ({ action: 'cancel' }))],
    ['decline', all(() => ({ action: 'decline' }))],
    ['accept {}', all(() => ({ action: 'accept', content: {} }))],
    ['accept first choices', all(accept(0))],
    ['accept second choices', all(accept(1))],
  ];
}

/** Runs `tool` along every path (see the module doc); returns the paths and every progress report. */
async function explore(
  tool: ToolDefinition,
  args: Record<string, unknown>,
): Promise<{ paths: Path[]; progress: Progress[] }> {
  const mode: ToolContext['mode'] = tool.runsIn === 'gateway' ? 'inline' : 'task';
  const paths: Path[] = [];
  const progress: Progress[] = [];
  const run = async (
    a: Record<string, unknown>,
    step: number,
    state: unknown,
    responses: Record<string, InputResponse>,
    label: string,
  ): Promise<void> => {
    let out: StepOutcome;
    try {
      out = await tool.run(a, fakeCtx(mode, step, state, responses, progress));
    } catch (error) {
      paths.push({ label, end: { error } });
      return;
    }
    if (!isInputRequired(out)) {
      paths.push({ label, end: { result: out } });
      return;
    }
    if (step >= MAX_ROUNDS) {
      paths.push({ label, end: { stopped: 'rounds' } });
      return;
    }
    for (const [name, answers] of answerSets(out)) await run(a, step + 1, out.state, answers, `${label} → ${name}`);
  };
  const pre = async (
    step: number,
    state: unknown,
    responses: Record<string, InputResponse>,
    label: string,
  ): Promise<void> => {
    if (!tool.preTask) return run(args, 1, undefined, {}, label);
    const out = await tool.preTask(args, fakeCtx('inline', step, state, responses, progress));
    if (!('kind' in out)) return run(out.args as Record<string, unknown>, 1, undefined, {}, `${label} → task`);
    if (step >= MAX_ROUNDS) {
      paths.push({ label, end: { stopped: 'rounds' } });
      return;
    }
    for (const [name, answers] of answerSets(out))
      await pre(step + 1, out.state, answers, `${label} → pre-task ${name}`);
  };
  await pre(1, undefined, {}, JSON.stringify(args));
  return { paths, progress };
}

/** Every text block's facts are in structuredContent, or there is none; text blocks hold strings. */
function assertReadable(r: ToolResult, where: string): void {
  assert.ok(Array.isArray(r.content), `${where}: content is an array`);
  for (const b of r.content)
    if ((b as { type?: string }).type === 'text')
      assert.equal(typeof (b as { text?: unknown }).text, 'string', `${where}: text block`);
  assert.deepEqual(
    unreadableFacts(r),
    [],
    `${where}: the model shown only structuredContent would miss these facts of the text:\n${JSON.stringify(r, null, 1).slice(0, 1500)}`,
  );
}

/** A number followed by a percent sign, anywhere in the message. */
const PERCENT = /\d\s*%/;

describe('the kit: structuredResult, textResult and unreadableFacts (D11)', () => {
  it('structuredResult puts the summary first in structuredContent and as the one text block', () => {
    const r = structuredResult({ summary: 'Shared the report to #research.', channel: '#research', shared: true });
    assert.deepEqual(r, {
      content: [{ type: 'text', text: 'Shared the report to #research.' }],
      structuredContent: { summary: 'Shared the report to #research.', channel: '#research', shared: true },
    });
    assert.deepEqual(Object.keys(r.structuredContent!), ['summary', 'channel', 'shared']);
    assert.equal(structuredResult({ summary: 'x' }, { isError: true }).isError, true);
    assert.deepEqual(unreadableFacts(r), []);
  });

  it('textResult has no structuredContent', () => {
    assert.deepEqual(textResult('hi'), { content: [{ type: 'text', text: 'hi' }] });
    assert.deepEqual(textResult('no', { isError: true }), { content: [{ type: 'text', text: 'no' }], isError: true });
    assert.deepEqual(unreadableFacts(textResult('anything')), []);
  });

  it('unreadableFacts names what the text says and structuredContent does not (the shapes of before the fix)', () => {
    // deep_research before: the report only in content.
    const report =
      'Research report: "otters"\nAudience: your team\nSummary: three sources agree on the main points of otters.';
    assert.deepEqual(
      unreadableFacts({
        content: [{ type: 'text', text: report }],
        structuredContent: { topic: 'otters', audience: 'team' },
      }),
      [
        'Research report: "otters"',
        'Audience: your team',
        'Summary: three sources agree on the main points of otters.',
      ],
    );
    // add before: a number is not a sentence the model can read from {sum: 5}.
    assert.deepEqual(unreadableFacts({ content: [{ type: 'text', text: '5' }], structuredContent: { sum: 5 } }), ['5']);
    // Sentences found in different strings, at any depth, are carried.
    assert.deepEqual(
      unreadableFacts({
        content: [{ type: 'text', text: 'It ran. Call x next.' }],
        structuredContent: { a: 'It ran.', deep: [{ b: 'then: Call x next.' }] },
      }),
      [],
    );
    // Only the missing sentence is reported.
    assert.deepEqual(
      unreadableFacts({
        content: [{ type: 'text', text: 'It ran. Call x next.' }],
        structuredContent: { a: 'It ran.' },
      }),
      ['Call x next.'],
    );
    // A non-text block cannot be read from structuredContent.
    assert.deepEqual(
      unreadableFacts({
        content: [{ type: 'image', data: 'AA==', mimeType: 'image/png' }],
        structuredContent: { summary: 'a chart' },
      }),
      ['[image block]'],
    );
  });
});

describe('every tool of every tool set: results the model can read, progress without its own percentage', () => {
  const registry = createRegistry([...TOOLSETS], SETTINGS);
  /** Every tool set built with deep_research's phases 3 s long and side effects written to `dir`. */
  const toolsIn = (dir: string) =>
    createRegistry([...TOOLSETS], { demo: { researchPhaseMs: 3000 }, testing: { sideEffectDir: dir } });
  const names = registry.list().map((t) => t.name as string);

  it('every tool has a scenario here (a new tool must be added)', () => {
    assert.deepEqual([...names].sort(), Object.keys(SCENARIOS).sort());
  });

  for (const name of names) {
    it(`${name}: every path's result is readable from structuredContent alone; no progress message with a total carries a percentage`, async () => {
      const dir = mkdtempSync(join(tmpdir(), 'model-readable-'));
      const tool = toolsIn(dir).get(name)!;
      try {
        let results = 0;
        for (const args of SCENARIOS[name]!) {
          const { paths, progress } = await explore(tool, args);
          assert.ok(paths.length > 0, `${name} ${JSON.stringify(args)}: no path`);
          for (const p of paths) {
            if ('result' in p.end) {
              results++;
              assertReadable(p.end.result, `${name} ${p.label}`);
            }
          }
          for (const p of progress) {
            if (p.total === undefined) continue;
            assert.ok(
              !PERCENT.test(p.message ?? ''),
              `${name} ${JSON.stringify(args)}: progress ${p.done}/${p.total} "${p.message}" carries its own percentage (clients add one from total)`,
            );
          }
        }
        if (ALWAYS_THROWS.has(name)) assert.equal(results, 0, `${name} is listed as always throwing`);
        else assert.ok(results > 0, `${name}: no path produced a result`);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }

  it('the demo results carry what the model must read in structuredContent (the report, the outcome, the sum)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'model-readable-'));
    const tools = toolsIn(dir);
    try {
      const research = await explore(tools.get('deep_research')!, { topic: 'tidal energy' });
      const team = research.paths.find((p) => p.label.endsWith('accept first choices'))!;
      assert.ok('result' in team.end);
      const sc = team.end.result.structuredContent!;
      assert.equal(sc.topic, 'tidal energy');
      assert.equal(sc.audience, 'team');
      assert.match(String(sc.summary), /three sources agree on the main points of tidal energy/);
      const share = await explore(tools.get('share_report')!, { channel: '#research' });
      const shared = share.paths.find((p) => p.label.endsWith('accept first choices'))!;
      assert.ok('result' in shared.end);
      assert.deepEqual(shared.end.result.structuredContent, {
        summary: 'Shared the report to #research and notified its members.',
        channel: '#research',
        shared: true,
        notify: true,
      });
      const add = await explore(tools.get('add')!, { a: 2, b: 3 });
      assert.ok('result' in add.paths[0]!.end);
      assert.deepEqual(add.paths[0]!.end.result.structuredContent, { summary: '2 + 3 = 5', sum: 5 });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('built-in results: task_status and the hand-off', () => {
  const now = Date.parse('2026-12-01T10:00:00Z');
  const rec = (over: Partial<TaskRecord>): TaskRecord => ({
    taskId: '0b6c3d2e-1f4a-4b5c-8d9e-0f1a2b3c4d5e',
    status: 'working',
    owner: 'key:alice',
    tool: 'countdown',
    argsJson: '{"seconds":9}',
    mode: 'task',
    createdAt: now,
    lastUpdatedAt: now,
    ttlMs: 86_400_000,
    pollIntervalMs: 2000,
    step: 1,
    fence: 1,
    claimedStep: 1,
    inputRequests: {},
    inputResponses: {},
    cancelRequested: false,
    reruns: 0,
    ...over,
  });
  const question = {
    'audience.1': {
      method: 'elicitation/create',
      params: { mode: 'form', message: 'Who is it for?', requestedSchema: { type: 'object', properties: {} } },
    },
  };
  const records: [string, TaskRecord][] = [
    ['working with progress', rec({ statusMessage: '4/9 s (5 left)' })],
    ['working, no progress yet', rec({})],
    [
      'input_required (a client that cannot show the question)',
      rec({
        status: 'input_required',
        statusMessage: 'Waiting for you to choose the audience',
        inputRequests: question,
      }),
    ],
    [
      'failed',
      rec({
        status: 'failed',
        error: { code: -32603, message: 'Tool countdown failed unexpectedly (error id 0123456789abcdef)' },
        statusMessage: 'Tool countdown failed unexpectedly (error id 0123456789abcdef)',
      }),
    ],
    ['cancelled', rec({ status: 'cancelled', statusMessage: 'Cancelled by client request' })],
    ['cancelled, no message', rec({ status: 'cancelled' })],
    [
      'completed (a plain text result)',
      rec({
        status: 'completed',
        result: textResult('Countdown from 9 finished.') as unknown as Record<string, unknown>,
      }),
    ],
    [
      'completed (a structured result)',
      rec({
        status: 'completed',
        tool: 'deep_research',
        result: structuredResult({
          summary: 'Research report: "x"\nAudience: your team',
          topic: 'x',
          audience: 'team',
        }) as unknown as Record<string, unknown>,
      }),
    ],
    ['completed, no result stored', rec({ status: 'completed' })],
  ];

  for (const [what, r] of records) {
    it(`task_status, ${what}: readable from structuredContent alone`, () => {
      assertReadable(statusResult(r) as ToolResult, `task_status ${what}`);
    });
  }

  it('task_status, working: structuredContent tells the model the status, the latest progress and to call task_status again', () => {
    const r = statusResult(rec({ statusMessage: '4/9 s (5 left)' })) as ToolResult;
    const sc = r.structuredContent!;
    assert.equal(sc.status, 'working');
    assert.equal(sc.taskId, '0b6c3d2e-1f4a-4b5c-8d9e-0f1a2b3c4d5e');
    assert.equal(sc.statusMessage, '4/9 s (5 left)');
    assert.equal(sc.pollIntervalMs, 2000);
    assert.match(
      String(sc.summary),
      /still working: 4\/9 s \(5 left\)\. Call task_status with \{"taskId":"0b6c3d2e-1f4a-4b5c-8d9e-0f1a2b3c4d5e"\} again/,
    );
  });

  it('task_status, unknown id: an isError text without structuredContent', () => {
    const r = noSuchTaskResult('nope');
    assert.equal(r.isError, true);
    assert.equal(r.structuredContent, undefined);
    assertReadable(r, 'task_status unknown');
  });

  const reasons: [HandOffReason, RegExp][] = [
    ['budget', /^countdown is still running after 5 s, so it continues in the background as task /],
    [
      'shutdown',
      /^countdown is still running and the server holding this call is restarting, so it continues in the background as task /,
    ],
    [
      'earlier',
      /^countdown was handed off to the background by an earlier request, so it continues in the background as task /,
    ],
  ];
  for (const [why, sentence] of reasons) {
    for (const statusMessage of ['4/9 s (5 left)', undefined]) {
      it(`hand-off (${why}${statusMessage ? ', with progress' : ''}): the instruction is in structuredContent.summary, beside taskId and next`, () => {
        const r = handedOffResult(
          rec(statusMessage ? { statusMessage } : {}),
          createRegistry(['demo'], SETTINGS).get('countdown')!,
          why,
          5000,
        ) as ToolResult;
        assertReadable(r, `hand-off ${why}`);
        const sc = r.structuredContent!;
        assert.match(String(sc.summary), sentence);
        assert.match(
          String(sc.summary),
          /call the tool task_status with \{"taskId":"0b6c3d2e-1f4a-4b5c-8d9e-0f1a2b3c4d5e"\}/,
        );
        assert.match(String(sc.summary), /kept until 2026-12-02T10:00:00\.000Z/);
        if (statusMessage) assert.match(String(sc.summary), /Latest progress: 4\/9 s \(5 left\)\./);
        assert.equal(sc.taskId, '0b6c3d2e-1f4a-4b5c-8d9e-0f1a2b3c4d5e');
        assert.equal(sc.status, 'working');
        assert.equal(sc.pollIntervalMs, 2000);
        assert.deepEqual(sc.next, {
          tool: 'task_status',
          arguments: { taskId: '0b6c3d2e-1f4a-4b5c-8d9e-0f1a2b3c4d5e' },
        });
        assert.equal(sc.statusMessage, statusMessage);
      });
    }
  }
});
