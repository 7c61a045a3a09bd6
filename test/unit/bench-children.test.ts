/**
 * The benchmark's children die with it (bench/children.ts): a process that owns a child
 * (`sleep 300`, standing in for the benchmark's Redis and gateways) and installed
 * `killChildrenOnExit()` is ended every way the benchmark can end (SIGTERM, SIGINT, its stdout
 * closed under it as by `| head`, an uncaught exception, an unhandled rejection, process.exit);
 * the child must be gone after each. A control without the handlers shows the child outliving
 * its parent, so the check itself can see a leak.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ROOT, waitFor } from '../support/cluster.js';

const CHILDREN = pathToFileURL(join(ROOT, 'bench', 'children.ts')).href;

const FIXTURE = `
import { spawn } from 'node:child_process';
const { own, killChildrenOnExit } = await import(${JSON.stringify(CHILDREN)});
const mode = process.env.MODE;
if (mode !== 'none') killChildrenOnExit();
const c = own(spawn('sleep', ['300'], { stdio: 'ignore' }));
process.stdout.write(c.pid + '\\n');
if (mode === 'epipe') setInterval(() => process.stdout.write('row\\n'), 20);
if (mode === 'throw') setTimeout(() => { throw new Error('boom'); }, 100);
if (mode === 'reject') setTimeout(() => void Promise.reject(new Error('boom')), 100);
if (mode === 'exit') setTimeout(() => process.exit(0), 100);
setInterval(() => undefined, 1000);
`;

/** Whether `pid` runs (a zombie waiting for its reaper counts as gone). */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

/** Starts the fixture in `mode`; resolves with it and its child's pid once both run. */
async function startFixture(mode: string): Promise<{ proc: ChildProcess; childPid: number }> {
  const proc = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', FIXTURE], {
    cwd: ROOT,
    env: { ...process.env, MODE: mode },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const childPid = await new Promise<number>((resolve, reject) => {
    proc.stdout!.once('data', (d: Buffer) => resolve(Number(d.toString().split('\n')[0])));
    proc.once('exit', (code) => reject(new Error(`fixture exited (${code}) before its child started`)));
  });
  assert.ok(alive(childPid), 'the child runs');
  return { proc, childPid };
}

const exited = (proc: ChildProcess) =>
  proc.exitCode !== null || proc.signalCode !== null
    ? Promise.resolve()
    : new Promise<void>((r) => proc.once('exit', () => r()));

describe('bench children die with the benchmark', () => {
  it('control: without killChildrenOnExit the child outlives a SIGTERMed parent', async () => {
    const { proc, childPid } = await startFixture('none');
    proc.kill('SIGTERM');
    await exited(proc);
    try {
      await new Promise((r) => setTimeout(r, 300));
      assert.ok(alive(childPid), 'the leak the handlers prevent');
    } finally {
      process.kill(childPid, 'SIGKILL');
    }
  });

  for (const [mode, end] of [
    ['signal', (p: ChildProcess) => p.kill('SIGTERM')],
    ['signal', (p: ChildProcess) => p.kill('SIGINT')],
    ['epipe', (p: ChildProcess) => p.stdout!.destroy()],
    ['throw', () => undefined],
    ['reject', () => undefined],
    ['exit', () => undefined],
  ] as const) {
    it(`${mode}${mode === 'signal' ? ` (${end.toString().match(/SIG\w+/)![0]})` : ''}: the child is killed`, async () => {
      const { proc, childPid } = await startFixture(mode);
      end(proc);
      await exited(proc);
      if (mode === 'signal') assert.notEqual(proc.exitCode, 0, 'a signal is not a success');
      try {
        await waitFor(() => !alive(childPid), 5000, 50, `child ${childPid} to be gone after ${mode}`);
      } finally {
        if (alive(childPid)) process.kill(childPid, 'SIGKILL');
      }
    });
  }
});
