import { afterEach, describe, expect, it, vi } from 'vitest';
import { ReplayWindow } from './replay-window.js';

describe('ReplayWindow', () => {
  const clock = () => {
    let now = 1_000_000;
    return { now: () => now, advance: (ms: number) => (now += ms) };
  };

  it('lets go of a position only once it was acknowledged a whole window ago', () => {
    const time = clock();
    const window = new ReplayWindow<number>(60_000, time.now);
    window.acknowledged(1);
    time.advance(30_000);
    window.acknowledged(2);
    time.advance(29_999);
    expect(window.expired()).toBeUndefined();
    time.advance(1);
    expect(window.expired()).toBe(1);
    time.advance(30_000);
    expect(window.expired()).toBe(2);
  });

  it('tells when its newest kept acknowledgement was made and when its oldest may be let go', () => {
    const time = clock();
    const window = new ReplayWindow<number>(10_000, time.now);
    expect(window.nextExpiry).toBeUndefined();
    expect(window.newestAcknowledgedAt).toBeUndefined();
    window.acknowledged(1);
    time.advance(4_000);
    window.acknowledged(2);
    expect(window.nextExpiry).toBe(1_010_000);
    expect(window.newestAcknowledgedAt).toBe(1_004_000);
    time.advance(6_000);
    window.released(window.expired()!);
    expect(window.nextExpiry).toBe(1_014_000);
    window.replaying();
    expect(window.nextExpiry).toBeUndefined();
    expect(window.newestAcknowledgedAt).toBeUndefined();
  });

  it('forgets what it released and keeps the younger acknowledgements', () => {
    const time = clock();
    const window = new ReplayWindow<{ id: number }>(10_000, time.now);
    const first = { id: 1 };
    const second = { id: 2 };
    window.acknowledged(first);
    time.advance(10_000);
    window.acknowledged(second);
    const expired = window.expired();
    expect(expired).toBe(first);
    time.advance(10_000);
    window.released(first);
    expect(window.expired()).toBe(second);
  });

  it('starts every clock anew when the kept readings are sent again', () => {
    const time = clock();
    const window = new ReplayWindow<number>(10_000, time.now);
    window.acknowledged(1);
    time.advance(20_000);
    window.replaying();
    expect(window.expired()).toBeUndefined();
    window.acknowledged(1);
    time.advance(10_000);
    expect(window.expired()).toBe(1);
  });

  describe('on the real clocks', () => {
    afterEach(() => {
      vi.restoreAllMocks();
    });

    it('is not moved by a step of the wall clock, forward or back', async () => {
      const wall = Date.now();
      const now = vi.spyOn(Date, 'now').mockReturnValue(wall);
      const window = new ReplayWindow<number>(200);
      window.acknowledged(1);
      // NTP sets a board's clock an hour forward: nothing kept is let go early.
      now.mockReturnValue(wall + 3_600_000);
      expect(window.expired()).toBeUndefined();
      // An hour back: what was acknowledged a window ago goes all the same.
      now.mockReturnValue(wall - 3_600_000);
      await new Promise((resolve) => setTimeout(resolve, 250));
      expect(window.expired()).toBe(1);
    });
  });
});
