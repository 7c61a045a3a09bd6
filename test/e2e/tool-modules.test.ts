// @needs redis
/**
 * Your own tools, outside the repository (issue 11 §1, docs/writing-tools.md), through two
 * gateways and two workers, every request on the next gateway:
 *  - the guide's example, examples/tools (a directory with its own package.json, loaded with
 *    MCP_TOOL_MODULES=./examples/tools), as a task (progress, question, answer, result, the file
 *    published once), synchronously (MRTR round, progress notifications), cancelled, declined,
 *    with its side effect already done by an earlier run, and re-run after its worker died;
 *  - a second module made in a temporary directory outside the repository with its own
 *    package.json, depending on the kit through `npm install <repo>/packages/tools` (the way the
 *    guide says), exporting a tool and a prompt;
 *  - a gateway that loads a module its workers lack reports it (`tools.no_worker`) and its task
 *    fails with a clear error instead of hanging;
 *  - at start: a name clash, a bad export and a module that cannot see the kit each stop the
 *    process with one line.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, lstatSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, ROOT, startCluster, type Cluster, type Proc } from '../support/cluster.js';
import { callTool, cancelTask, getTask, pollTask, roundRobin, rpc, updateTask } from '../support/mcp.js';

const EXAMPLE = './examples/tools';

/** A module directory outside the repository, with its own package.json and the kit installed as the guide says. */
function externalModule(files: Record<string, string>, install = true): string {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-ext-tools-'));
  writeFileSync(
    join(dir, 'package.json'),
    JSON.stringify(
      { name: 'ext-tools', version: '1.0.0', private: true, type: 'module', exports: './index.mjs' },
      null,
      2,
    ),
  );
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  if (install) {
    const r = spawnSync(
      'npm',
      ['install', '--offline', '--no-audit', '--no-fund', '--loglevel=error', join(ROOT, 'packages', 'tools')],
      { cwd: dir, encoding: 'utf8', timeout: 120_000 },
    );
    assert.equal(r.status, 0, `npm install of the kit failed: ${r.stderr}`);
    assert.ok(lstatSync(join(dir, 'node_modules', '@mcp-tasks', 'tools')).isSymbolicLink(), 'npm links the kit');
    assert.match(readFileSync(join(dir, 'package.json'), 'utf8'), /"@mcp-tasks\/tools": "file:/);
  }
  return dir;
}

const WORD_COUNT = `
import { defineTool, definePrompt, structuredResult, z } from '@mcp-tasks/tools';

const wordCount = defineTool({
  name: 'word_count',
  description: 'Counts the words of a text, one word at a time.',
  inputSchema: z.object({ text: z.string().min(1).max(2000) }),
  taskSupport: 'optional',
  async run({ text }, ctx) {
    const words = text.split(/\\s+/).filter(Boolean);
    for (let i = 1; i <= words.length; i++) {
      await ctx.sleep(60);
      await ctx.progress(i, words.length, 'Counting ' + words[i - 1]);
    }
    return structuredResult({ summary: 'The text has ' + words.length + ' words.', words: words.length });
  },
});

const countPrompt = definePrompt({
  name: 'count_words',
  description: 'Asks the model to count the words of a text.',
  arguments: { text: { description: 'The text', required: true } },
  async get({ text }) {
    return { messages: [{ role: 'user', content: { type: 'text', text: 'Count the words of: ' + text } }] };
  },
});

export default { tools: [wordCount], prompts: [countPrompt] };
`;

const GATEWAY_ONLY = `
import { defineTool, textResult, z } from '@mcp-tasks/tools';
export default [defineTool({ name: 'gateway_only', description: 'Loaded by one gateway only.', inputSchema: z.object({}), taskSupport: 'optional', async run() { return textResult('ran'); } })];
`;

const ANSWER = (audience: string, breakingFirst = true) => ({
  action: 'accept',
  content: { audience, breaking_first: breakingFirst },
});

describe('tool modules (MCP_TOOL_MODULES) across two gateways and two workers', () => {
  let c: Cluster;
  let ext: string;
  let notesDir: string;
  const dirs: string[] = [];
  before(async () => {
    ext = externalModule({ 'index.mjs': WORD_COUNT });
    notesDir = mkdtempSync(join(tmpdir(), 'mcp-release-notes-'));
    dirs.push(ext, notesDir);
    c = await startCluster({
      gateways: 2,
      workers: 2,
      env: {
        MCP_TOOLSETS: 'demo',
        MCP_TOOL_MODULES: `${EXAMPLE},${ext}`,
        RELEASE_NOTES_PACE_MS: '150',
        RELEASE_NOTES_DIR: notesDir,
      },
    });
  });
  after(async () => {
    await c?.stop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  const published = () => readdirSync(notesDir);

  it("the example's own unit tests pass (examples/tools/release-notes.test.mjs, a test context, no service)", () => {
    const env: NodeJS.ProcessEnv = { ...process.env };
    delete env.NODE_TEST_CONTEXT;
    const r = spawnSync(
      process.execPath,
      ['--conditions=mcp-tasks-src', '--import', 'tsx', '--test', 'release-notes.test.mjs'],
      { cwd: join(ROOT, 'examples', 'tools'), env, encoding: 'utf8', timeout: 60_000 },
    );
    assert.equal(r.status, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /# pass 4\n# fail 0/);
  });

  it("both gateways list the modules' tools and prompt; the start-up lines name the modules", async () => {
    for (const url of c.urls) {
      const tools = (await rpc(url, 'tools/list')).body.result!.tools as {
        name: string;
        inputSchema: Record<string, any>;
      }[];
      const names = tools.map((t) => t.name);
      assert.deepEqual(
        names.slice(-2),
        ['release_notes', 'word_count'],
        'modules after the tool sets, in MCP_TOOL_MODULES order',
      );
      assert.ok(names.includes('countdown'));
      const rn = tools.find((t) => t.name === 'release_notes')!;
      assert.equal(rn.inputSchema.properties.version.type, 'string');
      const prompts = (await rpc(url, 'prompts/list')).body.result!.prompts as { name: string }[];
      assert.deepEqual(
        prompts.map((p) => p.name),
        ['count_words'],
      );
    }
    for (const p of [...c.gateways, ...c.workers]) {
      const ready = p.logs.find((l) => l.msg === `${p.kind}.ready`)!;
      assert.deepEqual(ready.toolModules, [EXAMPLE, ext]);
      assert.deepEqual(ready.toolsets, ['demo']);
      assert.equal(ready.keyPrefix, c.prefix);
    }
  });

  it('release_notes as a task: progress, the question, the answer on another gateway, the notes in structuredContent, published once', async () => {
    const next = roundRobin(c.urls);
    const create = await callTool(next(), 'release_notes', { version: '2.4.0' });
    const taskId = create.body.result!.taskId as string;
    assert.ok(taskId, JSON.stringify(create.body));
    const reading = await pollTask(
      next,
      taskId,
      (t) => /^Reading Change \d of release 2\.4\.0$/.test(t.statusMessage ?? ''),
      10_000,
      50,
    );
    assert.equal(reading.status, 'working');
    const parked = await pollTask(next, taskId, (t) => t.status !== 'working', 15_000);
    assert.equal(parked.status, 'input_required', JSON.stringify(parked));
    assert.equal(parked.statusMessage, 'Waiting for you to choose the audience');
    const [key] = Object.keys(parked.inputRequests);
    const req = parked.inputRequests[key!];
    assert.equal(req.method, 'elicitation/create');
    assert.deepEqual(
      req.params.requestedSchema.properties.audience.oneOf.map((o: any) => o.const),
      ['users', 'developers'],
    );

    await updateTask(next(), taskId, { [key!]: ANSWER('developers') });
    const done = await pollTask(next, taskId, (t) => t.status !== 'working', 15_000);
    assert.equal(done.status, 'completed', JSON.stringify(done));
    const sc = done.result.structuredContent;
    assert.equal(sc.version, '2.4.0');
    assert.equal(sc.audience, 'developers');
    assert.equal(sc.changes, 6);
    assert.match(sc.summary, /^# Release 2\.4\.0\n/);
    assert.match(sc.summary, /What changes for integrators/);
    assert.ok(
      sc.summary.indexOf('## Breaking changes') < sc.summary.indexOf('## New'),
      'breaking changes first, as answered',
    );
    assert.equal(done.result.content[0].text, sc.summary, 'content renders structuredContent.summary (D11)');
    assert.equal(sc.file, join(notesDir, `2.4.0-${taskId}.md`));
    assert.match(readFileSync(sc.file, 'utf8'), /^# Release 2\.4\.0/);
  });

  it('release_notes synchronously (no Tasks extension): progress notifications, an MRTR question, the notes on the retry at the other gateway', async () => {
    const first = await callTool(
      c.urls[0]!,
      'release_notes',
      { version: '3.0.0', changes: 3 },
      { tasks: false, meta: { progressToken: 'rn' } },
    );
    assert.equal(first.body.result?.resultType, 'input_required', JSON.stringify(first.body));
    const progress = first.messages.filter((m) => m.method === 'notifications/progress').map((m) => m.params);
    assert.ok(
      progress.some((p) => p.progressToken === 'rn' && p.total === 3 && /^Reading Change/.test(p.message)),
      JSON.stringify(progress),
    );
    const [key] = Object.keys(first.body.result!.inputRequests);
    const second = await callTool(
      c.urls[1]!,
      'release_notes',
      { version: '3.0.0', changes: 3 },
      { tasks: false },
      {
        inputResponses: { [key!]: ANSWER('users', false) },
        requestState: first.body.result!.requestState,
      },
    );
    assert.equal(second.body.result?.resultType, 'complete', JSON.stringify(second.body));
    const sc = second.body.result!.structuredContent;
    assert.equal(sc.audience, 'users');
    assert.equal(sc.changes, 3);
    assert.match(sc.summary, /What changes for you/);
    assert.ok(
      sc.summary.indexOf('## New') < sc.summary.indexOf('## Breaking changes'),
      'breaking changes last, as answered',
    );
    assert.ok(existsSync(sc.file));
  });

  it('release_notes cancelled while it reads: ends cancelled at once and publishes nothing', async () => {
    const next = roundRobin(c.urls);
    const before = published().length;
    const create = await callTool(next(), 'release_notes', { version: '9.9.9', changes: 40 });
    const taskId = create.body.result!.taskId as string;
    await pollTask(next, taskId, (t) => /^Reading/.test(t.statusMessage ?? ''), 10_000, 50);
    const t0 = Date.now();
    await cancelTask(next(), taskId);
    const end = await pollTask(next, taskId, (t) => t.status !== 'working', 3000, 20);
    assert.equal(end.status, 'cancelled');
    assert.ok(Date.now() - t0 < 2000);
    await new Promise((r) => setTimeout(r, 500));
    assert.equal((await getTask(next(), taskId)).body.result!.status, 'cancelled');
    assert.equal(published().length, before);
  });

  it("release_notes declined: the task ends cancelled with the tool's message", async () => {
    const next = roundRobin(c.urls);
    const taskId = (await callTool(next(), 'release_notes', { version: '1.0.0', changes: 1 })).body.result!
      .taskId as string;
    const parked = await pollTask(next, taskId, (t) => t.status === 'input_required', 10_000);
    const [key] = Object.keys(parked.inputRequests);
    await updateTask(next(), taskId, { [key!]: { action: 'decline' } });
    const end = await pollTask(next, taskId, (t) => t.status !== 'working', 10_000);
    assert.equal(end.status, 'cancelled');
    assert.match(end.statusMessage, /no audience was chosen/);
  });

  it('release_notes whose notes an earlier run of the step already published: not published again (idempotent side effect)', async () => {
    const next = roundRobin(c.urls);
    const taskId = (await callTool(next(), 'release_notes', { version: '5.0.0', changes: 1 })).body.result!
      .taskId as string;
    const parked = await pollTask(next, taskId, (t) => t.status === 'input_required', 10_000);
    const file = join(notesDir, `5.0.0-${taskId}.md`);
    writeFileSync(file, 'published by an earlier run\n'); // what a run that died after publishing leaves
    await updateTask(next(), taskId, { [Object.keys(parked.inputRequests)[0]!]: ANSWER('users') });
    const done = await pollTask(next, taskId, (t) => t.status !== 'working', 10_000);
    assert.equal(done.status, 'completed');
    assert.equal(done.result.structuredContent.file, file);
    assert.equal(readFileSync(file, 'utf8'), 'published by an earlier run\n', 'the earlier publication stands');
  });

  it('the second module (outside the repository): word_count as a task and synchronously, its prompt served', async () => {
    const next = roundRobin(c.urls);
    const taskId = (await callTool(next(), 'word_count', { text: 'one two three four' })).body.result!.taskId as string;
    const done = await pollTask(next, taskId, (t) => t.status !== 'working', 10_000);
    assert.equal(done.status, 'completed', JSON.stringify(done));
    assert.deepEqual(done.result.structuredContent, { summary: 'The text has 4 words.', words: 4 });
    const sync = await callTool(next(), 'word_count', { text: 'a b' }, { tasks: false, meta: { progressToken: 7 } });
    assert.equal(sync.body.result?.structuredContent?.words, 2, JSON.stringify(sync.body));
    assert.deepEqual(
      sync.messages.filter((m) => m.method === 'notifications/progress').map((m) => m.params.progress),
      [1, 2],
    );
    const prompt = await rpc(next(), 'prompts/get', { name: 'count_words', arguments: { text: 'x y' } });
    assert.equal(
      prompt.body.result?.messages?.[0]?.content?.text,
      'Count the words of: x y',
      JSON.stringify(prompt.body),
    );
  });

  it('a gateway with a module its workers lack: it says so in its log, and the task fails with a clear error, not a hang', async () => {
    const only = externalModule({ 'index.mjs': GATEWAY_ONLY });
    dirs.push(only);
    const g: Proc = await c.addGateway({ MCP_TOOL_MODULES: `${EXAMPLE},${ext},${only}` });
    const warned = await g.waitLog((l) => String(l.msg).startsWith('tools.no_worker'), 15_000);
    assert.deepEqual(warned.tools, ['gateway_only']);
    assert.equal(warned.workers, 2);
    for (const other of c.gateways.slice(0, 2))
      assert.ok(
        !other.logs.some((l) => String(l.msg).startsWith('tools.no_worker')),
        'the other gateways match their workers',
      );

    const create = await callTool(g.url!, 'gateway_only', {});
    const taskId = create.body.result!.taskId as string;
    assert.ok(taskId, JSON.stringify(create.body));
    await g.waitLog((l) => String(l.msg).startsWith('task.no_worker_for_tool') && l.tool === 'gateway_only');
    const end = await pollTask(
      () => g.url!,
      taskId,
      (t) => t.status !== 'working',
      5000,
      50,
    );
    assert.equal(end.status, 'failed', JSON.stringify(end));
    assert.equal(end.error.code, -32603);
    assert.match(end.error.message, /Tool gateway_only is not available on the worker .*MCP_TOOL_MODULES/);
    await g.kill();
    c.gateways.splice(c.gateways.indexOf(g), 1);
  });

  // Last: it leaves one worker.
  it('release_notes re-run after its worker died mid-step: another worker runs the step again and the task completes, published once', async () => {
    const next = roundRobin(c.urls);
    const before = published().length;
    const taskId = (await callTool(next(), 'release_notes', { version: '7.0.0', changes: 20 })).body.result!
      .taskId as string;
    await pollTask(next, taskId, (t) => /^Reading Change [2-9] /.test(t.statusMessage ?? ''), 10_000, 50);
    const runner = c.workers.find((w) => w.logs.some((l) => l.msg === 'step.started' && l.taskId === taskId))!;
    await runner.kill();
    const survivor = c.workers.find((w) => w !== runner)!;
    await survivor.waitLog((l) => l.msg === 'step.started' && l.taskId === taskId, 20_000);
    const parked = await pollTask(next, taskId, (t) => t.status !== 'working', 20_000);
    assert.equal(parked.status, 'input_required', JSON.stringify(parked));
    assert.equal(parked.statusMessage, 'Waiting for you to choose the audience');
    await updateTask(next(), taskId, { [Object.keys(parked.inputRequests)[0]!]: ANSWER('users') });
    const done = await pollTask(next, taskId, (t) => t.status !== 'working', 10_000);
    assert.equal(done.status, 'completed', JSON.stringify(done));
    assert.equal(done.result.structuredContent.changes, 20, 'the re-run read every change again');
    assert.equal(published().length, before + 1);
  });
});

describe('tool modules that cannot be used stop the process at start with one line', () => {
  const dirs: string[] = [];
  after(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  /** Runs an entry point against a Redis port nothing listens on: every failure here must come before Redis. */
  async function run(app: 'gateway' | 'worker', modules: string) {
    const r = spawnSync(
      process.execPath,
      ['--conditions=mcp-tasks-src', '--import', 'tsx', join(ROOT, 'apps', app, 'src', 'main.ts')],
      {
        cwd: ROOT,
        env: {
          ...process.env,
          NODE_ENV: 'test',
          MCP_TOOLSETS: 'demo',
          MCP_TOOL_MODULES: modules,
          REDIS_URL: `redis://127.0.0.1:${await freePort()}`,
          PORT: String(await freePort()),
        },
        encoding: 'utf8',
        timeout: 30_000,
      },
    );
    const lines = r.stderr.trim().split('\n').filter(Boolean);
    assert.equal(r.status, 1, r.stderr);
    assert.equal(lines.length, 1, r.stderr);
    return lines[0]!;
  }

  it('a tool name defined twice (a module vs a tool set, a module vs another)', async () => {
    const clash = externalModule({
      'index.mjs': `import { defineTool, textResult, z } from '@mcp-tasks/tools';\nexport default [defineTool({ name: 'countdown', description: 'mine', inputSchema: z.object({}), taskSupport: 'optional', async run() { return textResult('x'); } })];\n`,
    });
    dirs.push(clash);
    for (const app of ['gateway', 'worker'] as const) {
      const line = await run(app, clash);
      assert.equal(
        line,
        `${app}: tool name "countdown" is defined twice: by tool set "demo" (MCP_TOOLSETS) and by module "${clash}" (MCP_TOOL_MODULES); rename one`,
      );
    }
    const twice = await run('gateway', `${EXAMPLE},${EXAMPLE}/release-notes.mjs`);
    assert.match(
      twice,
      /^gateway: tool name "release_notes" is defined twice: by module "\.\/examples\/tools" \(MCP_TOOL_MODULES\) and by module "\.\/examples\/tools\/release-notes\.mjs"/,
    );
  });

  it('a default export that is not tools, a tool without run, a missing file', async () => {
    const bad = externalModule({
      'index.mjs': `export default { hello: 1 };\n`,
      'norun.mjs': `import { z } from '@mcp-tasks/tools';\nexport default [{ name: 'x', description: 'd', inputSchema: z.object({}), taskSupport: 'optional' }];\n`,
    });
    dirs.push(bad);
    assert.match(
      await run('gateway', bad),
      /^gateway: MCP_TOOL_MODULES: ".*": its default export must be an array of tools \(defineTool\) or \{ tools, prompts\?, resources\?, resourceTemplates\? \}$/,
    );
    assert.match(
      await run('worker', join(bad, 'norun.mjs')),
      /^worker: MCP_TOOL_MODULES: ".*norun\.mjs": tool "x" needs a run\(args, ctx\) function$/,
    );
    assert.match(
      await run('gateway', './no/such/module.mjs'),
      /^gateway: MCP_TOOL_MODULES: "\.\/no\/such\/module\.mjs": no such file or directory/,
    );
    assert.match(
      await run('gateway', 'no-such-package-here'),
      /^gateway: MCP_TOOL_MODULES: cannot resolve "no-such-package-here": .*install it there, or give a path/,
    );
  });

  it('a module outside the repository that cannot see the kit: the line says how to install it', async () => {
    const lost = externalModule({ 'index.mjs': GATEWAY_ONLY }, false);
    dirs.push(lost);
    const line = await run('worker', lost);
    assert.match(
      line,
      /^worker: MCP_TOOL_MODULES: cannot load ".*": .*'@mcp-tasks\/tools'.*: the module cannot see the tool kit; in its directory run `npm install <path of this service>\/packages\/tools`/,
    );
  });
});
