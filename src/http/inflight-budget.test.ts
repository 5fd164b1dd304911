import { describe, expect, it } from 'vitest';
import { InflightBudget } from './inflight-budget.js';

describe('InflightBudget', () => {
  it('admits requests until the budget is spent and again once bytes are released', () => {
    const budget = new InflightBudget(100);
    expect(budget.tryReserve(60)).toBe(true);
    expect(budget.tryReserve(50)).toBe(false);
    expect(budget.tryReserve(40)).toBe(true);
    budget.release(60);
    expect(budget.tryReserve(50)).toBe(true);
    expect(budget.used).toBe(90);
  });

  it('lets one request larger than the budget through when nothing else is in flight', () => {
    const budget = new InflightBudget(100);
    expect(budget.tryReserve(500)).toBe(true);
    expect(budget.tryReserve(1)).toBe(false);
  });
});
