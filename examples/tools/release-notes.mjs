/**
 * release_notes: the example of docs/writing-tools.md, a long tool written against the kit of
 * mcp-task-service and loaded with MCP_TOOL_MODULES (this file, or the directory holding it).
 *
 * It reads the changes of a release (one at a time, reporting progress), asks who the notes are
 * for, writes them, publishes them once (even if its step runs twice), and returns them in a
 * result a model can read. Cancelling stops it within one change.
 *
 * Settings (read once, when the module loads; set them where the service runs):
 *   RELEASE_NOTES_PACE_MS  time spent on each change (default 400 ms; the tests use less)
 *   RELEASE_NOTES_DIR      where notes are published (default: <system temp dir>/release-notes)
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { accepted, defineTool, elicitForm, inputRequired, structuredResult, ToolCancelled, z } from '@mcp-tasks/tools';

const PACE_MS = Number(process.env.RELEASE_NOTES_PACE_MS ?? 400);
const OUT_DIR = process.env.RELEASE_NOTES_DIR || join(tmpdir(), 'release-notes');

/**
 * The changes of a release. A stand-in: a real tool would ask its version control or issue
 * tracker here, passing `signal` on (e.g. `fetch(url, { signal })`) so a cancel stops it.
 */
async function readChange(version, i, signal) {
  signal.throwIfAborted();
  const kinds = ['feature', 'fix', 'fix', 'breaking'];
  return { id: `${version}-${i}`, kind: kinds[i % kinds.length], title: `Change ${i} of release ${version}` };
}

/** The question asked between the two phases: a form with one choice and one yes/no. */
const AUDIENCE_FORM = {
  type: 'object',
  properties: {
    audience: {
      type: 'string',
      title: 'Audience',
      description: 'Who will read these release notes?',
      oneOf: [
        { const: 'users', title: 'Users of the product' },
        { const: 'developers', title: 'Developers who build on it' },
      ],
    },
    breaking_first: { type: 'boolean', title: 'List breaking changes first', default: true },
  },
  required: ['audience'],
};

/** The notes as Markdown. */
function render(version, audience, breakingFirst, changes) {
  const order = breakingFirst ? ['breaking', 'feature', 'fix'] : ['feature', 'fix', 'breaking'];
  const heading = { breaking: 'Breaking changes', feature: 'New', fix: 'Fixed' };
  const lines = [
    `# Release ${version}`,
    '',
    audience === 'users' ? 'What changes for you:' : 'What changes for integrators:',
  ];
  for (const kind of order) {
    const some = changes.filter((c) => c.kind === kind);
    if (some.length) lines.push('', `## ${heading[kind]}`, ...some.map((c) => `- ${c.title}`));
  }
  return lines.join('\n');
}

/**
 * Publishes the notes at most once per task, however often this step runs: a step re-runs when
 * its worker dies or loses its lock, so every side effect needs a key that stays the same across
 * re-runs. Here the file name is that key (`wx` fails if the file exists); for an HTTP API, send
 * it as the idempotency key.
 */
async function publishOnce(key, text) {
  await mkdir(OUT_DIR, { recursive: true });
  const file = join(OUT_DIR, `${key}.md`);
  try {
    await writeFile(file, text, { flag: 'wx' });
    return { file, published: true };
  } catch (e) {
    if (e.code === 'EEXIST') return { file, published: false };
    throw e;
  }
}

export const releaseNotes = defineTool({
  name: 'release_notes',
  title: 'Release notes',
  description:
    'Writes the release notes of a version: reads its changes (a few seconds), asks who the notes are for, then writes and publishes them. Returns the notes.',
  inputSchema: z.object({
    version: z
      .string()
      .regex(/^[0-9A-Za-z.+-]{1,40}$/)
      .describe('The version to write notes for, e.g. 2.4.0'),
    changes: z.number().int().min(1).max(40).default(6).describe('How many changes to read (1-40)'),
  }),
  taskSupport: 'optional',
  requiresCapabilities: { elicitation: { form: {} } },

  async run({ version, changes: count }, ctx) {
    // Step 1: read the changes, then ask. Returning inputRequired ends the step: no worker is
    // held while the person thinks; `run` is called again (step 2) with the answer and `state`.
    if (ctx.step === 1) {
      const changes = [];
      for (let i = 1; i <= count; i++) {
        await ctx.sleep(PACE_MS); // rejects at once when the task is cancelled
        const change = await readChange(version, i, ctx.signal);
        changes.push(change);
        await ctx.progress(i, count, `Reading ${change.title}`);
      }
      return inputRequired({
        inputRequests: { audience: elicitForm(`Who are the release notes of ${version} for?`, AUDIENCE_FORM) },
        state: { changes }, // small JSON: step 2 does not read the changes again
        statusMessage: 'Waiting for you to choose the audience',
      });
    }

    // Step 2: the answer. Declining (or cancelling the question) ends the task `cancelled`.
    const answer = accepted(ctx.inputResponses, 'audience');
    if (answer?.audience !== 'users' && answer?.audience !== 'developers') {
      throw new ToolCancelled('No release notes written: no audience was chosen');
    }
    const { changes } = ctx.state;
    await ctx.progress(1, 2, `Writing the notes for ${answer.audience}`);
    await ctx.sleep(PACE_MS);
    const notes = render(version, answer.audience, answer.breaking_first !== false, changes);
    ctx.signal.throwIfAborted(); // nothing is published once the task was cancelled
    const { file, published } = await publishOnce(`${version}-${ctx.taskId}`, notes);
    await ctx.progress(2, 2, published ? 'Published' : 'Already published by an earlier run of this step');

    // The model reads structuredContent only (Claude Code): `summary` carries the notes
    // themselves; `content` gets the same text for clients that show it.
    return structuredResult({
      summary: `${notes}\n\nPublished to ${file}.`,
      version,
      audience: answer.audience,
      changes: changes.length,
      file,
    });
  },
});

// What MCP_TOOL_MODULES reads: the default export, an array of tools (or an object
// `{ tools, prompts, resources, resourceTemplates }`).
export default [releaseNotes];
