import { describe, expect, it } from 'vitest';
import { FailureThrottle } from './failure-throttle.js';

describe('FailureThrottle', () => {
  it('blocks an address at the limit for the rest of its window, and only that address', () => {
    let now = 0;
    const throttle = new FailureThrottle(3, 60_000, 100, () => now);
    expect(throttle.recordFailure('10.0.0.5')).toBe(false);
    expect(throttle.recordFailure('10.0.0.5')).toBe(false);
    expect(throttle.blockedForMs('10.0.0.5')).toBe(0);
    expect(throttle.recordFailure('10.0.0.5')).toBe(true);
    now = 10_000;
    expect(throttle.blockedForMs('10.0.0.5')).toBe(50_000);
    expect(throttle.blockedForMs('10.0.0.6')).toBe(0);
    now = 60_000;
    expect(throttle.blockedForMs('10.0.0.5')).toBe(0);
  });

  it('forgets the oldest addresses past its bound', () => {
    const throttle = new FailureThrottle(1, 60_000, 3, () => 0);
    for (const address of ['a', 'b', 'c', 'd']) throttle.recordFailure(address);
    expect(throttle.tracked).toBe(3);
    expect(throttle.blockedForMs('a')).toBe(0);
    expect(throttle.blockedForMs('d')).toBe(60_000);
  });
});
