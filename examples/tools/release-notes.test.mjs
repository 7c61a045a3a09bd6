/**
 * Unit tests of release_notes (docs/writing-tools.md, "Test it"): the tool's `run` called with
 * a test context, no service needed. Run them with `node --test` in this directory (the kit's
 * compiled files must exist: `npm run build` in the service once); test/e2e/tool-modules.test.ts
 * runs them too, then runs the tool end to end through the service.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isInputRequired, testContext, unreadableFacts } from '@mcp-tasks/tools';

// Settings are read when the module loads: set them first.
const out = mkdtempSync(join(tmpdir(), 'release-notes-test-'));
process.env.RELEASE_NOTES_DIR = out;
const { releaseNotes } = await import('./release-notes.mjs');
test.after(() => rmSync(out, { recursive: true, force: true }));

/** The arguments as the service passes them: parsed by the tool's schema (defaults applied). */
const args = (a) => releaseNotes.inputSchema.parse(a);

test('step 1 reads every change, reporting progress, then asks who the notes are for', async () => {
  const t = testContext();
  const step1 = await releaseNotes.run(args({ version: '1.2.0', changes: 3 }), t.ctx);
  assert.ok(isInputRequired(step1));
  assert.deepEqual(
    t.progress.map((p) => [p.done, p.total]),
    [
      [1, 3],
      [2, 3],
      [3, 3],
    ],
  );
  assert.equal(step1.inputRequests.audience.method, 'elicitation/create');
  assert.equal(step1.state.changes.length, 3);
});

test('step 2 writes the notes for the chosen audience, publishes them once, and the model can read them', async () => {
  const state = {
    changes: [
      { id: 'a', kind: 'breaking', title: 'Dropped Node 18' },
      { id: 'b', kind: 'feature', title: 'Dark mode' },
    ],
  };
  const answer = { audience: { action: 'accept', content: { audience: 'users', breaking_first: true } } };
  const t = testContext({ step: 2, state, inputResponses: answer, taskId: 'task-1' });
  const result = await releaseNotes.run(args({ version: '1.2.0' }), t.ctx);
  const sc = result.structuredContent;
  assert.equal(sc.audience, 'users');
  assert.match(sc.summary, /## Breaking changes\n- Dropped Node 18\n\n## New\n- Dark mode/);
  assert.deepEqual(unreadableFacts(result), [], 'everything the text says is in structuredContent (D11)');
  assert.equal(readFileSync(sc.file, 'utf8').split('\n')[0], '# Release 1.2.0');

  // The same step again (its worker died after publishing): not published twice.
  const again = testContext({ step: 2, state, inputResponses: answer, taskId: 'task-1' });
  await releaseNotes.run(args({ version: '1.2.0' }), again.ctx);
  assert.equal(again.progress.at(-1).message, 'Already published by an earlier run of this step');
});

test('declining the question ends the task cancelled', async () => {
  const t = testContext({ step: 2, state: { changes: [] }, inputResponses: { audience: { action: 'decline' } } });
  await assert.rejects(releaseNotes.run(args({ version: '1.2.0' }), t.ctx), { name: 'ToolCancelled' });
});

test('a cancelled task stops reading and publishes nothing', async () => {
  const t = testContext({ taskId: 'task-2' });
  t.cancel();
  await assert.rejects(releaseNotes.run(args({ version: '2.0.0' }), t.ctx), { name: 'AbortError' });
  assert.equal(existsSync(join(out, '2.0.0-task-2.md')), false);
});
