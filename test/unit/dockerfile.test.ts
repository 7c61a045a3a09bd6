/**
 * The Dockerfile, checked offline (CI has no Docker; docs/deploying.md has the sizes measured by
 * hand): a build contacts a registry only for its two base images (no `# syntax=` directive,
 * which makes BuildKit fetch a frontend image from Docker Hub); the runtime stage is Debian slim
 * with the node binary, runs production on every address as a non-root user, and takes its
 * dependencies from a stage that installs only the gateway's and the worker's production
 * dependencies without optional ones (TypeScript came in as an optional peer otherwise).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../support/cluster.js';

const text = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
/** Instructions with their continuation lines joined, comments dropped. */
const instructions = text
  .replace(/\\\n/g, ' ')
  .split('\n')
  .map((l) => l.trim())
  .filter((l) => l && !l.startsWith('#'));
/** Stages in order: name, base, instructions. */
const stages: { name: string; from: string; lines: string[] }[] = [];
for (const l of instructions) {
  const m = /^FROM\s+(\S+)(?:\s+AS\s+(\S+))?/i.exec(l);
  if (m) stages.push({ from: m[1]!, name: m[2] ?? '', lines: [] });
  else stages.at(-1)?.lines.push(l);
}
const stage = (name: string) => stages.find((s) => s.name === name)!;

describe('Dockerfile', () => {
  it('no parser directive: the engine’s own Dockerfile frontend, no frontend image from Docker Hub', () => {
    const head = text.split('\n').filter((l) => l.startsWith('#') && /^#\s*\w+\s*=/.test(l));
    assert.deepEqual(head, [], 'no `# syntax=` (or other `# key=value` directive)');
  });

  it('only two base images, the node image and Debian slim of the same release; everything else is a stage', () => {
    const names = new Set(stages.map((s) => s.name));
    const external = [...new Set(stages.map((s) => s.from).filter((f) => !names.has(f)))];
    assert.deepEqual(external.sort(), ['debian:${DEBIAN_RELEASE}-slim', 'node:${NODE_VERSION}-${DEBIAN_RELEASE}-slim']);
    assert.match(text, /^ARG NODE_VERSION=\d+$/m);
    assert.match(text, /^ARG DEBIAN_RELEASE=\w+$/m);
  });

  it('runtime: Debian slim plus the node binary from the node stage, production on 0.0.0.0, non-root, tini; no npm install there', () => {
    const rt = stages.at(-1)!;
    assert.equal(rt.from, 'debian:${DEBIAN_RELEASE}-slim');
    const baseStage = stages.find((s) => s.from.startsWith('node:'))!.name;
    assert.ok(rt.lines.includes(`COPY --from=${baseStage} /usr/local/bin/node /usr/local/bin/node`));
    assert.ok(!rt.lines.some((l) => /\bnpm\b/.test(l) && l.startsWith('RUN') && !/--version/.test(l)), 'no npm');
    const env = rt.lines.find((l) => l.startsWith('ENV '))!;
    assert.match(env, /NODE_ENV=production/);
    assert.match(env, /HOST=0\.0\.0\.0/);
    assert.ok(rt.lines.includes('USER node'));
    assert.match(
      rt.lines.find((l) => l.startsWith('ENTRYPOINT'))!,
      /tini/,
    );
  });

  it('production dependencies of the gateway and worker workspaces only, without dev or optional ones', () => {
    const install = stage('prod-deps').lines.find((l) => /npm ci/.test(l))!;
    assert.match(install, /--omit=dev/);
    assert.match(install, /--omit=optional/);
    const workspaces = [...install.matchAll(/--workspace=(\S+)/g)].map((m) => m[1]).sort();
    const names = ['gateway', 'worker'].map(
      (a) => (JSON.parse(readFileSync(join(ROOT, 'apps', a, 'package.json'), 'utf8')) as { name: string }).name,
    );
    assert.deepEqual(workspaces, names.sort());
    assert.match(install, /! test -e node_modules\/typescript/, 'the build fails if TypeScript is in the runtime tree');
    // The runtime copies this stage's node_modules, not the build stage's (which has TypeScript).
    assert.ok(stages.at(-1)!.lines.includes('COPY --from=prod-deps /app ./'));
    assert.ok(!stages.at(-1)!.lines.some((l) => /--from=build \/app(\/node_modules)? /.test(l)));
  });
});
