// @needs redis tmux
/**
 * The terminal client `mcp-tasks` (apps/cli, issue 11 §2), built with tsc and run as
 * `node apps/cli/dist/main.js`, against two gateways and two workers behind a per-request
 * round-robin proxy (so every request of one CLI run lands on another gateway, D7), with an API
 * key in MCP_TASKS_TOKEN:
 *  - `deep_research` driven to completion in a real terminal (tmux): the progress bar, the
 *    audience question answered with the arrow keys through the prompt, the report printed;
 *  - `share_report` (taskSupport 'forbidden'): no task, its MRTR question answered at a confirm;
 *  - Ctrl-C on a running task: cancel it from the menu, or leave it running and `cancel` it;
 *  - `watch --notify` follows a task through `subscriptions/listen` and raises the notification
 *    when it completes — node-notifier's `notify-send` replaced by a recording script first on
 *    PATH (the only stub, at the process boundary); a `notify-send` that fails rings the bell;
 *  - `--help` on every command and `--version` without any server; the credential check.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT, startCluster, waitFor, type Cluster } from '../support/cluster.js';
import { callTool, getTask, pollTask, TASKS, updateTask } from '../support/mcp.js';
import { startRoundRobinProxy, type ProxyLogEntry, type RoundRobinProxy } from '../support/round-robin-proxy.js';
import { startTerminal, type Terminal } from '../support/tmux.js';

const CLI = join(ROOT, 'apps', 'cli', 'dist', 'main.js');
const TOKEN = 'cli-test-key-5b0d1c9e7a4f4e2d8c6b';
const COMMANDS = ['call', 'get', 'cancel', 'watch', 'tools'];

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the built CLI without a terminal (stdin closed), as a script would. */
function runCli(args: string[], env: Record<string, string>, timeoutMs = 30_000): Promise<Run> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [CLI, ...args], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
    p.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
    const timer = setTimeout(() => {
      p.kill('SIGKILL');
      reject(
        new Error(
          `mcp-tasks ${args.join(' ')} did not end within ${timeoutMs} ms; stdout: ${stdout}; stderr: ${stderr}`,
        ),
      );
    }, timeoutMs);
    p.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

const shellQuote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

describe('mcp-tasks, the terminal client (issue 11 §2)', () => {
  let c: Cluster;
  let proxy: RoundRobinProxy;
  let dir: string;
  let env: Record<string, string>;
  const terminals: Terminal[] = [];

  /**
   * A terminal running `mcp-tasks <args>`; the shell prints `[exit N]` when it ends. The shell
   * traps SIGINT (so Ctrl-C reaches the CLI and the shell still prints the code afterwards); the
   * CLI, started by exec, gets the default disposition and installs its own handler.
   */
  const terminal = (args: string[]) => {
    const t = startTerminal(
      ['sh', '-c', `trap : INT; ${[process.execPath, CLI, ...args].map(shellQuote).join(' ')}; echo "[exit $?]"`],
      { cwd: ROOT, env, cols: 140, rows: 40 },
    );
    terminals.push(t);
    return t;
  };
  /** Proxy log entries from index `from` on. */
  const wire = (from = 0) => proxy.log.slice(from);
  const explain = (from = 0) =>
    wire(from)
      .map(
        (e: ProxyLogEntry) => `${e.mcpMethod ?? e.method} ${e.mcpName ?? ''} → ${e.status} via gateway ${e.upstream}`,
      )
      .join('\n');

  before(async () => {
    // The CLI as shipped: compiled with tsc (a no-op when `npm run build` already ran).
    execFileSync(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-b', 'apps/cli'], {
      cwd: ROOT,
      stdio: 'inherit',
    });
    dir = mkdtempSync(join(tmpdir(), 'mcp-tasks-cli-'));
    c = await startCluster({ gateways: 2, workers: 2, env: { AUTH_API_KEYS: `cli:${TOKEN}` } });
    proxy = await startRoundRobinProxy(c.urls, { capture: true });
    env = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: dir,
      TERM: 'xterm-256color',
      LANG: 'C.UTF-8',
      MCP_TASKS_URL: proxy.url,
      MCP_TASKS_TOKEN: TOKEN,
    };
  });
  after(async () => {
    for (const t of terminals) t.close();
    await proxy?.close();
    await c?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('--help on every command and --version answer without a server (exit 0)', async () => {
    const offline = { PATH: env.PATH!, HOME: dir, MCP_TASKS_URL: 'http://127.0.0.1:9/mcp' };
    const version = await runCli(['--version'], offline);
    assert.equal(version.code, 0);
    assert.equal(
      version.stdout.trim(),
      JSON.parse(readFileSync(join(ROOT, 'apps', 'cli', 'package.json'), 'utf8')).version,
    );
    const top = await runCli(['--help'], offline);
    assert.equal(top.code, 0, top.stderr);
    for (const cmd of COMMANDS) assert.match(top.stdout, new RegExp(`^  ${cmd}\\b`, 'm'), `the top help lists ${cmd}`);
    assert.match(top.stdout, /MCP_TASKS_TOKEN/);
    for (const cmd of COMMANDS) {
      const h = await runCli([cmd, '--help'], offline);
      assert.equal(h.code, 0, `${cmd} --help: ${h.stderr}`);
      assert.match(h.stdout, new RegExp(`^Usage: mcp-tasks ${cmd} `, 'm'), `${cmd} --help`);
    }
    const bad = await runCli(['call'], offline);
    assert.equal(bad.code, 2, 'a missing argument is a usage error');
    assert.match(bad.stderr, /missing required argument 'tool'/);
  });

  it('the credential comes from MCP_TASKS_TOKEN: without it a clear 401 message; with it `tools` lists the tools', async () => {
    const { MCP_TASKS_TOKEN: _, ...noToken } = env;
    const refused = await runCli(['tools'], noToken);
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /wants credentials: set MCP_TASKS_TOKEN/);
    const from = proxy.log.length;
    const tools = await runCli(['tools'], env);
    assert.equal(tools.code, 0, tools.stderr);
    for (const name of ['countdown', 'deep_research', 'share_report', 'add'])
      assert.match(tools.stdout, new RegExp(`^${name}\\s`, 'm'));
    // Task support comes from each tool's _meta["mcp-tasks/taskSupport"] (ToolRegistry.list).
    assert.match(tools.stdout, /^deep_research\s+optional\s/m);
    assert.match(tools.stdout, /^add\s+forbidden\s/m);
    const list = wire(from).find((e) => e.mcpMethod === 'tools/list')!;
    assert.equal(list.headers?.authorization, `Bearer ${TOKEN}`);
    const meta = JSON.parse(list.body!).params._meta;
    assert.equal(meta['io.modelcontextprotocol/protocolVersion'], '2026-07-28');
    assert.deepEqual(meta['io.modelcontextprotocol/clientCapabilities'], {
      elicitation: { form: {} },
      extensions: { [TASKS]: {} },
    });
  });

  it('call deep_research in a terminal: progress bar, the audience question answered through the prompt, the report (T-21, T-27, T-30)', async () => {
    const from = proxy.log.length;
    const t = terminal(['call', 'deep_research', '--arg', 'topic=tidal energy']);
    await t.waitScreen(/Task [0-9a-f-]{36} \(deep_research\) started/, 20_000, 'the task handle');
    await t.waitScreen(
      /deep_research [░█]+ .*working .*Collecting sources on tidal energy/,
      15_000,
      'the progress bar with the status message',
    );
    await t.waitScreen(
      /Who is the report on "tidal energy" for\?[\s\S]*❯ My team[\s\S]*The whole company/,
      20_000,
      'the audience question as a select',
    );
    t.keys(['Down']);
    await t.waitScreen(/❯ The whole company/, 5000, 'the second choice');
    t.keys(['Enter']);
    const screen = await t.waitScreen(/\[exit \d+\]/, 30_000, 'the end of the call');
    assert.match(screen, /Research report: "tidal energy"/);
    assert.match(screen, /Audience: the whole company/);
    assert.match(screen, /\[exit 0\]/);

    // On the wire: one tools/call answered with a task, tasks/get polls, one tasks/update with
    // the answer under the question's key, every request with the headers and the bearer token.
    const w = wire(from).filter((e) => e.mcpMethod !== 'tools/list');
    const create = w.find((e) => e.mcpMethod === 'tools/call')!;
    assert.equal(create.mcpName, 'deep_research');
    const taskId = String(JSON.parse(create.response!).result.taskId);
    const update = w.find((e) => e.mcpMethod === 'tasks/update');
    assert.ok(update, explain(from));
    assert.equal(update.mcpName, taskId);
    const asked = w
      .filter((e) => e.mcpMethod === 'tasks/get')
      .map((e) => JSON.parse(e.response!).result)
      .find((r) => r?.status === 'input_required');
    const key = Object.keys(asked.inputRequests)[0]!;
    assert.deepEqual(JSON.parse(update.body!).params.inputResponses, {
      [key]: { action: 'accept', content: { audience: 'company' } },
    });
    for (const e of w) {
      assert.equal(e.headers?.authorization, `Bearer ${TOKEN}`);
      assert.equal(e.headers?.['mcp-protocol-version'], '2026-07-28');
      assert.equal(e.status, 200, explain(from));
    }
    assert.ok(
      w.filter((e) => e.mcpMethod === 'tasks/get').every((e) => e.mcpName === taskId),
      'Mcp-Name carries the task id (T-42)',
    );
    assert.ok(new Set(w.map((e) => e.upstream)).size === 2, `requests spread over both gateways:\n${explain(from)}`);
    const done = await getTask(c.urls[0]!, taskId, { token: TOKEN });
    assert.equal(done.body.result?.status, 'completed');
  });

  it('call share_report (taskSupport forbidden): no task; the MRTR question answered at a confirm, then retried with requestState', async () => {
    const from = proxy.log.length;
    const t = terminal(['call', 'share_report', '--arg', 'channel=#research']);
    await t.waitScreen(/Share to #research\?[\s\S]*Notify the channel.*\(y\/N\)/, 20_000, 'the confirm');
    t.keys(['y', 'Enter']);
    const screen = await t.waitScreen(/\[exit \d+\]/, 20_000, 'the end of the call');
    assert.match(screen, /Shared the report to #research and notified its members\./);
    assert.match(screen, /\[exit 0\]/);
    const calls = wire(from).filter((e) => e.mcpMethod === 'tools/call');
    assert.equal(calls.length, 2, explain(from));
    assert.equal(JSON.parse(calls[0]!.response!).result.resultType, 'input_required');
    const retry = JSON.parse(calls[1]!.body!).params;
    assert.equal(typeof retry.requestState, 'string');
    assert.deepEqual(Object.values(retry.inputResponses), [{ action: 'accept', content: { notify: true } }]);
    assert.ok(!wire(from).some((e) => e.mcpMethod?.startsWith('tasks/')), 'no task');
  });

  it('a synchronous tool from a script: add prints the summary, --json the raw result; a wrong --arg type is refused before sending', async () => {
    const text = await runCli(['call', 'add', '--arg', 'a=2', '--arg', 'b=3.5'], env);
    assert.equal(text.code, 0, text.stderr);
    assert.equal(text.stdout.trim(), '2 + 3.5 = 5.5');
    const json = await runCli(['call', 'add', '--args', '{"a": 1}', '--arg', 'b=2', '--json'], env);
    assert.equal(json.code, 0, json.stderr);
    assert.equal(JSON.parse(json.stdout).structuredContent.sum, 3);
    const bad = await runCli(['call', 'countdown', '--arg', 'seconds=soon'], env);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /seconds is an integer/);
  });

  it('Ctrl-C on a running task → "Cancel the task": tasks/cancel, the task ends cancelled, exit 3 (T-36)', async () => {
    const t = terminal(['call', 'countdown', '--arg', 'seconds=10']);
    const started = await t.waitScreen(/Task ([0-9a-f-]{36}) \(countdown\) started/, 20_000, 'the task handle');
    const taskId = /Task ([0-9a-f-]{36})/.exec(started)![1]!;
    await t.waitScreen(/countdown .*\d+% working .*\d\/10 s/, 15_000, 'progress');
    t.keys(['C-c']);
    await t.waitScreen(
      /still running\. What now\?[\s\S]*Leave it running[\s\S]*Cancel the task/,
      5000,
      'the Ctrl-C menu',
    );
    t.keys(['Down']);
    await t.waitScreen(/❯ Cancel the task/, 5000, 'Cancel selected');
    t.keys(['Enter']);
    const screen = await t.waitScreen(/\[exit \d+\]/, 15_000, 'the end');
    assert.match(screen, new RegExp(`Task ${taskId} was cancelled`));
    assert.match(screen, /\[exit 3\]/);
    assert.equal((await getTask(c.urls[1]!, taskId, { token: TOKEN })).body.result?.status, 'cancelled');
  });

  it('Ctrl-C → "Leave it running" prints the id (exit 130); `mcp-tasks cancel <id>` then cancels it', async () => {
    // A long tool, so "left running" is still true however slow the machine is.
    const t = terminal(['call', 'slow_echo', '--arg', 'seconds=120', '--arg', 'text=hi']);
    await t.waitScreen(/slow_echo .*working .*slept \d+ of 120 s/, 20_000, 'progress');
    t.keys(['C-c']);
    await t.waitScreen(/❯ Leave it running/, 5000, 'the Ctrl-C menu');
    t.keys(['Enter']);
    const screen = await t.waitScreen(/\[exit \d+\]/, 10_000, 'the end');
    assert.match(screen, /\[exit 130\]/);
    const taskId = /^([0-9a-f-]{36})$/m.exec(screen)?.[1];
    assert.ok(taskId, `the id alone on a line:\n${screen}`);
    assert.equal((await getTask(c.urls[0]!, taskId, { token: TOKEN })).body.result?.status, 'working', 'left running');

    const cancel = await runCli(['cancel', taskId], env);
    assert.equal(cancel.code, 0, cancel.stderr);
    assert.equal(cancel.stdout.trim(), `Task ${taskId} cancelled.`);
    assert.equal((await getTask(c.urls[1]!, taskId, { token: TOKEN })).body.result?.status, 'cancelled');
    const get = await runCli(['get', taskId, '--json'], env);
    assert.equal(get.code, 3, `get of a cancelled task exits 3 (cancelled): ${get.stderr}`);
    assert.equal(JSON.parse(get.stdout).status, 'cancelled');
    const unknown = await runCli(['cancel', '00000000-0000-4000-8000-000000000000'], env);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /-32602/);
  });

  it('watch --notify: follows the task through subscriptions/listen and raises the desktop notification when it asks and when it completes (T-39)', async () => {
    // node-notifier runs `notify-send "<title>" "<message>" …` on Linux: a recording stand-in
    // first on PATH is the only stub.
    const bin = join(dir, 'bin');
    const record = join(dir, 'notify-send.log');
    execFileSync('mkdir', ['-p', bin]);
    writeFileSync(
      join(bin, 'notify-send'),
      `#!/bin/sh\n{ printf '%s\\037' "$@"; printf '\\n'; } >> ${shellQuote(record)}\n`,
    );
    chmodSync(join(bin, 'notify-send'), 0o755);
    // A task that waits for an answer: it ends only when the test answers, after the watcher is
    // has been told of the question (a task that ends on a timer may end before a slow CLI start polls).
    const created = await callTool(c.urls[0]!, 'ask_confirm', { question: 'Ship it?' }, { token: TOKEN });
    const taskId = String(created.body.result?.taskId);
    const asked = await pollTask(
      () => c.urls[1]!,
      taskId,
      (r) => r.status === 'input_required',
      15_000,
      100,
      { token: TOKEN },
    );
    const key = Object.keys(asked.inputRequests ?? {})[0]!;
    const from = proxy.log.length;
    const watching = runCli(['watch', taskId, '--notify'], { ...env, PATH: `${bin}:${env.PATH}` }, 30_000);
    // The proxy sees the listen request before the gateway has read the task for its first
    // notification: answering then can move the task on before the watcher ever sees the
    // question. The watcher's own notification of the question is the signal that it has.
    await waitFor(
      async () => existsSync(record) && readFileSync(record, 'utf8').includes('a task needs your answer'),
      20_000,
      50,
      'the watcher told of the question',
    );
    const answered = await updateTask(
      c.urls[1]!,
      taskId,
      { [key]: { action: 'accept', content: { confirm: true } } },
      { token: TOKEN },
    );
    assert.equal(answered.status, 200, JSON.stringify(answered.body));
    const watch = await watching;
    const endedAt = Date.now();
    assert.equal(watch.code, 0, watch.stderr);
    assert.equal(watch.stdout.trim(), 'confirmed: true');
    assert.ok(existsSync(record), `notify-send was not run; stderr: ${watch.stderr}`);
    const calls = readFileSync(record, 'utf8')
      .trim()
      .split('\n')
      .map((l) => l.split('\x1f').filter(Boolean));
    assert.deepEqual(
      calls.map((c) => c.slice(0, 2)),
      [
        ['mcp-tasks: a task needs your answer', `Task ${taskId} asks a question`],
        ['mcp-tasks: task completed', `confirmed: true (task ${taskId})`],
      ],
    );
    // Pushed, not polled: one tasks/get to check the id, then the listen stream alone.
    const w = wire(from);
    const listen = w.find((e) => e.mcpMethod === 'subscriptions/listen');
    assert.deepEqual(JSON.parse(listen!.body!).params.notifications.taskIds, [taskId]);
    assert.equal(w.filter((e) => e.mcpMethod === 'tasks/get').length, 1, explain(from));
    const completed = await getTask(c.urls[1]!, taskId, { token: TOKEN });
    assert.equal(completed.body.result?.status, 'completed');
    const lag = endedAt - Date.parse(completed.body.result!.lastUpdatedAt);
    assert.ok(lag < 5000, `the watcher ended ${lag} ms after the task completed`);
  });

  it('watch --notify where the desktop refuses (notify-send fails): the terminal bell instead', async () => {
    const bin = join(dir, 'bin-broken');
    execFileSync('mkdir', ['-p', bin]);
    writeFileSync(
      join(bin, 'notify-send'),
      '#!/bin/sh\necho "Cannot autolaunch D-Bus without X11 $DISPLAY" >&2\nexit 1\n',
    );
    chmodSync(join(bin, 'notify-send'), 0o755);
    const created = await callTool(c.urls[1]!, 'countdown', { seconds: 1 }, { token: TOKEN });
    const taskId = String(created.body.result?.taskId);
    await pollTask(
      () => c.urls[0]!,
      taskId,
      (r) => r.status === 'completed',
      15_000,
      100,
      { token: TOKEN },
    );
    const watch = await runCli(['watch', taskId, '--notify'], { ...env, PATH: `${bin}:${env.PATH}` });
    assert.equal(watch.code, 0, watch.stderr);
    assert.ok(watch.stderr.includes('\x07'), `a bell on stderr: ${JSON.stringify(watch.stderr)}`);
    assert.match(watch.stderr, /rang the terminal bell/);
  });

  it('get shows a task for people; an unknown id is an error (T-33)', async () => {
    const created = await callTool(c.urls[0]!, 'countdown', { seconds: 1 }, { token: TOKEN });
    const taskId = String(created.body.result?.taskId);
    await waitFor(
      async () => (await getTask(c.urls[1]!, taskId, { token: TOKEN })).body.result?.status === 'completed',
      15_000,
      100,
      'completed',
    );
    const get = await runCli(['get', taskId], env);
    assert.equal(get.code, 0, get.stderr);
    assert.match(get.stdout, new RegExp(`^${taskId}  completed$`, 'm'));
    assert.match(get.stdout, /Countdown from 1 finished\./);
    const unknown = await runCli(['get', 'no-such-task'], env);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /^mcp-tasks: .*\(-32602\)$/m);
    // A failed task, and one completed with a tool error: exit 1, as the help's exit codes say
    // (a script can test `get`).
    for (const [tool, status] of [
      ['protocol_error_job', 'failed'],
      ['failing_job', 'completed'],
    ] as const) {
      const made = await callTool(c.urls[0]!, tool, {}, { token: TOKEN });
      const id = String(made.body.result?.taskId);
      await waitFor(
        async () => (await getTask(c.urls[1]!, id, { token: TOKEN })).body.result?.status === status,
        15_000,
        100,
        `${tool} ${status}`,
      );
      const shown = await runCli(['get', id], env);
      assert.equal(shown.code, 1, `get of ${tool} (${status}) exits 1: ${shown.stderr}`);
      assert.match(shown.stdout, new RegExp(`^${id}  ${status}$`, 'm'));
    }
  });
});
