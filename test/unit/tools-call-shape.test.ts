/**
 * `tools/call` params of the wrong shape get one short sentence naming the field
 * (apps/gateway/src/tools-call-shape.ts), not zod's issue list; the right shapes pass.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { toolsCallShapeError } from '../../apps/gateway/src/tools-call-shape.js';

describe('toolsCallShapeError', () => {
  it('names the field and what it held', () => {
    assert.deepEqual(toolsCallShapeError({ name: 'add', arguments: [1] }), {
      message: 'Invalid params: params.arguments must be an object, not an array',
      data: { field: 'params.arguments', received: 'an array' },
    });
    assert.deepEqual(toolsCallShapeError({ name: 5 }), {
      message: "Invalid params: params.name must be a string (the tool's name), not a number",
      data: { field: 'params.name', received: 'a number' },
    });
    assert.equal(toolsCallShapeError({})?.data.field, 'params.name');
    assert.equal(toolsCallShapeError({ name: 'x', arguments: 'a=1' })?.data.received, 'a string');
    assert.equal(toolsCallShapeError(undefined)?.data.field, 'params');
    assert.equal(toolsCallShapeError([])?.data.received, 'an array');
  });

  it('accepts a name with an object or no arguments', () => {
    assert.equal(toolsCallShapeError({ name: 'add', arguments: { a: 1, b: 2 } }), undefined);
    assert.equal(toolsCallShapeError({ name: 'add' }), undefined);
    assert.equal(toolsCallShapeError({ name: 'add', arguments: {}, _meta: {} }), undefined);
  });
});
