import fc from 'fast-check';
import pino from 'pino';
import { describe, expect, it, vi } from 'vitest';
import type { QueueRecord } from '../queue/queue-reader.js';
import type { SinkTarget } from './sink.js';
import { type DailyWindow, parseDailyWindows } from '../config/daily-windows.js';
import { SinkBudget } from './sink-budget.js';
import { SinkLoop, type SinkQueue } from './sink-loop.js';

describe('a bandwidth budget', () => {
  it('keeps any run of deliveries, each sent when its wait allows, within the budget on average', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 100, max: 100_000 }),
        fc.array(fc.integer({ min: 1, max: 200_000 }), { minLength: 1, maxLength: 50 }),
        (rate, batches) => {
          const budget = new SinkBudget(rate);
          let now = 0;
          let sent = 0;
          for (const bytes of batches) {
            now += budget.waitMs(now);
            budget.spent(bytes, now);
            sent += bytes;
          }
          // The run ends when its last batch is paid for: the average over it is the budget at most.
          const end = now + budget.waitMs(now);
          expect(sent / (end / 1000)).toBeLessThanOrEqual(rate * 1.001);
        },
      ),
    );
  });

  it('lets the first batch go at once, and a sink idle for long enough go again at once', () => {
    const budget = new SinkBudget(1000);
    expect(budget.waitMs(0)).toBe(0);
    budget.spent(500, 0);
    expect(budget.waitMs(0)).toBe(500);
    expect(budget.waitMs(600)).toBe(0);
    expect(budget.secondsFor(8000)).toBe(8);
  });

  it('does not apply in its cheap hours: a wait ends when they begin, nothing sent in them is owed after', () => {
    const night = parseDailyWindows('22:00-06:00') as DailyWindow[];
    let wall = new Date(2026, 10, 28, 21, 59, 0);
    const budget = new SinkBudget(1000, night, () => wall);
    expect(budget.cheapNow).toBe(false);
    // 600 s of bytes at the budget, a minute before the cheap hours.
    budget.spent(600_000, 0);
    expect(budget.waitMs(0)).toBe(60_000);
    wall = new Date(2026, 10, 28, 22, 0, 0);
    expect(budget.cheapNow).toBe(true);
    expect(budget.waitMs(60_000)).toBe(0);
    budget.spent(50_000_000, 60_000);
    expect(budget.waitMs(60_000)).toBe(0);
    // After them the budget starts afresh: what went in the night is not owed.
    wall = new Date(2026, 10, 29, 6, 0, 0);
    expect(budget.waitMs(61_000)).toBe(0);
    budget.spent(2000, 61_000);
    expect(budget.waitMs(61_000)).toBe(2000);
  });
});

describe('a sink loop with a budget', () => {
  it('waits after each batch as long as its bytes need at the budget, and a wake does not cut the wait short', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date', 'performance'] });
    try {
      const records: QueueRecord[] = Array.from({ length: 4 }, (_, i) => ({
        segment: 1,
        id: i + 1,
        receivedMs: i,
        readings: 1,
        bytes: 500,
        payload: `${i}\ts\tc\t${i}`,
      }));
      let at = 0;
      const queue = {
        readOldest: () => records.slice(at, at + 1),
        complete: (done: readonly QueueRecord[]) => {
          at += done.length;
          return { records: done.length, readings: done.length, deadLettered: 0 };
        },
      };
      const sent: number[] = [];
      const target: SinkTarget = {
        name: 'upstream',
        describe: 'a counting destination',
        deliver: async () => {
          sent.push(Date.now());
          return { ok: true, requests: 1, deadLetters: [] };
        },
        close: async () => undefined,
      };
      const loop = new SinkLoop({
        reader: queue as unknown as SinkQueue,
        target,
        logger: pino({ level: 'silent' }),
        options: { intervalMs: 10, batchReadings: 1, batchBytes: 1 << 20, backoffMaxMs: 100 },
        events: { delivered: () => undefined, failed: () => undefined },
        budget: new SinkBudget(1000),
      });
      loop.start();
      await vi.advanceTimersByTimeAsync(20);
      expect(sent).toHaveLength(1);
      loop.wake();
      await vi.advanceTimersByTimeAsync(400);
      expect(sent).toHaveLength(1);
      await vi.advanceTimersByTimeAsync(200);
      expect(sent).toHaveLength(2);
      await vi.advanceTimersByTimeAsync(1000);
      expect(sent).toHaveLength(4);
      // 500 bytes at 1000 bytes a second: half a second apart.
      expect(sent[3]! - sent[1]!).toBeGreaterThanOrEqual(1000);
      const stopped = loop.stop(Date.now() + 50);
      await vi.advanceTimersByTimeAsync(100);
      await stopped;
    } finally {
      vi.useRealTimers();
    }
  });
});
