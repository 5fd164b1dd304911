import { describe, expect, it } from 'vitest';
import { CLOCK_TICKS, cpuSecondsFromStat } from '../../scripts/lib/proc.mjs';
import { batchTemplate, fillBatchBody, jsonBytesPerReading, readingTail } from '../../scripts/lib/readings.mjs';
import { median, pairedRatios, percentile, queueBounded, ratioMark, slope, summarize, waitsSeconds } from '../../scripts/lib/stats.mjs';

// The benchmark's own arithmetic: wrong medians or a wrong growth test would print wrong figures.
describe('benchmark statistics', () => {
  it('interpolates percentiles between closest ranks', () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(percentile([10], 99)).toBe(10);
    expect(percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 90)).toBeCloseTo(9.1);
    expect(
      percentile(
        Array.from({ length: 101 }, (_, i) => i),
        99,
      ),
    ).toBe(99);
    expect(percentile([], 50)).toBeUndefined();
    expect(() => percentile([1], 101)).toThrow(RangeError);
  });

  it('summarizes runs, leaving out runs without a figure', () => {
    expect(summarize([5, null, 1, 3, Number.NaN])).toEqual({ median: 3, min: 1, max: 5, n: 3, missing: 2 });
    expect(summarize([])).toEqual({ median: null, min: null, max: null, n: 0, missing: 0 });
  });

  it('fits a least-squares slope', () => {
    expect(
      slope([
        { x: 0, y: 1 },
        { x: 1, y: 3 },
        { x: 2, y: 5 },
      ]),
    ).toBeCloseTo(2);
    expect(slope([{ x: 1, y: 1 }])).toBe(0);
    expect(
      slope([
        { x: 1, y: 1 },
        { x: 1, y: 5 },
      ]),
    ).toBe(0);
  });

  it('tells a sawing queue from a growing one', () => {
    const rate = 100_000;
    // Flushed every second: the depth saws between 0 and one second of readings.
    const sawing = Array.from({ length: 240 }, (_, i) => ({ t: i / 4, depth: (i % 4) * 25_000 }));
    expect(queueBounded(sawing, rate).bounded).toBe(true);
    // Flushing 10 % slower than the readings arrive.
    const growing = Array.from({ length: 240 }, (_, i) => ({ t: i / 4, depth: (i / 4) * 10_000 + (i % 4) * 25_000 }));
    const verdict = queueBounded(growing, rate);
    expect(verdict.bounded).toBe(false);
    expect(verdict.growthPerSecond).toBeCloseTo(10_000, -2);
    expect(verdict.allowedGrowthPerSecond).toBe(2_000);
    // Over a short series one saw of the timer is allowed: 8 s may not show more than 1 s of readings.
    const short = (growth: number) => Array.from({ length: 33 }, (_, i) => ({ t: i / 4, depth: (i / 4) * growth + (i % 4) * 25_000 }));
    expect(queueBounded(short(5_000), rate).bounded).toBe(true);
    expect(queueBounded(short(20_000), rate).bounded).toBe(false);
    // A queue that ends deep (a stall near the end) is not bounded either.
    expect(
      queueBounded(
        [
          { t: 0, depth: 0 },
          { t: 1, depth: 0 },
          { t: 2, depth: 900_000 },
        ],
        rate,
        { maxGrowthShare: 10 },
      ).bounded,
    ).toBe(false);
    expect(queueBounded([], rate).bounded).toBe(false);
  });
});

describe('benchmark readings', () => {
  it('gives every reading of every fill request its own time', () => {
    const template = batchTemplate(1000);
    const base = Date.UTC(2026, 10, 21, 10);
    const times = new Set<string>();
    for (let request = 0; request < 30; request++) {
      const readings = JSON.parse(fillBatchBody(template, base, request)) as {
        time: string;
        ship_id: string;
        cargo_id: string;
        value: number;
      }[];
      expect(readings).toHaveLength(1000);
      for (const r of readings) {
        expect(r.time).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{9}Z$/);
        expect(Number.isFinite(r.value)).toBe(true);
        times.add(r.time);
      }
    }
    expect(times.size).toBe(30_000);
  });

  it('measures the JSON size of a reading', () => {
    const template = batchTemplate(10);
    // The body over its readings: separators and brackets included.
    expect(jsonBytesPerReading(template, 10)).toBe(Buffer.byteLength(fillBatchBody(template, 0, 0)) / 10);
    expect(readingTail(0)).toBe('"ship_id":"ship-000","cargo_id":"temperature","value":0}');
    expect(() => batchTemplate(10_001)).toThrow(RangeError);
  });
});

describe('a live link', () => {
  it('times each answered request to the first delivery that covers its readings, in queue order', () => {
    const answered = [
      { atMs: 1000, readings: 10 },
      { atMs: 1500, readings: 14 },
      { atMs: 6000, readings: 24 },
    ];
    // The first delivery took ten readings (at the same millisecond as their answer), the second the rest.
    expect(
      waitsSeconds(answered, [
        { atMs: 1000, readings: 10 },
        { atMs: 20_000, readings: 24 },
      ]),
    ).toEqual([0, 18.5, 14]);
    expect(() => waitsSeconds(answered, [{ atMs: 1200, readings: 14 }])).toThrow(/up to 24 were never delivered/);
  });
});

describe('process accounting', () => {
  it('reads utime and stime after a command name with spaces and parentheses', () => {
    const fields = ['S', '1', '2', '3', '0', '-1', '4194304', '10', '0', '0', '0', String(3 * CLOCK_TICKS), String(CLOCK_TICKS), '0', '0'];
    expect(cpuSecondsFromStat(`4242 (node (main) x) ${fields.join(' ')}`)).toBe(4);
  });
});

describe('comparing two builds', () => {
  const run = (n: number, rate: number | null) => ({ run: n, rate });
  const rate = (r: { rate: number | null }) => r.rate;

  it('pairs runs by their number and summarizes the pairwise ratios, not the ratio of the medians', () => {
    const reference = [run(1, 100), run(2, 200), run(3, 100)];
    const current = [run(3, 90), run(1, 120), run(2, 220)];
    const ratio = pairedRatios(reference, current, rate);
    expect(ratio.median).toBeCloseTo(1.1);
    expect(ratio.min).toBeCloseTo(0.9);
    expect(ratio.max).toBeCloseTo(1.2);
    expect(ratio.n).toBe(3);
  });

  it('leaves out pairs with a figure missing or a reference of 0', () => {
    const ratio = pairedRatios([run(1, 100), run(2, 0), run(3, null)], [run(1, 50), run(2, 10), run(3, 10), run(4, 10)], rate);
    expect(ratio).toEqual({ median: 0.5, min: 0.5, max: 0.5, n: 1, missing: 3 });
  });

  it('marks a figure only when the whole spread of its ratios is better or worse', () => {
    expect(ratioMark({ min: 1.2, max: 1.3, n: 2 }, true)).toBe('↑');
    expect(ratioMark({ min: 1.2, max: 1.3, n: 2 }, false)).toBe('↓');
    expect(ratioMark({ min: 0.5, max: 0.9, n: 3 }, false)).toBe('↑');
    expect(ratioMark({ min: 0.9, max: 1.3, n: 5 }, true)).toBe('');
    expect(ratioMark({ min: 1.2, max: 1.2, n: 1 }, true)).toBe('');
  });
});
