import { describe, expect, it } from 'vitest';
import { ReceiveClock } from './receive-clock.js';

describe('ReceiveClock', () => {
  it('gives readings received in the same millisecond distinct, increasing nanoseconds', () => {
    let now = 1_767_225_600_123;
    const clock = new ReceiveClock(() => now);
    expect([clock.nextNs(), clock.nextNs(), clock.nextNs()]).toEqual(['1767225600123000000', '1767225600123000001', '1767225600123000002']);
    now += 1;
    expect(clock.nextNs()).toBe('1767225600124000000');
  });

  it('carries into the next millisecond after a million readings', () => {
    const clock = new ReceiveClock(() => 1_000);
    let last = '';
    for (let i = 0; i < 1_000_001; i++) last = clock.nextNs();
    expect(last).toBe('1001000000');
  });

  it('stays monotonic across small clock jitter and follows a large step back', () => {
    let now = 2_000_000;
    const clock = new ReceiveClock(() => now);
    expect(clock.nextNs()).toBe('2000000000000');
    now -= 5;
    expect(clock.nextNs()).toBe('2000000000001');
    now -= 10_000;
    expect(clock.nextNs()).toBe('1989995000000');
  });
});
