/**
 * The protocol's names are written twice on purpose: in the gateway and in the terminal client
 * (`@mcp-tasks/client`, which ships apart from the service and depends on no service package).
 * This holds the copies equal to each other and to the MCP SDK's own.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { TASKS_EXTENSION_ID_V2 } from '@modelcontextprotocol/ext-tasks/core/v2';
import { PROTOCOL_VERSION, TASKS_EXTENSION as CLIENT_TASKS_EXTENSION } from '@mcp-tasks/client';
import { TASKS_EXTENSION } from '../../apps/gateway/src/tasks-extension.js';
import { MODERN_VERSIONS } from '../../apps/gateway/src/classify.js';

describe('protocol names shared by the gateway and the terminal client', () => {
  it('the Tasks extension id is the same in the gateway, the client and the SDK', () => {
    assert.equal(TASKS_EXTENSION, TASKS_EXTENSION_ID_V2);
    assert.equal(CLIENT_TASKS_EXTENSION, TASKS_EXTENSION_ID_V2);
  });

  it('the revision the client speaks is one the gateway serves as modern', () => {
    assert.ok(MODERN_VERSIONS.includes(PROTOCOL_VERSION), `${PROTOCOL_VERSION} not in ${MODERN_VERSIONS.join(', ')}`);
  });
});
