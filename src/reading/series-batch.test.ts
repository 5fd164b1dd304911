import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { propertyRuns } from '../../test/support/property-sizes.js';
import { formatTimestampNs } from './format-timestamp.js';
import { parseBatch } from './parse-readings.js';
import { readingSchema } from './reading-schema.js';
import { layOutSeries, parseSeriesBatch } from './series-batch.js';
import { encodeSeriesBatch, isSeriesMediaType, SERIES_MEDIA_TYPE, type SeriesReading } from './series-form.js';
import { TimeWindow } from './time-window.js';

const limits = { maxIdLength: 12 };
const validator = { schema: readingSchema(limits), limits };
const NOW = Date.UTC(2026, 4, 27, 10, 0, 0);
const windowedLimits = { maxIdLength: 12, window: new TimeWindow({ maxAheadS: 86_400, maxAgeS: 30 * 86_400 }, () => NOW) };
const windowed = { schema: readingSchema(windowedLimits), limits: windowedLimits };
const END_NS = BigInt(Date.UTC(2262, 0, 1)) * 1_000_000n;

/** Epoch nanoseconds as the queue keeps them: near each other at some precision, or anywhere QuestDB stores. */
const timeNs = (base: bigint) =>
  fc.oneof(
    fc.bigInt({ min: 0n, max: END_NS - 1n }),
    fc.integer({ min: 0, max: 3_600 }).map((s) => base + BigInt(s) * 1_000_000_000n),
    fc.integer({ min: 0, max: 3_600_000 }).map((ms) => base + BigInt(ms) * 1_000_000n),
    fc.bigInt({ min: 0n, max: 100_000_000_000n }).map((ns) => base + ns),
  );
const queueId = fc.oneof(
  fc.constantFrom('MV-1', 'MV-2', 'temp', 'lat', 'lon'),
  fc.string({ unit: 'grapheme', minLength: 1, maxLength: 12 }),
  fc.string({ unit: 'binary', minLength: 1, maxLength: 12 }),
);
const queued = (base: bigint): fc.Arbitrary<SeriesReading> =>
  fc.record({
    timeNs: timeNs(base).map(String),
    shipId: queueId,
    cargoId: queueId,
    value: fc.oneof(fc.double({ noNaN: true, noDefaultInfinity: true }), fc.constantFrom(-0, 5e-324, 12.37, 1013.2)),
  });
const batches = fc
  .bigInt({ min: 0n, max: END_NS - 3_700_000_000_000n })
  .chain((base) => fc.array(queued(base), { minLength: 1, maxLength: 60 }));

/** The plain reading a queued one is forwarded as. */
const plain = (r: SeriesReading) => ({ time: formatTimestampNs(r.timeNs), ship_id: r.shipId, cargo_id: r.cargoId, value: r.value });

describe('the series form', () => {
  it('lays out as the plain batch of the readings it was made from, series after series', () => {
    fc.assert(
      fc.property(batches, (readings) => {
        const encoded = encodeSeriesBatch(readings);
        if (encoded === undefined) {
          // Only for times further apart than a JSON number holds exactly, even in nanoseconds.
          const times = readings.map((r) => BigInt(r.timeNs)).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
          expect(times.at(-1)! - times[0]!).toBeGreaterThan(BigInt(Number.MAX_SAFE_INTEGER));
          return;
        }
        expect([...encoded.order].sort((a, b) => a - b)).toEqual(readings.map((_, i) => i));
        const laid = layOutSeries(JSON.parse(encoded.body), 1000);
        expect(laid.ok).toBe(true);
        const expanded = (laid as { readings: ReturnType<typeof plain>[] }).readings;
        expect(expanded).toEqual(encoded.order.map((i) => plain(readings[i]!)));
        for (let k = 0; k < expanded.length; k++) expect(Object.is(expanded[k]!.value, readings[encoded.order[k]!]!.value)).toBe(true);
        // Each series keeps its readings' order.
        const seen = new Map<string, number>();
        for (const i of encoded.order) {
          const key = JSON.stringify([readings[i]!.shipId, readings[i]!.cargoId]);
          expect(i).toBeGreaterThan(seen.get(key) ?? -1);
          seen.set(key, i);
        }
      }),
      { numRuns: propertyRuns(1_000) },
    );
  });

  it('is judged as its plain batch is by the reading schema of record, refusals at the same indices', () => {
    const anyId = fc.oneof(
      queueId,
      fc.constantFrom('', 'x'.repeat(13), 'nul\u0000', 'lone\ud800'),
      fc.integer(),
      fc.constant(null),
      fc.constant(undefined),
    );
    const anyValue = fc.oneof(fc.double(), fc.string(), fc.constant(null), fc.boolean());
    const series = fc
      .record({
        ship_id: anyId,
        cargo_id: anyId,
        steps: fc.array(fc.record({ delta: fc.integer({ min: -5_000_000, max: 5_000_000 }), value: anyValue }), {
          minLength: 0,
          maxLength: 8,
        }),
      })
      .map(({ ship_id, cargo_id, steps }) => ({ ship_id, cargo_id, times: steps.map((s) => s.delta), values: steps.map((s) => s.value) }));
    const body = fc.record({
      time0: fc.integer({ min: NOW - 40 * 86_400_000, max: NOW + 2 * 86_400_000 }).map((ms) => new Date(ms).toISOString()),
      time_unit: fc.constantFrom('s', 'ms', 'us', 'ns'),
      series: fc.array(series, { minLength: 1, maxLength: 6 }),
    });
    const scale = { s: 1_000_000_000n, ms: 1_000_000n, us: 1_000n, ns: 1n } as const;
    fc.assert(
      fc.property(body, fc.boolean(), (input, withWindow) => {
        const v = withWindow ? windowed : validator;
        // The oracle: the plain batch, laid out here by arithmetic of its own.
        const batch: unknown[] = [];
        for (const s of input.series) {
          let t = BigInt(Date.parse(input.time0)) * 1_000_000n;
          s.times.forEach((delta, k) => {
            t += BigInt(delta) * scale[input.time_unit];
            batch.push({ time: formatTimestampNs(t.toString()), ship_id: s.ship_id, cargo_id: s.cargo_id, value: s.values[k] });
          });
        }
        const viaSeries = parseSeriesBatch(JSON.parse(JSON.stringify(input)), v, 1000);
        const viaPlain = parseBatch(JSON.parse(JSON.stringify(batch)), v, 1000);
        expect(viaSeries).toEqual(viaPlain);
        if (viaPlain.ok) {
          for (let i = 0; i < batch.length; i++) {
            const zod = v.schema.safeParse(JSON.parse(JSON.stringify(batch[i])));
            expect(zod.success && zod.data).toEqual(viaPlain.readings[i]);
          }
        }
      }),
      { numRuns: propertyRuns(1_000) },
    );
  });

  it('refuses an envelope of another shape, naming where', () => {
    const time0 = '2026-05-27T10:00:00Z';
    const refusal = (body: unknown) => {
      const result = parseSeriesBatch(body, validator, 10);
      expect(result.ok).toBe(false);
      return result.ok ? undefined : { refusal: result.refusal, locs: result.details.map((d) => d.loc) };
    };
    expect(refusal([])).toMatchObject({ refusal: 'malformed', locs: [['body']] });
    expect(refusal({ time0, time_unit: 'min', series: [] })).toMatchObject({ locs: [['body', 'time_unit']] });
    expect(
      refusal({ time0: 'yesterday', time_unit: 'ms', series: [{ ship_id: 'a', cargo_id: 'b', times: [0], values: [1] }] }),
    ).toMatchObject({
      locs: [['body', 'time0']],
    });
    expect(refusal({ time0, time_unit: 'ms', series: [{ ship_id: 'a', cargo_id: 'b', times: [0, 1.5], values: [1, 2] }] })).toMatchObject({
      locs: [['body', 'series', 0, 'times', 1]],
    });
    expect(
      refusal({ time0, time_unit: 'ns', series: [{ ship_id: 'a', cargo_id: 'b', times: [0, 2 ** 60], values: [1, 2] }] }),
    ).toMatchObject({ locs: [['body', 'series', 0, 'times', 1]] });
    expect(refusal({ time0, time_unit: 'ms', series: [{ ship_id: 'a', cargo_id: 'b', times: [0, 1], values: [1] }] })).toMatchObject({
      locs: [['body', 'series', 0, 'values']],
    });
    expect(
      refusal({ time0, time_unit: 's', series: [{ ship_id: 'a', cargo_id: 'b', times: [-1_800_000_000], values: [1] }] }),
    ).toMatchObject({
      locs: [['body', 'series', 0, 'times', 0]],
    });
    expect(refusal({ time0, time_unit: 'ms', series: [] })).toMatchObject({ refusal: 'malformed', locs: [['body']] });
  });

  it('refuses a body that stands for more readings than a batch may hold before laying any out', () => {
    const times = new Array(11).fill(0);
    const result = parseSeriesBatch(
      { time0: 'not even looked at', time_unit: 'ms', series: [{ ship_id: 'a', cargo_id: 'b', times, values: times }] },
      validator,
      10,
    );
    expect(result).toMatchObject({ ok: false, refusal: 'malformed', details: [{ loc: ['body', 'series'], type: 'too_long' }] });
  });

  it('is declared by its media type, parameters and case aside', () => {
    expect(isSeriesMediaType(SERIES_MEDIA_TYPE)).toBe(true);
    expect(isSeriesMediaType('Application/VND.Harbor.Series+JSON; charset=utf-8')).toBe(true);
    expect(isSeriesMediaType('application/json')).toBe(false);
    expect(isSeriesMediaType(undefined)).toBe(false);
  });

  it('takes the coarsest time unit the times need', () => {
    const r = (timeNs: string, shipId = 'MV-1'): SeriesReading => ({ timeNs, shipId, cargoId: 'temp', value: 1 });
    const unitOf = (readings: SeriesReading[]) => JSON.parse(encodeSeriesBatch(readings)!.body).time_unit;
    expect(unitOf([r('1779876000000000000'), r('1779876005000000000')])).toBe('s');
    expect(unitOf([r('1779876000000000000'), r('1779876005123000000')])).toBe('ms');
    expect(unitOf([r('1779876000000000000'), r('1779876005123456000')])).toBe('us');
    expect(unitOf([r('1779876000000000001'), r('1779876005000000000')])).toBe('ns');
    expect(
      JSON.parse(encodeSeriesBatch([r('1779876000000000000'), r('1779876005000000000', 'MV-2'), r('1779876010000000000')])!.body),
    ).toEqual({
      time0: '2026-05-27T10:00:00.000000000Z',
      time_unit: 's',
      series: [
        { ship_id: 'MV-1', cargo_id: 'temp', times: [0, 10], values: [1, 1] },
        { ship_id: 'MV-2', cargo_id: 'temp', times: [5], values: [1] },
      ],
    });
  });
});
