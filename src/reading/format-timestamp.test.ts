import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { formatTimestampNs } from './format-timestamp.js';
import { MAX_EPOCH_SECONDS, parseTimestampNs } from './timestamp.js';

describe('formatTimestampNs', () => {
  it('writes nine fraction digits in UTC', () => {
    expect(formatTimestampNs('1795852800123456789')).toBe('2026-11-28T08:00:00.123456789Z');
    expect(formatTimestampNs('0')).toBe('1970-01-01T00:00:00.000000000Z');
    expect(formatTimestampNs('5')).toBe('1970-01-01T00:00:00.000000005Z');
  });

  it('is read back by the parser as the same instant over the whole accepted range', () => {
    const epochNs = fc.bigInt({ min: 0n, max: BigInt(MAX_EPOCH_SECONDS) * 1_000_000_000n - 1n }).map(String);
    fc.assert(fc.property(epochNs, (ns) => parseTimestampNs(formatTimestampNs(ns)) === ns));
  });

  it('formats each of a run of times in the same and in neighbouring seconds as Date does', () => {
    const seconds = fc.integer({ min: 0, max: MAX_EPOCH_SECONDS - 2 });
    const run = fc.tuple(seconds, fc.array(fc.tuple(fc.integer({ min: 0, max: 1 }), fc.integer({ min: 0, max: 999_999_999 }))));
    fc.assert(
      fc.property(run, ([base, times]) =>
        times.every(([step, ns]) => {
          const s = base + step;
          const expected = `${new Date(s * 1000).toISOString().slice(0, 19)}.${String(ns).padStart(9, '0')}Z`;
          return formatTimestampNs((BigInt(s) * 1_000_000_000n + BigInt(ns)).toString()) === expected;
        }),
      ),
    );
  });
});
