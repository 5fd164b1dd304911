import { describe, expect, it } from 'vitest';
import { MAX_RETRY_AFTER_MS, MIN_RETRY_AFTER_MS, parseRetryAfter } from './retry-after.js';

describe('parseRetryAfter', () => {
  const now = Date.parse('2026-11-24T12:00:00Z');

  it('reads a delay in seconds', () => {
    expect(parseRetryAfter('30', now)).toBe(30_000);
  });

  it('reads an HTTP date as the time until then', () => {
    expect(parseRetryAfter('Tue, 24 Nov 2026 12:01:00 GMT', now)).toBe(60_000);
  });

  it('keeps the wait within bounds: never a tight loop, never hours', () => {
    expect(parseRetryAfter('0', now)).toBe(MIN_RETRY_AFTER_MS);
    expect(parseRetryAfter('Tue, 24 Nov 2026 11:00:00 GMT', now)).toBe(MIN_RETRY_AFTER_MS);
    expect(parseRetryAfter('86400', now)).toBe(MAX_RETRY_AFTER_MS);
  });

  it('leaves a missing or unreadable header to the backoff', () => {
    expect(parseRetryAfter(undefined, now)).toBeUndefined();
    expect(parseRetryAfter('', now)).toBeUndefined();
    expect(parseRetryAfter('soon', now)).toBeUndefined();
    expect(parseRetryAfter('-5', now)).toBeUndefined();
  });
});
