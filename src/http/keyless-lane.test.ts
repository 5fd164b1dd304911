import { describe, expect, it } from 'vitest';
import { KeylessLane } from './keyless-lane.js';

describe('keyless lane', () => {
  it('starts one request a turn of the event loop, in the order they came, with the I/O of each turn between two', async () => {
    const lane = new KeylessLane();
    const events: string[] = [];
    for (let i = 0; i < 4; i++) lane.enqueue(() => events.push(`start ${i}`));
    expect(lane.waiting).toBe(4);
    // A callback that schedules itself with setImmediate runs once a turn of the loop.
    let turns = 0;
    const turn = (): void => {
      events.push('turn');
      if (++turns < 10) setImmediate(turn);
    };
    setImmediate(turn);
    await new Promise((resolve) => setTimeout(resolve, 50));
    const starts = events.filter((e) => e.startsWith('start'));
    expect(starts).toEqual(['start 0', 'start 1', 'start 2', 'start 3']);
    // Never two starts without a turn between them.
    for (let i = 1; i < events.length; i++) expect(`${events[i - 1]} ${events[i]}`).not.toMatch(/^start \d start/);
    expect(lane.waiting).toBe(0);
  });

  it("runs a start's awaits that need no I/O in its own turn", async () => {
    const lane = new KeylessLane();
    const events: string[] = [];
    lane.enqueue(async () => {
      events.push('a begins');
      await Promise.resolve();
      await Promise.resolve();
      events.push('a answers');
    });
    lane.enqueue(() => events.push('b begins'));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(events).toEqual(['a begins', 'a answers', 'b begins']);
  });

  it('keeps its waiting list short however many pass through it', async () => {
    const lane = new KeylessLane((turn) => queueMicrotask(turn));
    let started = 0;
    for (let round = 0; round < 50; round++) {
      for (let i = 0; i < 100; i++)
        lane.enqueue(() => {
          started += 1;
        });
      await new Promise((resolve) => setTimeout(resolve, 0));
    }
    expect(started).toBe(5000);
    expect(lane.waiting).toBe(0);
  });
});
