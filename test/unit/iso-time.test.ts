/**
 * `isoTime` (packages/task-store/src/iso-time.ts) writes every `createdAt` / `lastUpdatedAt` a
 * client reads: it must be `Date#toISOString` to the character, for any time, on either side of
 * a day's end, past the days it keeps, and outside the years it formats itself.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { isoTime } from '../../packages/task-store/src/iso-time.js';

const native = (ms: number) => new Date(ms).toISOString();

describe('isoTime', () => {
  it('equals toISOString for random times from 1970 to 9999 (more days than it keeps)', () => {
    for (let i = 0; i < 20_000; i++) {
      const ms = Math.floor(Math.random() * 253_402_300_800_000);
      assert.equal(isoTime(ms), native(ms), String(ms));
    }
  });

  it('equals toISOString around day, year and range ends, and near now', () => {
    const now = Date.now();
    const edges = [0, 1, 999, 1000, 59_999, 60_000, 3_599_999, 3_600_000, 86_399_999, 86_400_000, 86_400_001];
    const days = [Date.UTC(2024, 1, 29), Date.UTC(2026, 11, 31), Date.UTC(2027, 0, 1), Date.UTC(2100, 2, 1)];
    const times = [...edges, ...days.flatMap((d) => [d - 1, d, d + 1, d + 86_399_999]), 253_402_300_799_999];
    for (let i = 0; i < 1000; i++) times.push(now - i * 997);
    for (const ms of times) assert.equal(isoTime(ms), native(ms), String(ms));
  });

  it('outside its range and for fractions it is toISOString itself (an invalid time still throws)', () => {
    for (const ms of [-1, -86_400_001, 253_402_300_800_000, 8.64e15, 1733420000000.5])
      assert.equal(isoTime(ms), native(ms), String(ms));
    assert.throws(() => isoTime(Number.NaN), RangeError);
    assert.throws(() => isoTime(8.64e15 + 1), RangeError);
  });
});
