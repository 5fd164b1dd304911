import { describe, expect, it } from 'vitest';
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
});
