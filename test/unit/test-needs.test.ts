/**
 * The `// @needs` line of every test file (scripts/test-needs.mjs) says exactly what the file
 * starts or connects to, so that `npm test -- <files>` asks for nginx, tmux, redis-server or a
 * Redis only when a selected file uses it, and never misses one it does.
 *
 * What a file uses is read from its own text: a call to one of the test/support entry points
 * below (or a script it runs) means the need. A new helper that starts one of these binaries or
 * reaches the test Redis adds its entry point here.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { ROOT } from '../support/cluster.js';
import { declaredNeeds, fewFiles, needsOfFiles, NEEDS } from '../../scripts/test-needs.mjs';

/** Need → the calls and script names in a test file that mean it. */
const USES: Record<keyof typeof NEEDS, RegExp> = {
  // The cluster helper defaults to the test Redis; the shared URL constant and the variable name it.
  redis: /\bstartCluster\(|\bSHARED_REDIS_URL\b|\benv\.TEST_REDIS_URL\b/,
  // Throwaway servers, clusters and sentinels (support/cluster.ts, support/redis-cluster.ts);
  // `npm start`'s script starts its own redis-server when none answers.
  'redis-server': /\bstartRedis\(|\bstartRedisCluster\(|\bstartSentinelSetup\(|'start\.mjs'/,
  // support/nginx.ts; `npm run stack`'s script runs nginx in front of its gateways.
  nginx: /\bstartNginx\(|\bstack\.mjs\b/,
  // support/tmux.ts; support/claude-code.ts runs the interactive CLI in it.
  tmux: /\bstartTerminal\(|\bstartClaudeInteractive\(/,
  // support/python-clients.ts: the venv of scripts/python-clients.mjs.
  'python-clients': /\bpythonClientsPython\(/,
  // support/typescript-sdk.ts: the SDK 1.32 of tools/typescript-sdk.
  'typescript-sdk': /\btypescriptSdkScript\(/,
};

const walk = (dir: string): string[] =>
  readdirSync(dir).flatMap((f) => {
    const p = join(dir, f);
    return statSync(p).isDirectory() ? walk(p) : p.endsWith('.test.ts') ? [relative(ROOT, p)] : [];
  });
const files = walk(join(ROOT, 'test')).sort();

describe('test files declare what they need (// @needs)', () => {
  it('every test file declares exactly the needs its code uses', () => {
    const wrong: string[] = [];
    for (const f of files) {
      const text = readFileSync(join(ROOT, f), 'utf8');
      const used = Object.entries(USES)
        .filter(([, re]) => re.test(text))
        .map(([n]) => n)
        .sort();
      const declared = declaredNeeds(text, f);
      if (used.join(' ') !== declared.join(' '))
        wrong.push(`${f}: uses [${used.join(' ')}], declares [${declared.join(' ')}]`);
    }
    assert.deepEqual(wrong, [], 'fix the "// @needs" line before the imports');
  });

  it('unit tests need nothing; the files that run nginx or tmux are the ones expected', () => {
    const needs = needsOfFiles(ROOT, files);
    const unit = files.filter((f) => f.startsWith('test/unit/'));
    for (const [need, of] of needs)
      assert.deepEqual(
        of.filter((f) => unit.includes(f)),
        [],
        `no unit test needs ${need}`,
      );
    // Spot checks: the files these prerequisites exist for.
    assert.ok(needs.get('nginx')?.includes('test/e2e/cases-b10.test.ts'));
    assert.ok(needs.get('nginx')?.includes('test/e2e/topology.test.ts'));
    assert.ok(needs.get('nginx')?.includes('test/e2e/hardening-stack.test.ts'));
    assert.ok(needs.get('tmux')?.includes('test/e2e/claude-code-interactive.test.ts'));
    assert.ok(needs.get('python-clients')?.includes('test/e2e/python-clients.test.ts'));
    assert.ok(needs.get('typescript-sdk')?.includes('test/e2e/typescript-sdk-client.test.ts'));
    assert.ok(needs.get('redis-server')?.includes('test/e2e/redis-outage.test.ts'));
    assert.ok(needs.get('redis')?.includes('test/integration/task-store.test.ts'));
  });

  it('the header line: any order, spaces or commas, only before the imports; unknown needs refused', () => {
    assert.deepEqual(declaredNeeds('/** doc */\nimport x from "y";\n'), []);
    assert.deepEqual(declaredNeeds('// @needs tmux, redis  nginx\n/** doc */\nimport x from "y";\n'), [
      'nginx',
      'redis',
      'tmux',
    ]);
    assert.deepEqual(declaredNeeds('/** doc */\nimport x from "y";\n// @needs nginx\n'), [], 'after the imports');
    assert.throws(
      () => declaredNeeds('// @needs docker\nimport x from "y";\n', 'f.test.ts'),
      /f\.test\.ts: unknown need "docker"/,
    );
    assert.throws(() => declaredNeeds('// @needs redis\n// @needs nginx\nimport x from "y";\n'), /more than one/);
    assert.equal(fewFiles(['a', 'b']), 'a, b');
    assert.equal(fewFiles(['a', 'b', 'c', 'd', 'e']), 'a, b, c and 2 more');
  });
});
