import { describe, expect, it } from 'vitest';
import { crashRounds } from './support/crash-rounds.js';

describe.each(['process-crash', 'power-loss'] as const)('kill -9 under load (%s)', (durability) => {
  it('keeps every 2xx reading exactly once and no refused reading', async () => {
    const report = await crashRounds(durability);
    const summary = {
      ...report,
      missing: report.missing.slice(0, 5),
      forbidden: report.forbidden.slice(0, 5),
      strangers: report.strangers.slice(0, 5),
    };
    expect(report.ok, JSON.stringify(summary)).toBeGreaterThan(100);
    expect(report.refused, JSON.stringify(summary)).toBeGreaterThan(0);
    expect({ missing: summary.missing, forbidden: summary.forbidden, strangers: summary.strangers, duplicates: report.duplicates }).toEqual(
      {
        missing: [],
        forbidden: [],
        strangers: [],
        duplicates: 0,
      },
    );
  }, 60_000);
});
