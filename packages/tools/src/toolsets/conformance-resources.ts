/**
 * Resources of the `conformance` tool set: the ones the suite's `resources-*`,
 * `sep-2164-resource-not-found` and `caching` scenarios read, with the reference server's URIs
 * and contents.
 */
import { defineResource, defineResourceTemplate } from '../resources.js';
import { TEST_IMAGE_BASE64 } from './conformance-core.js';

export const staticText = defineResource({
  uri: 'test://static-text',
  name: 'static-text',
  title: 'Static Text Resource',
  description: 'A static text resource (conformance fixture).',
  mimeType: 'text/plain',
  async read() {
    return [
      { uri: 'test://static-text', mimeType: 'text/plain', text: 'This is the content of the static text resource.' },
    ];
  },
});

export const staticBinary = defineResource({
  uri: 'test://static-binary',
  name: 'static-binary',
  title: 'Static Binary Resource',
  description: 'A static binary resource, a 1×1 PNG (conformance fixture).',
  mimeType: 'image/png',
  async read() {
    return [{ uri: 'test://static-binary', mimeType: 'image/png', blob: TEST_IMAGE_BASE64 }];
  },
});

export const watchedResource = defineResource({
  uri: 'test://watched-resource',
  name: 'watched-resource',
  title: 'Watched Resource',
  description: 'A static text resource (conformance fixture; 2025 subscribe scenarios).',
  mimeType: 'text/plain',
  async read() {
    return [{ uri: 'test://watched-resource', mimeType: 'text/plain', text: 'Watched resource content' }];
  },
});

export const dataTemplate = defineResourceTemplate({
  uriTemplate: 'test://template/{id}/data',
  name: 'template',
  title: 'Resource Template',
  description: 'JSON data for an id (conformance fixture).',
  mimeType: 'application/json',
  complete: { id: (value) => ['123', '456', '789'].filter((v) => v.startsWith(value)) },
  async read(uri, { id }) {
    return [
      {
        uri,
        mimeType: 'application/json',
        text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` }),
      },
    ];
  },
});

export const conformanceResources = [staticText, staticBinary, watchedResource];
export const conformanceResourceTemplates = [dataTemplate];
