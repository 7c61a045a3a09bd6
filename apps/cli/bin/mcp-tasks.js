#!/usr/bin/env node
// The `mcp-tasks` command: runs the compiled CLI (apps/cli/dist, built by `npm run build`).
// In a fresh checkout that has not been built yet it runs the TypeScript sources through tsx
// instead (as `npm start` does for the service), in a child process that owns the terminal.
import { existsSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const dist = new URL('../dist/main.js', import.meta.url);
if (existsSync(fileURLToPath(dist))) {
  await import(dist.href);
} else {
  // The child gets Ctrl-C from the terminal itself; this process only waits for it.
  process.on('SIGINT', () => undefined);
  const r = spawnSync(
    process.execPath,
    [
      '--conditions=mcp-tasks-src',
      '--import',
      import.meta.resolve('tsx'),
      fileURLToPath(new URL('../src/main.ts', import.meta.url)),
      ...process.argv.slice(2),
    ],
    { stdio: 'inherit' },
  );
  process.exit(r.status ?? 1);
}
