/**
 * Unit tests of the kit's prompt and resource registries (packages/tools prompts.ts,
 * resources.ts): what `prompts/list`, `resources/list` and `resources/templates/list` show, the
 * checks made when a process starts, and which tool sets contribute what.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { definePrompt, defineResource, defineResourceTemplate } from '@mcp-tasks/tools';
import {
  createPromptRegistry,
  createResourceRegistry,
  PromptRegistry,
  ResourceRegistry,
} from '@mcp-tasks/tools/internal';
import { SETTINGS } from '../support/toolset-settings.js';

const prompt = (name: string, extra: Partial<Parameters<typeof definePrompt>[0]> = {}) =>
  definePrompt({
    name,
    description: `about ${name}`,
    async get() {
      return { messages: [] };
    },
    ...extra,
  });
const resource = (uri: string) =>
  defineResource({
    uri,
    name: uri,
    async read() {
      return [{ uri, text: '' }];
    },
  });

describe('PromptRegistry', () => {
  it('lists name, title, description and arguments (required flags, in declaration order)', () => {
    const reg = new PromptRegistry([
      prompt('a', { title: 'A', arguments: { x: { description: 'the x', required: true }, y: {} } }),
      prompt('b'),
    ]);
    assert.deepEqual(reg.list(), [
      {
        name: 'a',
        title: 'A',
        description: 'about a',
        arguments: [
          { name: 'x', description: 'the x', required: true },
          { name: 'y', required: false },
        ],
      },
      { name: 'b', description: 'about b' },
    ]);
    assert.equal(reg.completes, false);
    assert.equal(new PromptRegistry([prompt('c', { arguments: { z: { complete: () => [] } } })]).completes, true);
  });

  it('refuses duplicate and malformed names when built', () => {
    assert.throws(() => new PromptRegistry([prompt('a'), prompt('a')]), /duplicate prompt name: a/);
    assert.throws(() => new PromptRegistry([prompt('has space')]), /invalid prompt name/);
  });
});

describe('ResourceRegistry', () => {
  it('lists resources and templates; finds a resource by URI and a template by its uriTemplate', () => {
    const t = defineResourceTemplate({
      uriTemplate: 'x://{id}',
      name: 'x',
      mimeType: 'text/plain',
      complete: { id: () => ['1'] },
      async read(uri) {
        return [{ uri, text: '' }];
      },
    });
    const reg = new ResourceRegistry([resource('a://1')], [t]);
    assert.deepEqual(reg.list(), [{ uri: 'a://1', name: 'a://1' }]);
    assert.deepEqual(reg.listTemplates(), [{ uriTemplate: 'x://{id}', name: 'x', mimeType: 'text/plain' }]);
    assert.equal(reg.get('a://1')?.uri, 'a://1');
    assert.equal(reg.get('a://2'), undefined);
    assert.equal(reg.templateFor('x://{id}'), t);
    assert.equal(reg.completes, true);
    assert.equal(reg.size, 2);
  });

  it('refuses a duplicate URI or template name when built', () => {
    assert.throws(
      () => new ResourceRegistry([resource('a://1'), resource('a://1')], []),
      /duplicate resource uri: a:\/\/1/,
    );
    const t = defineResourceTemplate({
      uriTemplate: 'x://{id}',
      name: 'x',
      async read() {
        return [];
      },
    });
    assert.throws(
      () => new ResourceRegistry([], [t, { ...t, uriTemplate: 'y://{id}' }]),
      /duplicate resource template name: x/,
    );
  });
});

describe('tool sets contribute prompts and resources', () => {
  it("conformance has the suite's prompts, resources and template; demo and testing have none", () => {
    const p = createPromptRegistry(['demo', 'conformance', 'testing'], SETTINGS);
    assert.deepEqual(
      p.list().map((e) => e.name),
      [
        'test_simple_prompt',
        'test_prompt_with_arguments',
        'test_prompt_with_embedded_resource',
        'test_prompt_with_image',
        'test_input_required_result_prompt',
      ],
    );
    const r = createResourceRegistry(['conformance'], SETTINGS);
    assert.deepEqual(
      r.list().map((e) => e.uri),
      ['test://static-text', 'test://static-binary', 'test://watched-resource'],
    );
    assert.deepEqual(
      r.listTemplates().map((e) => e.uriTemplate),
      ['test://template/{id}/data'],
    );
    assert.equal(createPromptRegistry(['demo', 'testing'], SETTINGS).size, 0);
    assert.equal(createResourceRegistry(['demo', 'testing'], SETTINGS).size, 0);
  });
});
