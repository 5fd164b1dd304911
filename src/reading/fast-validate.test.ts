import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { anyCodePoint } from '../../test/support/code-points.js';
import { propertyRuns } from '../../test/support/property-sizes.js';
import { fastValidate } from './fast-validate.js';
import { readingSchema } from './reading-schema.js';
import { TimeWindow } from './time-window.js';

const limits = { maxIdLength: 12 };
const schema = readingSchema(limits);
/** A window of 30 days back and a day ahead of a fixed clock, as RETENTION_DAYS and MAX_TIME_AHEAD_S make one. */
const NOW = Date.UTC(2026, 10, 26, 9, 30, 15, 500);
const windowed = { maxIdLength: 12, window: new TimeWindow({ maxAheadS: 86_400, maxAgeS: 30 * 86_400 }, () => NOW) };
const windowedSchema = readingSchema(windowed);

const pad = (n: number, width: number) => String(n).padStart(width, '0');
const timeText = (min: number, max: number) =>
  fc
    .record({
      ms: fc.integer({ min, max }),
      fraction: fc.constantFrom('', '.1', '.123', '.123456', '.123456789', ',5', '.1234567890'),
      zone: fc.constantFrom('Z', 'z', '+00:00', '-05:30', '+0530', '+14', '-23:59', '+24:00'),
      separator: fc.constantFrom('T', 't', ' ', '_'),
    })
    .map(({ ms, fraction, zone, separator }) => {
      const d = new Date(ms);
      const date = `${pad(d.getUTCFullYear(), 4)}-${pad(d.getUTCMonth() + 1, 2)}-${pad(d.getUTCDate(), 2)}`;
      return `${date}${separator}${pad(d.getUTCHours(), 2)}:${pad(d.getUTCMinutes(), 2)}:${pad(d.getUTCSeconds(), 2)}${fraction}${zone}`;
    });
// Years 0 to 99 included: they are refused as before 1970, never read as 1900 to 1999.
const validTime = timeText(Date.UTC(0, 0, 1) - 1900 * 365.2425 * 86_400_000, Date.UTC(2261, 11, 31));
/** Times on both sides of the window's edges, offsets included. */
const nearWindow = fc.oneof(
  timeText(NOW - 30 * 86_400_000 - 30 * 3_600_000, NOW - 30 * 86_400_000 + 30 * 3_600_000),
  timeText(NOW + 86_400_000 - 30 * 3_600_000, NOW + 86_400_000 + 30 * 3_600_000),
  fc.constantFrom(
    new Date(NOW - 30 * 86_400_000).toISOString(),
    new Date(NOW - 30 * 86_400_000 - 1000).toISOString(),
    new Date(NOW + 86_400_000).toISOString(),
    new Date(NOW + 86_400_000 + 1000).toISOString(),
    '0099-06-01T12:00:00Z',
    '2100-01-01T00:00:00Z',
  ),
);
const oddTime = fc.constantFrom(
  '2026-02-30T00:00:00Z',
  '2026-13-01T00:00:00Z',
  '1969-12-31T23:59:59Z',
  '2262-01-01T00:00:00Z',
  '2026-01-01T24:00:00Z',
  '2026-01-01T00:00:60Z',
  '2026-01-01',
  '2026-01-01T00:00:00',
  '',
  'now',
);
const time = fc.oneof(
  validTime,
  nearWindow,
  oddTime,
  fc.string(),
  fc.constant(undefined),
  fc.constant(null),
  fc.integer(),
  fc.boolean(),
  fc.object(),
);
const id = fc.oneof(
  fc.string({ unit: anyCodePoint, minLength: 0, maxLength: 14 }),
  fc.string({ unit: 'grapheme', minLength: 1, maxLength: 14 }),
  fc.constantFrom(
    '',
    'a\tb',
    'nul\u0000',
    'c1\u0085',
    'lone\ud800',
    '\udc00x',
    '😀'.repeat(12),
    '😀'.repeat(13),
    'x'.repeat(12),
    'x'.repeat(13),
  ),
  fc.constant(undefined),
  fc.integer(),
  fc.constant(null),
  fc.array(fc.string(), { maxLength: 2 }),
);
const value = fc.oneof(
  fc.double(),
  fc.constantFrom(-0, NaN, Infinity, -Infinity, 5e-324),
  fc.string(),
  fc.constant(null),
  fc.boolean(),
  fc.constant(undefined),
  fc.object(),
);
const reading = fc.record({ time, ship_id: id, cargo_id: id, value, extra: fc.anything() }, { requiredKeys: [] });

describe('fastValidate agrees with the zod schema of record', () => {
  it('on generated readings, valid and invalid', () => {
    fc.assert(
      fc.property(fc.oneof(reading, fc.anything(), fc.jsonValue()), (input) => {
        const zod = schema.safeParse(input);
        const fast = fastValidate(input, limits);
        if (zod.success) {
          expect(fast).toEqual(zod.data);
          expect(Object.is(fast!.value, zod.data.value)).toBe(true);
        } else {
          expect(fast).toBeUndefined();
        }
      }),
      { numRuns: propertyRuns(20_000) },
    );
  });

  it('on generated readings with a time window, both sides of its edges', () => {
    fc.assert(
      fc.property(
        fc.oneof(reading, fc.record({ time: nearWindow, ship_id: fc.constant('s'), cargo_id: fc.constant('c'), value: fc.double() })),
        (input) => {
          const zod = windowedSchema.safeParse(input);
          const fast = fastValidate(input, windowed);
          if (zod.success) expect(fast).toEqual(zod.data);
          else expect(fast).toBeUndefined();
        },
      ),
      { numRuns: propertyRuns(20_000) },
    );
  });

  it('on readings built by JSON.parse, __proto__ keys included', () => {
    for (const text of [
      '{"__proto__":{"ship_id":"s","cargo_id":"c","value":1}}',
      '{"ship_id":"s","cargo_id":"c","value":1,"__proto__":{"value":"x"}}',
      '{"ship_id":"s","ship_id":"t","cargo_id":"c","value":-0}',
    ]) {
      const input: unknown = JSON.parse(text);
      const zod = schema.safeParse(input);
      expect(fastValidate(input, limits)).toEqual(zod.success ? zod.data : undefined);
    }
  });
});
