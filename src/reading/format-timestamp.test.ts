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
});
