import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { propertyRuns } from '../../test/support/property-sizes.js';
import { type ClockNotice, ReceiveClock } from './receive-clock.js';

/** A wall clock moved by hand. */
const wall = (start: number) => {
  let now = start;
  return { now: () => now, set: (ms: number) => (now = ms), step: (ms: number) => (now += ms) };
};

describe('ReceiveClock', () => {
  it('gives requests received in the same millisecond distinct, increasing nanoseconds', () => {
    const time = wall(1_767_225_600_123);
    const clock = new ReceiveClock(time.now);
    expect([clock.nextNs(), clock.nextNs(), clock.nextNs()]).toEqual(['1767225600123000000', '1767225600123000001', '1767225600123000002']);
    time.step(1);
    expect(clock.nextNs()).toBe('1767225600124000000');
  });

  it('reserves consecutive times for a request, carrying into the next millisecond past an era', () => {
    const clock = new ReceiveClock(() => 1_000);
    const request = clock.reserve(3);
    expect([request.ns(0), request.ns(1), request.ns(2)]).toEqual(['1000000000', '1000000001', '1000000002']);
    const big = clock.reserve(125_000);
    expect(big.ns(0)).toBe('1000000003');
    expect(big.ns(124_996)).toBe('1000124999');
    expect(big.ns(124_997)).toBe('1001000000');
    expect(clock.nextNs()).toBe('1001000003');
  });

  it('holds over a wall clock jittering back by up to a second', () => {
    const time = wall(2_000_000);
    const clock = new ReceiveClock(time.now);
    expect(clock.nextNs()).toBe('2000000000000');
    time.step(-900);
    expect(clock.nextNs()).toBe('2000000000001');
    time.step(1_000);
    expect(clock.nextNs()).toBe('2000100000000');
  });

  it('follows a step back in a new era of nanoseconds: never a time it gave before', () => {
    const time = wall(1_767_225_600_000);
    const notices: ClockNotice[] = [];
    const clock = new ReceiveClock(time.now, undefined, (n) => notices.push(n));
    const before = new Set<string>();
    for (let i = 0; i < 2_000; i++) {
      before.add(clock.nextNs());
      time.step(1);
    }
    // NTP steps the clock back two seconds: the same milliseconds come round again.
    time.step(-2_000);
    const after = clock.nextNs();
    expect(after).toBe('1767225600000125000');
    expect(before.has(after)).toBe(false);
    expect(notices).toEqual([{ kind: 'stepped_back', stepMs: 1_999, era: 1 }]);
  });

  it('never gives a time twice in a run, whatever the wall clock does', () => {
    const steps = fc.array(
      fc.oneof(fc.integer({ min: 0, max: 3 }), fc.integer({ min: -1_500, max: 0 }), fc.integer({ min: -90_000_000, max: 90_000_000 })),
      { minLength: 1, maxLength: 200 },
    );
    fc.assert(
      fc.property(steps, fc.array(fc.integer({ min: 1, max: 40 }), { minLength: 200, maxLength: 200 }), (moves, counts) => {
        const time = wall(1_767_225_600_000);
        const clock = new ReceiveClock(time.now);
        const given = new Set<string>();
        moves.forEach((move, i) => {
          time.step(move);
          const request = clock.reserve(counts[i]!);
          for (let k = 0; k < request.count; k++) {
            const ns = request.ns(k);
            expect(given.has(ns)).toBe(false);
            given.add(ns);
          }
        });
      }),
      { numRuns: propertyRuns(60) },
    );
  });

  it('resumes after the newest receive time of an earlier run when the wall clock is behind it', () => {
    const time = wall(1_767_225_600_000);
    const first = new ReceiveClock(time.now);
    const earlier = Array.from({ length: 100 }, () => {
      time.step(10);
      return first.nextNs();
    });
    const newest = first.receivedMs();
    // The board restarts with its clock ten minutes behind (no real-time clock, NTP not yet there).
    time.step(-600_000);
    const notices: ClockNotice[] = [];
    const second = new ReceiveClock(time.now, newest, (n) => notices.push(n));
    const resumed = [second.nextNs(), second.nextNs()];
    expect(resumed).toEqual([`${newest + 1}000000`, `${newest + 1}000001`]);
    expect(earlier.some((ns) => resumed.includes(ns))).toBe(false);
    expect(notices).toEqual([{ kind: 'held', aheadMs: 600_000 }]);
    // A queue whose newest time is more than a day ahead came from a wrong clock: follow the wall clock.
    const far = new ReceiveClock(time.now, time.now() + 2 * 86_400_000, (n) => notices.push(n));
    expect(far.nextNs()).toBe(`${time.now()}875000`);
    expect(notices.at(-1)).toEqual({ kind: 'resumed_behind', aheadMs: 2 * 86_400_000 });
  });

  it('records as received the newest millisecond it gave, so a restart resumes after it', () => {
    const time = wall(5_000_000);
    const clock = new ReceiveClock(time.now);
    clock.nextNs();
    time.step(-500);
    expect(clock.receivedMs()).toBe(5_000_000);
    time.step(1_000);
    expect(clock.receivedMs()).toBe(5_000_500);
  });
});
