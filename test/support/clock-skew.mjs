/**
 * Preload (`node --import ./test/support/clock-skew.mjs`): shifts this process' wall clock by
 * `CLOCK_SKEW_MS` (may be negative): `Date.now()` and `new Date()` (no argument) answer the real
 * time plus the skew, as on a host whose clock is wrong. `performance.now()` (monotonic) is left
 * alone, as a wrong wall clock does. For case N-11 (test/e2e/cases-n11.test.ts).
 */
const skew = Number(process.env.CLOCK_SKEW_MS || 0);
if (skew) {
  const RealDate = globalThis.Date;
  const realNow = RealDate.now.bind(RealDate);
  class SkewedDate extends RealDate {
    constructor(...args) {
      if (args.length === 0) super(realNow() + skew);
      else super(...args);
    }
    static now() {
      return realNow() + skew;
    }
  }
  globalThis.Date = SkewedDate;
}
