import { describe, expect, it } from 'vitest';
import { FailureDelay } from './failure-delay.js';

describe('FailureDelay', () => {
  it('doubles the delay with each failure up to the cap, and forgets an address that stops failing', () => {
    let now = 0;
    const delay = new FailureDelay(1000, 60_000, 100, () => now);
    expect([1, 2, 3, 4, 5, 6].map(() => delay.recordFailure('a'))).toEqual([100, 200, 400, 800, 1000, 1000]);
    expect(delay.atCap('a')).toBe(true);
    expect(delay.recordFailure('b')).toBe(100);
    now = 60_000;
    expect(delay.recordFailure('a')).toBe(100);
  });

  it('tracks a bounded number of addresses, forgetting the least recently failing', () => {
    const delay = new FailureDelay(1000, 60_000, 3, () => 0);
    for (const address of ['a', 'b', 'c']) delay.recordFailure(address);
    delay.recordFailure('a');
    delay.recordFailure('d');
    expect(delay.tracked).toBe(3);
    expect(delay.recordFailure('a')).toBe(400);
    expect(delay.recordFailure('b')).toBe(100);
  });
});
