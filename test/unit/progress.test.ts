/**
 * Unit tests of the progress relay of synchronous calls (apps/gateway/src/progress.ts; spec
 * transport §7 P-01, P-02; design D6; case B-12). No Redis: events are fed as the stream would
 * deliver them, and every notification the relay sends is recorded.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ProgressRelay, progressTokenOf, type ProgressParams } from '../../apps/gateway/src/progress.js';

function relay(token: string | number | undefined, heartbeatMs = 15_000, start = 1_000_000) {
  const sent: ProgressParams[] = [];
  const r = new ProgressRelay(token, async (p) => void sent.push(p), heartbeatMs, '0', start);
  return { r, sent };
}
const row = (n: number, event: { progress: number; total?: number; message?: string }) => ({ id: `${n}-0`, event });

describe('progressTokenOf (case B-12: the token is echoed with its exact value and type)', () => {
  it('accepts a string or an integer and keeps the type', () => {
    assert.equal(progressTokenOf({ progressToken: 'pt-7' }), 'pt-7');
    assert.equal(progressTokenOf({ progressToken: 12345 }), 12345);
    assert.equal(typeof progressTokenOf({ progressToken: 12345 }), 'number');
  });
  it('no token, or a token of another type, means no progress (P-02)', () => {
    assert.equal(progressTokenOf(undefined), undefined);
    assert.equal(progressTokenOf({}), undefined);
    assert.equal(progressTokenOf({ progressToken: 1.5 }), undefined);
    assert.equal(progressTokenOf({ progressToken: null }), undefined);
    assert.equal(progressTokenOf({ progressToken: { a: 1 } }), undefined);
  });
});

describe('ProgressRelay', () => {
  it('relays events in order with the token, total only when given, and moves lastId (P-01)', async () => {
    const { r, sent } = relay(12345);
    await r.push([
      row(1, { progress: 1, total: 3, message: 'one' }),
      row(2, { progress: 2 }),
      row(3, { progress: 3, total: 3 }),
    ]);
    assert.deepEqual(sent, [
      { progressToken: 12345, progress: 1, total: 3, message: 'one' },
      { progressToken: 12345, progress: 2 },
      { progressToken: 12345, progress: 3, total: 3 },
    ]);
    assert.equal(r.lastId, '3-0');
  });

  it('drops a report that does not increase (P-01: strictly increasing)', async () => {
    const { r, sent } = relay('t');
    await r.push([row(1, { progress: 5 }), row(2, { progress: 5 }), row(3, { progress: 4 }), row(4, { progress: 6 })]);
    assert.deepEqual(
      sent.map((p) => p.progress),
      [5, 6],
    );
    assert.equal(r.lastId, '4-0', 'dropped events are still consumed');
  });

  it('without a token nothing is sent and no heartbeat is ever due (P-02, case B-12c)', async () => {
    const { r, sent } = relay(undefined);
    await r.push([row(1, { progress: 1 })]);
    assert.equal(r.heartbeatDueIn(), Infinity);
    assert.equal(await r.heartbeat(10_000_000), false);
    assert.deepEqual(sent, []);
  });

  it('after close() nothing more is sent, not even events already read (P-02, case B-12e)', async () => {
    const { r, sent } = relay('t');
    await r.push([row(1, { progress: 1 })]);
    r.close();
    await r.push([row(2, { progress: 2 })]);
    assert.equal(await r.heartbeat(10_000_000), false);
    assert.deepEqual(
      sent.map((p) => p.progress),
      [1],
    );
    assert.equal(r.lastId, '2-0');
  });

  it('clips message to 200 characters (clients cut there)', async () => {
    const { r, sent } = relay('t');
    await r.push([row(1, { progress: 1, message: 'x'.repeat(500) })]);
    assert.equal(sent[0]!.message!.length, 200);
  });

  it('heartbeat: due after heartbeatMs of silence, value still increasing and below total, total unchanged', async () => {
    const start = 1_000_000;
    const { r, sent } = relay('t', 15_000, start);
    assert.equal(await r.heartbeat(start + 14_999), false, 'not due yet');
    assert.equal(await r.heartbeat(start + 15_000), true);
    assert.equal(sent[0]!.progress, 0, 'first heartbeat before any report');
    await r.push([row(1, { progress: 3, total: 10, message: 'step 3' })], start + 16_000);
    assert.equal(r.heartbeatDueIn(start + 16_000), 15_000, 'a relayed event resets the heartbeat clock');
    for (let i = 1; i <= 50; i++) await r.heartbeat(start + 16_000 + i * 15_000);
    const values = sent.map((p) => p.progress);
    for (let i = 1; i < values.length; i++)
      assert.ok(values[i]! > values[i - 1]!, `strictly increasing at ${i}: ${values[i - 1]} → ${values[i]}`);
    assert.ok(values.at(-1)! < 10, 'stays below total');
    assert.ok(
      sent.slice(2).every((p) => p.total === 10),
      'total stays what the tool said',
    );
    assert.match(sent.at(-1)!.message!, /step 3 \(still working, \d+ s\)/);
    await r.push([row(2, { progress: 4, total: 10 })]);
    assert.equal(sent.at(-1)!.progress, 4, 'the next real report still gets through after many heartbeats');
  });

  it('heartbeat after the tool reported all of total: still increasing, never above total (total left out)', async () => {
    const { r, sent } = relay('t', 1000, 0);
    await r.push([row(1, { progress: 10, total: 10 })], 0);
    await r.heartbeat(1000);
    await r.heartbeat(2000);
    assert.deepEqual(
      sent.map((p) => [p.progress, p.total]),
      [
        [10, 10],
        [10.001, undefined],
        [10.002, undefined],
      ],
    );
  });

  it('heartbeat without a total still increases', async () => {
    const start = 0;
    const { r, sent } = relay('t', 1000, start);
    await r.push([row(1, { progress: 7 })], start);
    await r.heartbeat(start + 1000);
    await r.heartbeat(start + 2000);
    assert.deepEqual(
      sent.map((p) => p.progress),
      [7, 7.001, 7.002],
    );
    assert.ok(sent.every((p) => !('total' in p)));
  });
});
