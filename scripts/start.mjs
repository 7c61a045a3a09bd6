#!/usr/bin/env node
/**
 * `npm start`: one gateway and one worker against REDIS_URL (the quick start, design §5).
 * Compiles first (`tsc -b`, incremental; skipped in a production-only install), then runs the
 * compiled `apps/<app>/dist/main.js`, as the Docker image does (issue 8 §4).
 * Both children get this process's environment; Ctrl-C / SIGTERM stops both gracefully.
 * If either exits, the other is stopped and `npm start` exits with its code.
 */
import { spawn } from 'node:child_process';
import { appEntry, build, ROOT } from './build.mjs';

try {
  build();
} catch (e) {
  console.error(e.message);
  process.exit(1);
}
const run = (app) =>
  spawn(process.execPath, [appEntry(app)], {
    cwd: ROOT,
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
