import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SinkBudget } from './sink-budget.js';

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
});
