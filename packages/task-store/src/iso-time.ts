/**
 * `isoTime(ms)`: the same string as `new Date(ms).toISOString()` (e.g.
 * `2026-12-05T17:04:17.123Z`), about six times faster. Every `tasks/get` and every task handle
 * carries two such times (`createdAt`, `lastUpdatedAt`), and the Date conversion was the largest
 * single cost of building the answer (docs/performance.md).
 *
 * How: a UTC day is exactly 86,400,000 ms in JavaScript time (no leap seconds), so the time of
 * day is integer arithmetic on `ms`, and the date part (`YYYY-MM-DDT`) comes from
 * `toISOString` itself, once per day, kept for the last DAY_PREFIXES days seen. A time outside
 * years 1970–9999, or not an integer, goes to `toISOString` as it is (which throws a
 * `RangeError` for an invalid time, as before).
 */

const MS_PER_DAY = 86_400_000;
/** 9999-12-31T23:59:59.999Z: the last time with a four-digit year. */
const LAST_FOUR_DIGIT_MS = 253_402_300_799_999;
/** Days whose `YYYY-MM-DDT` is kept (a map cleared when full). */
const DAY_PREFIXES = 64;

const prefixes = new Map<number, string>();

const pad2 = (n: number) => (n < 10 ? `0${n}` : `${n}`);
const pad3 = (n: number) => (n < 10 ? `00${n}` : n < 100 ? `0${n}` : `${n}`);

/** `new Date(ms).toISOString()`, for `ms` in unix milliseconds. @throws RangeError for an invalid time */
export function isoTime(ms: number): string {
  if (!Number.isSafeInteger(ms) || ms < 0 || ms > LAST_FOUR_DIGIT_MS) return new Date(ms).toISOString();
  const day = Math.floor(ms / MS_PER_DAY);
  let prefix = prefixes.get(day);
  if (prefix === undefined) {
    if (prefixes.size >= DAY_PREFIXES) prefixes.clear();
    prefix = new Date(day * MS_PER_DAY).toISOString().slice(0, 11);
    prefixes.set(day, prefix);
  }
  let rest = ms - day * MS_PER_DAY;
  const h = Math.floor(rest / 3_600_000);
  rest -= h * 3_600_000;
  const m = Math.floor(rest / 60_000);
  rest -= m * 60_000;
  const s = Math.floor(rest / 1000);
  return `${prefix}${pad2(h)}:${pad2(m)}:${pad2(s)}.${pad3(rest - s * 1000)}Z`;
}
