#!/usr/bin/env node
/**
 * `npm start`: one gateway and one worker against REDIS_URL (the quick start, design §5).
 * Both children get this process's environment; Ctrl-C / SIGTERM stops both gracefully.
 * If either exits, the other is stopped and `npm start` exits with its code.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const run = (app) =>
  spawn(process.execPath, ['--conditions=mcp-tasks-src', '--import', 'tsx', join(root, 'apps', app, 'src', 'main.ts')], {
    cwd: root,
    stdio: 'inherit',
    env: process.env,
  });

const children = [run('gateway'), run('worker')];
let exiting = false;
const stopAll = (sig) => {
  for (const c of children) if (c.exitCode === null) c.kill(sig);
};
for (const c of children) {
  c.on('exit', (code) => {
    if (exiting) {
      if (children.every((x) => x.exitCode !== null || x.signalCode !== null)) process.exit(0);
      return;
    }
    exiting = true;
    stopAll('SIGTERM');
    setTimeout(() => process.exit(code ?? 1), 15_000).unref();
    const done = () => children.every((x) => x.exitCode !== null || x.signalCode !== null) && process.exit(code ?? 1);
    for (const x of children) x.on('exit', done);
    done();
  });
}
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    exiting = true;
    stopAll('SIGTERM');
  });
}
