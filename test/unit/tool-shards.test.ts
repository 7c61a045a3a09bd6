/**
 * The tools-queue shards (TOOL_QUEUE_SHARDS, issue 9 §7): the pure shard function (FNV-1a of
 * the taskId mod N), the shard prefixes (shard 0 = today's `{jobs}`, so one shard is the layout
 * before sharding) and their Redis Cluster slots, and the variable's validation.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { bullPrefix, fnv1a32, toolShard, toolsPrefix } from '@mcp-tasks/jobs';
import { ConfigError, loadConfig } from '@mcp-tasks/config';

/** CRC16/XMODEM of the hash tag, mod 16384: the Redis Cluster slot of `key`. */
function keySlot(key: string): number {
  const open = key.indexOf('{');
  const close = open >= 0 ? key.indexOf('}', open + 1) : -1;
  const tagged = open >= 0 && close > open + 1 ? key.slice(open + 1, close) : key;
  let crc = 0;
  for (const b of Buffer.from(tagged)) {
    crc ^= b << 8;
    for (let i = 0; i < 8; i++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc % 16384;
}

describe('tools-queue shards', () => {
  it('fnv1a32 matches the published FNV-1a 32-bit test vectors', () => {
    assert.equal(fnv1a32(''), 0x811c9dc5);
    assert.equal(fnv1a32('a'), 0xe40c292c);
    assert.equal(fnv1a32('foobar'), 0xbf9cf968);
  });

  it('one shard: every task on shard 0; N shards: a stable shard in [0, N)', () => {
    const ids = Array.from({ length: 3000 }, () => randomUUID());
    for (const id of ids.slice(0, 100)) assert.equal(toolShard(id, 1), 0);
    const counts = [0, 0, 0];
    for (const id of ids) {
      const s = toolShard(id, 3);
      assert.ok(Number.isInteger(s) && s >= 0 && s < 3);
      assert.equal(toolShard(id, 3), s, 'same id, same shard');
      assert.equal(s, fnv1a32(id) % 3);
      counts[s]!++;
    }
    // 3000 random ids: each shard gets about a third (far outside chance below 800).
    for (const n of counts) assert.ok(n > 800, `balanced: ${counts.join('/')}`);
  });

  it('shard 0 keeps the unsharded prefix; every further shard has its own hash tags and Cluster slots', () => {
    assert.equal(toolsPrefix('mcp', 0), bullPrefix('mcp'));
    assert.equal(toolsPrefix('mcp', 0), 'mcp:{jobs}');
    assert.equal(toolsPrefix('mcp', 2), 'mcp:{jobs-2}');
    const slots = [0, 1, 2, 3].map((i) => keySlot(`${toolsPrefix('mcp', i)}:tools:wait`));
    assert.equal(new Set(slots).size, 4, `distinct slots: ${slots.join(', ')}`);
    // Every key of one shard is in one slot (BullMQ's multi-key scripts need it).
    assert.equal(keySlot(`${toolsPrefix('mcp', 2)}:tools:wait`), keySlot(`${toolsPrefix('mcp', 2)}:tools:t.x.1`));
  });

  it('TOOL_QUEUE_SHARDS: default 1, 1..64, anything else refused naming it', () => {
    assert.equal(loadConfig({}, { role: 'worker' }).toolQueueShards, 1);
    assert.equal(loadConfig({ TOOL_QUEUE_SHARDS: '8' }, { role: 'worker' }).toolQueueShards, 8);
    for (const bad of ['0', '65', '1.5', 'x']) {
      assert.throws(
        () => loadConfig({ TOOL_QUEUE_SHARDS: bad }, { role: 'worker' }),
        (e: Error) => e instanceof ConfigError && /TOOL_QUEUE_SHARDS/.test(e.message),
        bad,
      );
    }
  });
});
