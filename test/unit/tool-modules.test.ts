/**
 * Unit tests of the pieces behind your own tools and the entry points (issue 11 §1, §3):
 * MCP_TOOL_MODULES and MCP_TOOLSETS=none in the configuration, resolving and checking a module,
 * refusing a name defined twice, the start-up summary (password redacted, auth modes), the
 * command-line parsing, and the worker tool adverts' arithmetic. The end-to-end behaviour is in
 * test/e2e/tool-modules.test.ts and test/e2e/entry-points.test.ts.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { authModes, ConfigError, loadConfig, parseEntryArgs, redactUrl, startupSummary } from '@mcp-tasks/config';
import { defineTool, textResult, z } from '@mcp-tasks/tools';
import {
  assertNoClashes,
  createRegistry,
  loadToolModules,
  resolveToolModule,
  toolsetOf,
  ToolModuleError,
} from '@mcp-tasks/tools/internal';
import { toolsWithoutWorker } from '@mcp-tasks/jobs';
import { SETTINGS } from '../support/toolset-settings.js';

const tool = (name: string, over: Record<string, unknown> = {}) => ({
  ...defineTool({
    name,
    description: 'd',
    inputSchema: z.object({}),
    taskSupport: 'optional',
    async run() {
      return textResult('x');
    },
  }),
  ...over,
});

describe('configuration', () => {
  it('MCP_TOOL_MODULES: trimmed, de-duplicated, in order; empty by default', () => {
    assert.deepEqual(loadConfig({}).toolModules, []);
    assert.deepEqual(loadConfig({ MCP_TOOL_MODULES: ' ./a.mjs, my-tools ,./a.mjs,' }).toolModules, [
      './a.mjs',
      'my-tools',
    ]);
  });

  it('MCP_TOOLSETS=none enables no built-in set, and cannot be combined', () => {
    assert.deepEqual(loadConfig({ MCP_TOOLSETS: 'none' }).toolsets, []);
    assert.throws(
      () => loadConfig({ MCP_TOOLSETS: 'none,demo' }),
      (e: Error) => e instanceof ConfigError && /MCP_TOOLSETS: "none" cannot be combined/.test(e.message),
    );
  });

  it('redactUrl hides a password, keeps the rest', () => {
    assert.equal(redactUrl('redis://svc:s3cret@redis.internal:6380/2'), 'redis://svc:***@redis.internal:6380/2');
    assert.equal(redactUrl('rediss://:s3cret@h:6379'), 'rediss://:***@h:6379');
    assert.equal(redactUrl('redis://127.0.0.1:6379'), 'redis://127.0.0.1:6379');
  });

  it('startupSummary: Redis redacted, prefix, tool sets, modules; auth modes for a gateway only', () => {
    const c = loadConfig({
      REDIS_URL: 'redis://u:pw@h:1',
      REDIS_KEY_PREFIX: 'p',
      MCP_TOOL_MODULES: './m.mjs',
      AUTH_API_KEYS: 'ci:ci-api-key-0123456789abcdef',
      REQUEST_STATE_KEYS: `k1:${'k'.repeat(32)}`,
    });
    assert.deepEqual(startupSummary(c, 'gateway'), {
      redis: 'redis://u:***@h:1',
      keyPrefix: 'p',
      toolsets: ['demo'],
      toolModules: ['./m.mjs'],
      auth: ['api-keys(1)'],
    });
    assert.ok(!('auth' in startupSummary(c, 'worker')));
    assert.deepEqual(authModes(loadConfig({}).auth), ['anonymous(dev-loopback)']);
  });

  it('parseEntryArgs: --help/-h, --version/-v, nothing; anything else is an error', () => {
    assert.deepEqual(parseEntryArgs([]), { action: 'run' });
    assert.deepEqual(parseEntryArgs(['-h']), { action: 'help' });
    assert.deepEqual(parseEntryArgs(['--version']), { action: 'version' });
    assert.equal(parseEntryArgs(['--port', '3']).action, 'error');
    assert.equal(parseEntryArgs(['serve']).action, 'error');
  });
});

describe('tool modules', () => {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-unit-modules-'));
  writeFileSync(join(dir, 'a.mjs'), 'export default [];\n');
  mkdirSync(join(dir, 'pkg'));
  writeFileSync(
    join(dir, 'pkg', 'package.json'),
    JSON.stringify({ name: 'pkg', type: 'module', exports: { '.': { import: './entry.mjs' } } }),
  );
  writeFileSync(join(dir, 'pkg', 'entry.mjs'), 'export default { tools: [] };\n');
  mkdirSync(join(dir, 'main'));
  writeFileSync(join(dir, 'main', 'package.json'), JSON.stringify({ name: 'main', main: 'lib.mjs' }));
  writeFileSync(join(dir, 'main', 'lib.mjs'), 'export default [];\n');
  mkdirSync(join(dir, 'node_modules', 'installed'), { recursive: true });
  writeFileSync(
    join(dir, 'node_modules', 'installed', 'package.json'),
    JSON.stringify({ name: 'installed', type: 'module', exports: './i.js' }),
  );
  writeFileSync(join(dir, 'node_modules', 'installed', 'i.js'), 'export default [];\n');

  it('resolves files, directories (exports, then main), file: URLs and installed package names from cwd', async () => {
    const url = (p: string) => pathToFileURL(join(dir, p)).href;
    assert.equal(resolveToolModule('./a.mjs', dir), url('a.mjs'));
    assert.equal(resolveToolModule(join(dir, 'a.mjs'), '/'), url('a.mjs'));
    assert.equal(resolveToolModule(url('a.mjs'), '/'), url('a.mjs'));
    assert.equal(resolveToolModule('./pkg', dir), url('pkg/entry.mjs'));
    assert.equal(resolveToolModule('./main', dir), url('main/lib.mjs'));
    assert.equal(resolveToolModule('installed', dir), url('node_modules/installed/i.js'));
    assert.throws(() => resolveToolModule('./nope.mjs', dir), /"\.\/nope\.mjs": no such file or directory/);
    assert.throws(
      () => resolveToolModule('not-installed', dir),
      /cannot resolve "not-installed".*install it there, or give a path/,
    );
    const loaded = await loadToolModules(['./a.mjs', './pkg', 'installed'], dir);
    assert.deepEqual(
      loaded.map((m) => m.spec),
      ['./a.mjs', './pkg', 'installed'],
    );
  });

  it('toolsetOf: an array or { tools, … }; each tool checked, the message names the module and the tool', () => {
    assert.deepEqual(
      toolsetOf('m', [tool('a')]).tools.map((t) => t.name),
      ['a'],
    );
    assert.equal(toolsetOf('m', { tools: [tool('a')], prompts: [] }).prompts!.length, 0);
    const bad: [unknown, RegExp][] = [
      [undefined, /"m": its default export must be an array of tools/],
      [{ tools: 'x' }, /its default export must be/],
      [{ tools: [], prompts: {} }, /"m": prompts must be an array/],
      [[tool('has space')], /tool "has space" has an invalid name/],
      [[tool('a', { description: '' })], /tool "a" needs a description/],
      [[tool('a', { inputSchema: { type: 'object' } })], /tool "a" needs inputSchema: z\.object/],
      [[tool('a', { inputSchema: z.string() })], /tool "a" needs inputSchema: z\.object/],
      [[tool('a', { taskSupport: 'sometimes' })], /tool "a" needs taskSupport/],
      [[tool('a', { run: undefined })], /tool "a" needs a run\(args, ctx\) function/],
      [[tool('a', { runsIn: 'browser' })], /tool "a" has runsIn other than/],
      [[42], /tool #1 is not an object/],
    ];
    for (const [exported, re] of bad)
      assert.throws(
        () => toolsetOf('m', exported),
        (e: Error) => e instanceof ToolModuleError && re.test(e.message) && !e.message.includes('\n'),
        String(re),
      );
  });

  it('a name defined twice is refused naming both sources, for tools, prompts and resources', () => {
    const prompt = {
      name: 'p',
      description: 'd',
      async get() {
        return { messages: [] };
      },
    };
    assert.throws(
      () =>
        assertNoClashes([
          { label: 'A', toolset: { tools: [tool('x')] } },
          { label: 'B', toolset: { tools: [tool('x')] } },
        ]),
      /^ToolModuleError: tool name "x" is defined twice: by A and by B; rename one$/,
    );
    assert.throws(
      () => assertNoClashes([{ label: 'A', toolset: { tools: [tool('x'), tool('x')] } }]),
      /tool name "x" is defined twice by A/,
    );
    assert.throws(
      () =>
        assertNoClashes([
          { label: 'A', toolset: { tools: [], prompts: [prompt] } },
          { label: 'B', toolset: { tools: [], prompts: [prompt] } },
        ]),
      /prompt name "p"/,
    );
    assert.throws(
      () =>
        createRegistry(
          ['demo'],
          SETTINGS,
          [],
          [{ spec: './mine.mjs', url: 'file:///mine.mjs', toolset: { tools: [tool('countdown')] } }],
        ),
      /tool name "countdown" is defined twice: by tool set "demo" \(MCP_TOOLSETS\) and by module "\.\/mine\.mjs" \(MCP_TOOL_MODULES\)/,
    );
    const reg = createRegistry(
      ['demo'],
      SETTINGS,
      [],
      [
        {
          spec: './mine.mjs',
          url: 'file:///mine.mjs',
          toolset: { tools: [tool('mine'), tool('inline', { runsIn: 'gateway', taskSupport: 'forbidden' })] },
        },
      ],
    );
    assert.deepEqual(reg.workerToolNames(), ['countdown', 'deep_research', 'mine']);
  });

  it("toolsWithoutWorker: the gateway's tools no live worker runs; none reported while no worker is live", () => {
    assert.deepEqual(toolsWithoutWorker(['a', 'b'], { workers: 2, tools: new Set(['a']) }), ['b']);
    assert.deepEqual(toolsWithoutWorker(['a', 'b'], { workers: 0, tools: new Set() }), []);
    assert.deepEqual(toolsWithoutWorker(['a'], { workers: 1, tools: new Set(['a', 'z']) }), []);
  });

  it('cleanup', () => rmSync(dir, { recursive: true, force: true }));
});
