/**
 * Unit tests of the demo tool set and the registry (packages/tools, design D1, D2). The tools'
 * `run` is called directly with a fake ToolContext: `sleep` resolves at once and every
 * `sleep` / `progress` call is recorded in order. No Redis, no worker.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRegistry, ToolRegistry } from '@mcp-tasks/tools/internal';
import {
  isInputRequired,
  testContext,
  ToolCancelled,
  type InputRequired,
  type InputResponse,
  type StepOutcome,
  type ToolContext,
  type ToolDefinition,
  type ToolResult,
} from '@mcp-tasks/tools';
import { add, countdown, deepResearchTool, shareReport } from '../../packages/tools/src/toolsets/demo.js';
import { SETTINGS } from '../support/toolset-settings.js';

const deepResearch = deepResearchTool(SETTINGS.demo);

type Call =
  | { kind: 'sleep'; ms: number }
  | { kind: 'progress'; done: number; total: number | undefined; message: string | undefined };

function fakeCtx(over: Partial<ToolContext> = {}): {
  ctx: ToolContext;
  calls: Call[];
  progress: () => Extract<Call, { kind: 'progress' }>[];
} {
  const calls: Call[] = [];
  const ctx: ToolContext = {
    signal: new AbortController().signal,
    mode: 'task',
    step: 1,
    attempt: 1,
    taskId: '6f1c2d4e-8a9b-4c3d-9e8f-0a1b2c3d4e5f',
    inputResponses: {},
    state: undefined,
    clientCapabilities: { elicitation: { form: {} } },
    principal: 'anonymous',
    async progress(done, total, message) {
      calls.push({ kind: 'progress', done, total, message });
    },
    async sleep(ms) {
      calls.push({ kind: 'sleep', ms });
    },
    async checkpoint() {},
    lastCheckpoint: undefined,
    drainSignal: new AbortController().signal,
    draining: false,
    async log() {},
    ...over,
  };
  return {
    ctx,
    calls,
    progress: () => calls.filter((c): c is Extract<Call, { kind: 'progress' }> => c.kind === 'progress'),
  };
}

function asResult(o: StepOutcome): ToolResult {
  assert.ok(!isInputRequired(o), `expected a CallToolResult, got input_required: ${JSON.stringify(o)}`);
  return o as ToolResult;
}
function asInputRequired(o: StepOutcome): InputRequired {
  assert.ok(isInputRequired(o), `expected input_required, got ${JSON.stringify(o)}`);
  return o;
}
function text(r: ToolResult): string {
  const first = r.content[0] as { type: string; text: string };
  assert.equal(first.type, 'text');
  return first.text;
}
function assertStrictlyIncreasing(values: number[], what: string) {
  for (let i = 1; i < values.length; i++)
    assert.ok(values[i]! > values[i - 1]!, `${what} must strictly increase: ${values.join(', ')}`);
}
const accept = (content: Record<string, unknown>): InputResponse => ({ action: 'accept', content });

describe('countdown', () => {
  for (const seconds of [1, 3, 10]) {
    it(`seconds=${seconds}: one 1 s sleep then one progress per second, strictly increasing to ${seconds}/${seconds}`, async () => {
      const { ctx, calls, progress } = fakeCtx();
      const r = asResult(await countdown.run({ seconds }, ctx));
      // sleep, progress, sleep, progress, ...
      assert.equal(calls.length, seconds * 2);
      calls.forEach((c, i) => {
        if (i % 2 === 0) assert.deepEqual(c, { kind: 'sleep', ms: 1000 });
        else assert.equal(c.kind, 'progress');
      });
      const p = progress();
      assert.deepEqual(
        p.map((c) => c.done),
        Array.from({ length: seconds }, (_, i) => i + 1),
      );
      assertStrictlyIncreasing(
        p.map((c) => c.done),
        'progress',
      );
      for (const c of p) {
        assert.equal(c.total, seconds);
        assert.ok(c.message && c.message.length > 0 && c.message.length <= 200);
      }
      assert.match(text(r), new RegExp(`Countdown from ${seconds} finished`));
      assert.notEqual(r.isError, true);
    });
  }

  it('input schema: an integer from 1 to 10', () => {
    assert.ok(countdown.inputSchema.safeParse({ seconds: 5 }).success);
    for (const bad of [0, 11, 2.5, '3', undefined])
      assert.equal(countdown.inputSchema.safeParse({ seconds: bad }).success, false, `seconds=${String(bad)}`);
  });
});

describe('deep_research', () => {
  it('step 1: researches, then asks for the audience (form elicitation, team / company via oneOf + title)', async () => {
    const { ctx, calls, progress } = fakeCtx({ step: 1 });
    const out = asInputRequired(await deepResearch.run({ topic: 'tidal energy' }, ctx));
    assert.deepEqual(Object.keys(out.inputRequests), ['audience']);
    const req = out.inputRequests.audience!;
    assert.equal(req.method, 'elicitation/create');
    const params = req.params as { mode: string; message: string; requestedSchema: any };
    assert.equal(params.mode, 'form');
    assert.match(params.message, /tidal energy/);
    const schema = params.requestedSchema;
    assert.equal(schema.type, 'object');
    assert.deepEqual(schema.required, ['audience']);
    const audience = schema.properties.audience;
    assert.equal(audience.type, 'string');
    assert.ok(Array.isArray(audience.oneOf));
    assert.deepEqual(
      audience.oneOf.map((o: any) => o.const),
      ['team', 'company'],
    );
    for (const o of audience.oneOf)
      assert.ok(typeof o.title === 'string' && o.title.length > 0, `option ${o.const} has a title`);
    assert.deepEqual(out.state, { topic: 'tidal energy' });
    assert.ok(out.statusMessage && out.statusMessage.length > 0);
    // Phase 1 reports progress up to 50 %, strictly increasing, one sleep before each report.
    const p = progress();
    assert.ok(p.length > 0);
    assertStrictlyIncreasing(
      p.map((c) => c.done),
      'progress',
    );
    assert.equal(p.at(-1)!.done, 50);
    for (const c of p) assert.equal(c.total, 100);
    const slept = calls.filter((c) => c.kind === 'sleep').reduce((s, c) => s + (c as { ms: number }).ms, 0);
    assert.equal(slept, 20_000, 'phase 1 lasts researchPhaseMs');
  });

  for (const audience of ['team', 'company'] as const) {
    it(`step 2 with accept ${audience}: returns a report naming the topic and the audience`, async () => {
      const { ctx, progress } = fakeCtx({
        step: 2,
        state: { topic: 'tidal energy' },
        inputResponses: { audience: accept({ audience }) },
      });
      const r = asResult(await deepResearch.run({ topic: 'tidal energy' }, ctx));
      assert.notEqual(r.isError, true);
      assert.match(text(r), /tidal energy/);
      assert.match(text(r), audience === 'team' ? /team/ : /company/);
      // D11: the report itself is in structuredContent too (summary = the text).
      assert.deepEqual(r.structuredContent, { summary: text(r), topic: 'tidal energy', audience });
      assert.match(text(r), /three sources agree on the main points of tidal energy/);
      const p = progress();
      assertStrictlyIncreasing(
        p.map((c) => c.done),
        'progress',
      );
      assert.ok(p[0]!.done > 50, 'phase 2 continues after 50 %');
      assert.equal(p.at(-1)!.done, 100);
    });
  }

  const refusals: [string, Record<string, InputResponse>][] = [
    ['decline', { audience: { action: 'decline' } }],
    ['cancel', { audience: { action: 'cancel' } }],
    ['accept with no content', { audience: { action: 'accept' } }],
    ['accept with an audience that was not offered', { audience: accept({ audience: 'everyone' }) }],
    ['no answer at all', {}],
  ];
  for (const [name, inputResponses] of refusals) {
    it(`step 2 with ${name}: throws ToolCancelled (the task ends cancelled)`, async () => {
      const { ctx } = fakeCtx({ step: 2, state: { topic: 'tidal energy' }, inputResponses });
      await assert.rejects(deepResearch.run({ topic: 'tidal energy' }, ctx), (e: unknown) => {
        assert.ok(e instanceof ToolCancelled, `expected ToolCancelled, got ${String(e)}`);
        assert.equal(e.name, 'ToolCancelled');
        return true;
      });
    });
  }

  it('researchPhaseMs = 0: still one progress report per phase, ending at 50 then 100', async () => {
    const instant = deepResearchTool({ researchPhaseMs: 0 });
    const one = fakeCtx();
    asInputRequired(await instant.run({ topic: 't' }, one.ctx));
    assert.deepEqual(
      one.progress().map((c) => c.done),
      [50],
    );
    const two = fakeCtx({
      step: 2,
      inputResponses: { audience: accept({ audience: 'team' }) },
    });
    asResult(await instant.run({ topic: 't' }, two.ctx));
    assert.deepEqual(
      two.progress().map((c) => c.done),
      [100],
    );
  });
});

describe('share_report', () => {
  it('step 1: asks "Share to <channel>?" with an optional boolean notify, at once (no sleep, no progress)', async () => {
    const { ctx, calls } = fakeCtx({ mode: 'inline' });
    const out = asInputRequired(await shareReport.run({ channel: '#research' }, ctx));
    assert.deepEqual(Object.keys(out.inputRequests), ['confirm']);
    const req = out.inputRequests.confirm!;
    assert.equal(req.method, 'elicitation/create');
    const params = req.params as { mode: string; message: string; requestedSchema: any };
    assert.equal(params.mode, 'form');
    assert.equal(params.message, 'Share to #research?');
    assert.equal(params.requestedSchema.type, 'object');
    assert.equal(params.requestedSchema.properties.notify.type, 'boolean');
    assert.ok(!(params.requestedSchema.required ?? []).includes('notify'), 'notify is optional');
    assert.deepEqual(out.state, { channel: '#research' });
    assert.deepEqual(calls, []);
  });

  it('step 2, accept with notify=true: shares and notifies', async () => {
    const { ctx } = fakeCtx({
      mode: 'inline',
      step: 2,
      state: { channel: '#research' },
      inputResponses: { confirm: accept({ notify: true }) },
    });
    const r = asResult(await shareReport.run({ channel: '#research' }, ctx));
    assert.equal(text(r), 'Shared the report to #research and notified its members.');
    assert.deepEqual(r.structuredContent, {
      summary: 'Shared the report to #research and notified its members.',
      channel: '#research',
      shared: true,
      notify: true,
    });
  });

  it('step 2, accept without notify: shares without notifying', async () => {
    const { ctx } = fakeCtx({ mode: 'inline', step: 2, inputResponses: { confirm: accept({}) } });
    const r = asResult(await shareReport.run({ channel: '#research' }, ctx));
    assert.equal(text(r), 'Shared the report to #research.');
    assert.deepEqual(r.structuredContent, {
      summary: 'Shared the report to #research.',
      channel: '#research',
      shared: true,
      notify: false,
    });
  });

  for (const action of ['decline', 'cancel'] as const) {
    it(`step 2, ${action}: answers that nothing was shared`, async () => {
      const { ctx } = fakeCtx({ mode: 'inline', step: 2, inputResponses: { confirm: { action } } });
      const r = asResult(await shareReport.run({ channel: '#research' }, ctx));
      assert.equal(text(r), 'Not shared to #research.');
      assert.notEqual(r.isError, true);
    });
  }
});

describe('add', () => {
  it('adds', async () => {
    for (const [a, b, sum] of [
      [2, 3, 5],
      [-1.5, 4, 2.5],
      [0, 0, 0],
    ] as const) {
      const { ctx } = fakeCtx({ mode: 'inline' });
      const r = asResult(await add.run({ a, b }, ctx));
      assert.equal(text(r), `${a} + ${b} = ${sum}`);
      assert.deepEqual(r.structuredContent, { summary: `${a} + ${b} = ${sum}`, sum });
    }
  });
});

describe('registry', () => {
  it('createRegistry(["demo"]) lists exactly countdown, deep_research, share_report, add with JSON Schema input schemas', () => {
    const reg = createRegistry(['demo'], SETTINGS);
    assert.equal(reg.size, 4);
    const list = reg.list();
    assert.deepEqual(
      list.map((t) => t.name),
      ['countdown', 'deep_research', 'share_report', 'add'],
    );
    for (const t of list) {
      assert.equal(typeof t.description, 'string');
      assert.ok((t.description as string).length > 0);
      assert.equal(typeof t.title, 'string');
      const s = t.inputSchema as Record<string, any>;
      assert.equal(s.type, 'object', `${String(t.name)} inputSchema.type`);
      assert.equal(typeof s.properties, 'object');
      assert.ok(Array.isArray(s.required));
      if ('$schema' in s) assert.equal(s.$schema, 'https://json-schema.org/draft/2020-12/schema');
      assert.doesNotThrow(() => JSON.parse(JSON.stringify(s)), 'plain JSON');
    }
    const byName = Object.fromEntries(list.map((t) => [t.name as string, t.inputSchema as Record<string, any>]));
    assert.deepEqual(byName.countdown!.required, ['seconds']);
    assert.equal(byName.countdown!.properties.seconds.type, 'integer');
    assert.equal(byName.countdown!.properties.seconds.minimum, 1);
    assert.equal(byName.countdown!.properties.seconds.maximum, 10);
    assert.deepEqual(byName.deep_research!.required, ['topic']);
    assert.equal(byName.deep_research!.properties.topic.type, 'string');
    assert.deepEqual(byName.share_report!.required, ['channel']);
    assert.equal(byName.share_report!.properties.channel.type, 'string');
    assert.deepEqual([...byName.add!.required].sort(), ['a', 'b']);
    assert.equal(byName.add!.properties.a.type, 'number');
    assert.equal(byName.add!.properties.b.type, 'number');
    // Deterministic: the same list every time (K-01).
    assert.deepEqual(reg.list(), list);
  });

  it('get() finds each demo tool by name and nothing else', () => {
    const reg = createRegistry(['demo'], SETTINGS);
    for (const t of [countdown, shareReport, add]) assert.equal(reg.get(t.name), t);
    assert.equal(reg.get('deep_research')?.name, 'deep_research');
    assert.equal(reg.get('nope'), undefined);
    assert.equal(reg.get('greet'), undefined, 'conformance tools are not enabled by "demo"');
  });

  it('the built-in tool sets take their settings when built, not from the tool context: deep_research phases of demo.researchPhaseMs, side_effect writes only with testing.sideEffectDir', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'toolset-settings-'));
    try {
      for (const researchPhaseMs of [3000, 7000]) {
        const reg = createRegistry(['demo'], { demo: { researchPhaseMs }, testing: {} });
        const f = fakeCtx();
        asInputRequired(await reg.get('deep_research')!.run({ topic: 't' }, f.ctx));
        const slept = f.calls.reduce((n, c) => n + (c.kind === 'sleep' ? c.ms : 0), 0);
        assert.equal(slept, researchPhaseMs, 'phase 1 lasts demo.researchPhaseMs');
      }
      const args = { marker: 'settings-m', delaySeconds: 0 };
      const without = createRegistry(['testing'], SETTINGS).get('side_effect')!;
      const refused = (await without.run(args, testContext().ctx)) as ToolResult;
      assert.equal(refused.isError, true);
      assert.match(JSON.stringify(refused.content), /TESTING_SIDE_EFFECT_DIR/);
      assert.ok(!existsSync(join(dir, 'settings-m')));
      const withDir = createRegistry(['testing'], { ...SETTINGS, testing: { sideEffectDir: dir } }).get('side_effect')!;
      const written = (await withDir.run(args, testContext().ctx)) as ToolResult;
      assert.ok(!written.isError, JSON.stringify(written));
      assert.ok(Number(readFileSync(join(dir, 'settings-m'), 'utf8')) > 0, 'the marker holds its time');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('every tool set can be enabled together (no name clashes)', () => {
    const reg = createRegistry(['demo', 'conformance', 'testing'], SETTINGS);
    assert.ok(reg.size > 4);
    const names = reg.list().map((t) => t.name);
    assert.equal(new Set(names).size, names.length);
  });

  it('duplicate tool names are rejected', () => {
    const clash = { ...add, name: 'countdown' } as unknown as ToolDefinition;
    assert.throws(
      () => new ToolRegistry([countdown as unknown as ToolDefinition, clash]),
      /duplicate tool name: countdown/,
    );
    assert.throws(
      () => new ToolRegistry([add as unknown as ToolDefinition, add as unknown as ToolDefinition]),
      /duplicate tool name: add/,
    );
  });

  it('a timeoutMs that is not an integer from 1 ms to 7 days is refused at start, naming the tool', () => {
    for (const timeoutMs of [0, -1, 1.5, 604_800_001, Number.POSITIVE_INFINITY, Number.NaN]) {
      const bad = { ...add, timeoutMs } as unknown as ToolDefinition;
      assert.throws(
        () => new ToolRegistry([bad]),
        /tool add: timeoutMs must be an integer number of ms from 1 to 604800000/,
      );
    }
    for (const timeoutMs of [1, 604_800_000]) {
      assert.equal(
        new ToolRegistry([{ ...add, timeoutMs } as unknown as ToolDefinition]).get('add')?.timeoutMs,
        timeoutMs,
      );
    }
  });
});
