/**
 * A terminal program under test, driven the way a person would: it runs in a detached tmux
 * session on a private socket (its own tmux server, never the user's), keys go in with
 * `send-keys`, the screen comes back with `capture-pane -p`. Needs `tmux` on PATH (.ci/run
 * installs it).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sleep } from './cluster.js';

export interface Terminal {
  /** The visible screen as plain text (one line per row). */
  screen(): string;
  /** Sends tmux key names (`Enter`, `Down`, `Space`, `Escape`) or literal text with `{literal: true}`. */
  keys(keys: string[], o?: { literal?: boolean }): void;
  /** Polls the screen until `re` matches; throws with the last screen after `timeoutMs`. */
  waitScreen(re: RegExp, timeoutMs?: number, what?: string): Promise<string>;
  /** True while the program (the pane's process) runs. */
  alive(): boolean;
  /** Kills the program's process group and the private tmux server; removes the socket folder. */
  close(): void;
}

const shellQuote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/**
 * Starts `argv` in `cwd` with exactly `env` (nothing else: launched through `env -i`) in a
 * `cols`×`rows` terminal.
 */
export function startTerminal(
  argv: string[],
  o: { cwd: string; env: Record<string, string>; cols?: number; rows?: number },
): Terminal {
  const dir = mkdtempSync(join(tmpdir(), 'tmux-test-'));
  const socket = join(dir, 'sock');
  const launcher = join(dir, 'run.sh');
  writeFileSync(
    launcher,
    `cd ${shellQuote(o.cwd)} || exit 1\nexec env -i ${Object.entries(o.env)
      .map(([k, v]) => shellQuote(`${k}=${v}`))
      .join(' ')} ${argv.map(shellQuote).join(' ')}\n`,
  );
  // The tmux server itself gets a minimal environment too (its panes would inherit it).
  const tmuxEnv = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: o.env.HOME ?? dir,
    TERM: 'xterm-256color',
    LANG: 'C.UTF-8',
  };
  const tmux = (...args: string[]) =>
    execFileSync('tmux', ['-S', socket, ...args], {
      env: tmuxEnv,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  tmux(
    '-f',
    '/dev/null',
    'new-session',
    '-d',
    '-s',
    'main',
    '-x',
    String(o.cols ?? 160),
    '-y',
    String(o.rows ?? 50),
    `sh ${shellQuote(launcher)}`,
  );
  // Keep the pane (and its last screen) if the program exits, so a failure can be read.
  tmux('set-option', '-t', 'main', 'remain-on-exit', 'on');
  const pid = Number(tmux('display-message', '-p', '-t', 'main', '#{pane_pid}').trim());
  let closed = false;
  const t: Terminal = {
    screen: () => (closed ? '' : tmux('capture-pane', '-p', '-t', 'main')),
    keys(keys, ko = {}) {
      tmux('send-keys', '-t', 'main', ...(ko.literal ? ['-l'] : []), ...keys);
    },
    async waitScreen(re, timeoutMs = 15_000, what = String(re)) {
      const end = Date.now() + timeoutMs;
      let last = '';
      for (;;) {
        last = t.screen();
        if (re.test(last)) return last;
        if (Date.now() > end)
          throw new Error(
            `terminal: ${what} not on screen within ${timeoutMs} ms; screen:\n${last.replace(/\n\s*\n/g, '\n')}`,
          );
        await sleep(100);
      }
    },
    alive() {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    },
    close() {
      if (closed) return;
      closed = true;
      for (const target of [-pid, pid]) {
        try {
          process.kill(target, 'SIGKILL');
        } catch {
          /* gone */
        }
      }
      try {
        tmux('kill-server');
      } catch {
        /* already gone */
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return t;
}
