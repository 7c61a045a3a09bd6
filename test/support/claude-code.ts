/**
 * Runs the real Claude Code CLI (`@anthropic-ai/claude-code`, pinned in tools/claude-code/)
 * against our MCP endpoint, with the model replaced by the scripted loopback stub
 * (anthropic-stub.ts). Issue 7 §4; how the CLI behaves is in shared clients.md §0.
 *
 * Each run gets a fresh temporary `HOME` and project folder:
 *  - `HOME/.claude.json`: onboarding done, the dummy API key approved (Claude Code keys the
 *    approval by the key's last 20 characters), the project folder trusted;
 *  - `<project>/.mcp.json`: one server `tasks` = `{type: "http", url, headers: {Authorization:
 *    "Bearer ${MCP_TASKS_TOKEN}"}, timeout: 600000}` (the docs' `${VAR}` expansion: the token
 *    is only in the CLI's environment, never in a file);
 *  - `<project>/.claude/settings.local.json`: the project's MCP servers enabled and every tool
 *    of `tasks` allowed (`mcp__tasks`), so print mode never stops at a permission prompt;
 *    optionally an `Elicitation` hook that answers every question of the server with a fixed
 *    answer (print mode has no one to ask: without the hook Claude Code answers `cancel`,
 *    clients.md §0.7) and appends the question it got to `HOME/elicitations.jsonl`.
 * The CLI's environment is built from scratch (no variable of the calling process leaks in):
 * `ANTHROPIC_BASE_URL` = the stub, a dummy `ANTHROPIC_API_KEY`, telemetry, error reporting,
 * auto-update and all non-essential traffic off, and no automatic install of the official
 * plugin marketplace (without CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL the
 * interactive CLI runs `git` over https and ssh to github.com and `ssh -T git@github.com`, i.e.
 * DNS queries off the machine, even with non-essential traffic off). Measured with
 * `strace -f -e trace=execve,connect,sendto` on 2.1.328, print and interactive mode: the only
 * sockets it opens are to the stub and to the MCP URL, both on 127.0.0.1; its child processes
 * are local (`git ls-files`/`rev-parse`, its bundled `rg`, `ps aux` for IDE detection).
 * Every run also has a tripwire (tripwire-proxy.ts) as `HTTPS_PROXY`/`HTTP_PROXY`, loopback in
 * `NO_PROXY`: whatever the CLI tries to reach off the machine through its HTTP client is
 * recorded in `offLoopback` (the tests assert it is empty) and refused. Without the variables
 * above it records `CONNECT api.anthropic.com:443` at once (measured on 2.1.328).
 */
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT, sleep } from './cluster.js';
import {
  startAnthropicStub,
  type AnthropicStub,
  type RecordedRequest,
  type Step,
  type Turn,
} from './anthropic-stub.js';
import { startTerminal, type Terminal } from './tmux.js';
import { startTripwire } from './tripwire-proxy.js';
import type { ProxyLogEntry } from './round-robin-proxy.js';

/** The pinned version (tools/claude-code/package.json). */
export const CLAUDE_CODE_VERSION = '2.1.332';
const TOOL_DIR = join(ROOT, 'tools', 'claude-code');
/** The dummy key: never a real one. Only the stub ever sees it. */
export const DUMMY_API_KEY = 'sk-ant-api03-mcp-task-service-test-key-not-real-000000000000000000AA';
/** The MCP server's name in `.mcp.json` (tool names are `mcp__tasks__<tool>`). */
export const SERVER_NAME = 'tasks';

/**
 * Path of the CLI's native binary, installing tools/claude-code (`npm ci`) on first use.
 * The binary ships in the per-platform optional dependency (`@anthropic-ai/claude-code-linux-x64`
 * here); the wrapper's postinstall only copies it over `bin/claude.exe`, so the platform package
 * is used directly (it works whether or not npm ran the postinstall). Throws if no package for
 * this platform is installed.
 */
export async function claudeCodeBinary(): Promise<string> {
  const platformBin = join(
    TOOL_DIR,
    'node_modules',
    '@anthropic-ai',
    `claude-code-${process.platform}-${process.arch}`,
    'claude',
  );
  if (existsSync(platformBin)) return platformBin;
  // Install once, even with several test files starting together: an exclusive lock file.
  const lock = join(TOOL_DIR, '.install.lock');
  for (let waited = 0; ; waited += 200) {
    try {
      closeSync(openSync(lock, 'wx'));
      break;
    } catch {
      if (waited > 300_000) throw new Error(`claude-code install: ${lock} held for 5 min`);
      await sleep(200);
      if (existsSync(platformBin)) return platformBin;
    }
  }
  try {
    if (!existsSync(platformBin)) {
      const r = spawnSync('npm', ['ci', '--prefix', TOOL_DIR, '--no-audit', '--no-fund'], {
        encoding: 'utf8',
        timeout: 300_000,
      });
      if (r.status !== 0)
        throw new Error(`npm ci --prefix tools/claude-code failed (${r.status}): ${r.stderr || r.stdout}`);
    }
  } finally {
    rmSync(lock, { force: true });
  }
  if (!existsSync(platformBin))
    throw new Error(`no Claude Code binary for ${process.platform}-${process.arch} in tools/claude-code`);
  return platformBin;
}

export interface ClaudeWorkspace {
  home: string;
  project: string;
  /** The CLI's whole environment (nothing inherited but PATH). */
  env: Record<string, string>;
  /** The questions the Elicitation hook answered (its JSON inputs), in order. */
  elicitations(): Record<string, any>[];
  cleanup(): void;
}

/** What the Elicitation hook answers (the hook's `hookSpecificOutput`). */
export interface ElicitationAnswer {
  action: 'accept' | 'decline' | 'cancel';
  content?: Record<string, unknown>;
}

export interface WorkspaceOptions {
  /** The MCP endpoint (e.g. the round-robin proxy's URL). */
  mcpUrl: string;
  /** The model stub's origin (ANTHROPIC_BASE_URL). */
  modelUrl: string;
  /** The bearer token, passed only as MCP_TASKS_TOKEN in the CLI's environment. */
  token: string;
  /** Extra environment for the CLI. */
  env?: Record<string, string>;
  /** Answer the server's questions with this through an `Elicitation` hook. */
  elicitation?: ElicitationAnswer;
}

/** Creates a temporary HOME and project folder configured as described in the module doc. */
export function claudeWorkspace(o: WorkspaceOptions): ClaudeWorkspace {
  const home = mkdtempSync(join(tmpdir(), 'cc-home-'));
  const project = mkdtempSync(join(tmpdir(), 'cc-project-'));
  writeFileSync(
    join(home, '.claude.json'),
    JSON.stringify({
      hasCompletedOnboarding: true,
      customApiKeyResponses: { approved: [DUMMY_API_KEY.slice(-20)], rejected: [] },
      projects: { [project]: { hasTrustDialogAccepted: true, allowedTools: [] } },
    }),
  );
  writeFileSync(
    join(project, '.mcp.json'),
    JSON.stringify({
      mcpServers: {
        [SERVER_NAME]: {
          type: 'http',
          url: o.mcpUrl,
          headers: { Authorization: 'Bearer ${MCP_TASKS_TOKEN}' },
          timeout: 600_000,
        },
      },
    }),
  );
  const asked = join(home, 'elicitations.jsonl');
  let hooks: Record<string, unknown> | undefined;
  if (o.elicitation) {
    const answer = join(home, 'elicitation-answer.json');
    writeFileSync(answer, JSON.stringify({ hookSpecificOutput: { hookEventName: 'Elicitation', ...o.elicitation } }));
    // The hook reads its input (the question) on stdin and answers on stdout.
    hooks = {
      Elicitation: [
        { hooks: [{ type: 'command', command: `cat >> '${asked}'; echo >> '${asked}'; cat '${answer}'` }] },
      ],
    };
  }
  mkdirSync(join(project, '.claude'));
  writeFileSync(
    join(project, '.claude', 'settings.local.json'),
    JSON.stringify({
      enableAllProjectMcpServers: true,
      permissions: { allow: [`mcp__${SERVER_NAME}`] },
      ...(hooks ? { hooks } : {}),
    }),
  );
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    LANG: 'C.UTF-8',
    TERM: 'dumb',
    HOME: home,
    TMPDIR: tmpdir(),
    ANTHROPIC_BASE_URL: o.modelUrl,
    ANTHROPIC_API_KEY: DUMMY_API_KEY,
    DISABLE_TELEMETRY: '1',
    DISABLE_ERROR_REPORTING: '1',
    DISABLE_AUTOUPDATER: '1',
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL: '1',
    MCP_TASKS_TOKEN: o.token,
    ...o.env,
  };
  return {
    home,
    project,
    env,
    elicitations() {
      if (!existsSync(asked)) return [];
      return readFileSync(asked, 'utf8')
        .split('\n')
        .filter((l) => l.trim())
        .map((l) => JSON.parse(l) as Record<string, any>);
    },
    cleanup() {
      rmSync(home, { recursive: true, force: true });
      rmSync(project, { recursive: true, force: true });
    },
  };
}

export interface PrintRunOptions {
  prompt: string;
  /** The model's turns (see anthropic-stub.ts). */
  script: Step[];
  /** What the model says once the script is used up (default "Done."). */
  after?: Turn;
  mcpUrl: string;
  token: string;
  /** Kill the CLI's process group after this long (default 120000 ms). */
  timeoutMs?: number;
  env?: Record<string, string>;
  elicitation?: ElicitationAnswer;
}

export interface PrintRun {
  /** Exit code, or null when killed. */
  code: number | null;
  signal: NodeJS.Signals | null;
  timedOut: boolean;
  /** When the CLI was started (ms since epoch) and how long it ran. */
  startedAt: number;
  durationMs: number;
  stdout: string;
  stderr: string;
  /** `--output-format json`'s result object, when stdout parsed. */
  result?: Record<string, any>;
  /** Every request the model stub received. */
  requests: RecordedRequest[];
  /** The main conversation's requests (each carries the previous turns' tool_results). */
  mainRequests: RecordedRequest[];
  /** Errors thrown by script steps. */
  scriptErrors: Error[];
  /** The questions the Elicitation hook answered (only with `elicitation`). */
  elicitations: Record<string, any>[];
  /** What the CLI tried to reach off loopback (the tripwire's record; must stay empty). */
  offLoopback: string[];
}

/**
 * Runs `claude -p <prompt> --output-format json --no-session-persistence` in a fresh workspace
 * with a fresh model stub, bounded by `timeoutMs` (then SIGKILL to the whole process group).
 * Never throws for the CLI's own failure: the caller asserts on `code`, `result`, `requests`.
 */
export async function runClaudePrint(o: PrintRunOptions): Promise<PrintRun> {
  const bin = await claudeCodeBinary();
  const stub: AnthropicStub = await startAnthropicStub({ script: o.script, ...(o.after ? { after: o.after } : {}) });
  const tripwire = await startTripwire();
  const ws = claudeWorkspace({
    mcpUrl: o.mcpUrl,
    modelUrl: stub.origin,
    token: o.token,
    env: { ...tripwire.env, ...o.env },
    ...(o.elicitation ? { elicitation: o.elicitation } : {}),
  });
  const started = Date.now();
  try {
    const child = spawn(bin, ['-p', o.prompt, '--output-format', 'json', '--no-session-persistence'], {
      cwd: ws.project,
      env: ws.env,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true, // its own process group, so a timeout kills everything it started
    });
    let stdout = '';
    let stderr = '';
    child.stdout!.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        /* already gone */
      }
    }, o.timeoutMs ?? 120_000);
    const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) =>
      child.once('close', (c, s) => resolve([c, s])),
    );
    clearTimeout(timer);
    // Whatever the CLI left in its group (it should leave nothing) goes too.
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      /* none left */
    }
    let result: Record<string, any> | undefined;
    try {
      result = JSON.parse(stdout) as Record<string, any>;
    } catch {
      result = undefined;
    }
    return {
      code,
      signal,
      timedOut,
      startedAt: started,
      durationMs: Date.now() - started,
      stdout,
      stderr,
      ...(result ? { result } : {}),
      requests: stub.requests,
      mainRequests: stub.mainRequests(),
      scriptErrors: stub.errors,
      elicitations: ws.elicitations(),
      offLoopback: [...tripwire.attempts],
    };
  } finally {
    await stub.close();
    await tripwire.close();
    ws.cleanup();
  }
}

/**
 * Runs `claude mcp list` (Claude Code's health check of the configured servers: it connects to
 * each, prints one line per server, e.g. `tasks: <url> (HTTP) - ✓ Connected` or
 * `- ! Needs authentication`) in a fresh workspace with `token` as MCP_TASKS_TOKEN. Bounded by
 * `timeoutMs` (default 60000 ms; then SIGKILL to its process group).
 */
export async function claudeMcpList(o: {
  mcpUrl: string;
  token: string;
  timeoutMs?: number;
}): Promise<{ code: number | null; stdout: string; offLoopback: string[] }> {
  const bin = await claudeCodeBinary();
  // No model request is expected; the stub is there so that any would stay on loopback.
  const stub = await startAnthropicStub({ script: [] });
  const tripwire = await startTripwire();
  const ws = claudeWorkspace({ mcpUrl: o.mcpUrl, modelUrl: stub.origin, token: o.token, env: tripwire.env });
  try {
    const child = spawn(bin, ['mcp', 'list'], {
      cwd: ws.project,
      env: ws.env,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    let stdout = '';
    child.stdout!.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr!.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    const kill = () => {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        /* gone */
      }
    };
    const timer = setTimeout(kill, o.timeoutMs ?? 60_000);
    const code = await new Promise<number | null>((resolve) => child.once('close', (c) => resolve(c)));
    clearTimeout(timer);
    kill();
    return { code, stdout, offLoopback: [...tripwire.attempts] };
  } finally {
    await stub.close();
    await tripwire.close();
    ws.cleanup();
  }
}

export interface InteractiveOptions {
  script: Step[];
  after?: Turn;
  mcpUrl: string;
  token: string;
  env?: Record<string, string>;
  cols?: number;
  rows?: number;
}

export interface InteractiveSession {
  term: Terminal;
  stub: AnthropicStub;
  workspace: ClaudeWorkspace;
  /** What the CLI tried to reach off loopback so far (the tripwire's record; must stay empty). */
  offLoopback(): string[];
  /** Types `text` at the prompt and presses Enter. */
  prompt(text: string): void;
  /** Ends the CLI (kills its process group), the stub and the workspace. */
  close(): Promise<void>;
}

/**
 * Starts the interactive CLI (`claude`, no arguments) in a tmux terminal, in a fresh workspace
 * with a fresh model stub, and waits for its prompt. The caller drives it with `term.keys()`
 * and reads `term.screen()`; `close()` always cleans up (call it in `after`).
 */
export async function startClaudeInteractive(o: InteractiveOptions): Promise<InteractiveSession> {
  const bin = await claudeCodeBinary();
  const stub = await startAnthropicStub({ script: o.script, ...(o.after ? { after: o.after } : {}) });
  const tripwire = await startTripwire();
  const workspace = claudeWorkspace({
    mcpUrl: o.mcpUrl,
    modelUrl: stub.origin,
    token: o.token,
    env: { TERM: 'xterm-256color', ...tripwire.env, ...o.env },
  });
  let term: Terminal | undefined;
  const close = async () => {
    term?.close();
    await stub.close();
    await tripwire.close();
    workspace.cleanup();
  };
  try {
    term = startTerminal([bin], {
      cwd: workspace.project,
      env: workspace.env,
      cols: o.cols ?? 160,
      rows: o.rows ?? 50,
    });
    // The input box is drawn when the CLI is ready (and its MCP servers are connected).
    await term.waitScreen(/^❯\s/m, 30_000, 'the prompt');
  } catch (e) {
    await close();
    throw e;
  }
  const t = term;
  return {
    term: t,
    stub,
    workspace,
    offLoopback: () => [...tripwire.attempts],
    prompt(text) {
      t.keys([text], { literal: true });
      t.keys(['Enter']);
    },
    close,
  };
}

/**
 * One line per request Claude Code sent through the capturing proxy: MCP method and name, which
 * gateway, status, whether `Authorization` arrived as `Bearer <token>` (expanded from the
 * environment), User-Agent, the declared clientCapabilities, progressToken and MRTR answers.
 */
export function describeWire(entries: ProxyLogEntry[], token: string): string[] {
  return entries.map((e) => {
    let params: Record<string, any> = {};
    try {
      params = (JSON.parse(e.body ?? '{}') as { params?: Record<string, any> }).params ?? {};
    } catch {
      /* not JSON */
    }
    const meta: Record<string, any> = params._meta ?? {};
    const auth = e.headers?.authorization;
    return (
      `  ${new Date(e.at).toISOString().slice(11, 23)} ${e.method} ${e.mcpMethod ?? '-'} name=${e.headers?.['mcp-name'] ?? '-'} → gateway ${e.upstream} HTTP ${e.status}; ` +
      `auth=${auth === `Bearer ${token}` ? 'Bearer <token, expanded>' : JSON.stringify(auth)}; ua=${e.headers?.['user-agent']}; ` +
      `caps=${JSON.stringify(meta['io.modelcontextprotocol/clientCapabilities'])}` +
      (meta.progressToken !== undefined ? `; progressToken=${meta.progressToken}` : '') +
      (params.inputResponses ? `; inputResponses=${JSON.stringify(params.inputResponses)}` : '') +
      (params.requestState ? '; requestState echoed' : '')
    );
  });
}
