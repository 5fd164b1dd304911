import { describe, expect, it } from 'vitest';
import { Backoff } from './backoff.js';

describe('Backoff', () => {
  it('doubles its ceiling up to the maximum and waits between half and all of it', () => {
    const low = new Backoff(250, 4000, () => 0);
    const high = new Backoff(250, 4000, () => 0.999999);
    expect([1, 2, 3, 4, 5, 6].map(() => low.next())).toEqual([125, 250, 500, 1000, 2000, 2000]);
    expect([1, 2, 3, 4, 5, 6].map(() => high.next())).toEqual([249, 499, 999, 1999, 3999, 3999]);
  });

  it('starts over after reset', () => {
    const backoff = new Backoff(100, 10_000, () => 0);
    backoff.next();
    backoff.next();
    backoff.reset();
    expect(backoff.next()).toBe(50);
    expect(backoff.attempts).toBe(1);
  });
});
