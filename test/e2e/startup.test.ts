/**
 * Start-up errors are one clear line, not a stack trace (issue 2 §2).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { ROOT, appEntry, freePort } from '../support/cluster.js';

function run(app: 'gateway' | 'worker', env: Record<string, string>) {
  const r = spawnSync(process.execPath, [appEntry(app)], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    encoding: 'utf8',
    // A bound for a process that never exits, not the time an exit takes: loading the app is
    // about 1.4 s of CPU, which took 22 s of wall time at load 27 (the suite run twice at once
    // beside other work; a 20 s bound killed a gateway on its way to its 5 s connect timeout).
    timeout: 90_000,
  });
  return { code: r.status, stderr: r.stderr.trim(), stdout: r.stdout.trim() };
}

describe('start-up errors', () => {
  for (const app of ['gateway', 'worker'] as const) {
    it(`${app}: unreachable Redis → exit 1 with one line saying what to do`, async () => {
      const port = await freePort(); // nothing listens there
      const r = run(app, { REDIS_URL: `redis://127.0.0.1:${port}`, PORT: String(await freePort()) });
      assert.equal(r.code, 1);
      const lines = r.stderr.split('\n').filter(Boolean);
      assert.equal(lines.length, 1, r.stderr);
      assert.match(lines[0]!, new RegExp(`^${app}: cannot reach Redis at redis://127\\.0\\.0\\.1:${port} .*Start one .*REDIS_URL`));
      assert.doesNotMatch(r.stderr, /\n\s+at /);
    });

    it(`${app}: invalid configuration → exit 1 naming the variable`, () => {
      const r = run(app, { PORT: 'not-a-port', MCP_TOOLSETS: 'demo' });
      assert.equal(r.code, 1);
      assert.match(r.stderr, new RegExp(`^${app}: invalid configuration: PORT: `));
      assert.equal(r.stderr.split('\n').length, 1);
    });
  }

  it('unknown tool set is refused', () => {
    const r = run('gateway', { MCP_TOOLSETS: 'demo,nope' });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /MCP_TOOLSETS: unknown tool set "nope"/);
  });
});
