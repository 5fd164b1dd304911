import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { propertyRuns } from '../../test/support/property-sizes.js';
import { MAX_EPOCH_SECONDS, parseTimestampNs } from './timestamp.js';

/**
 * A plain regular-expression reading of the accepted format, kept here as the oracle of the
 * hand-written parser.
 */
function referenceParse(text: string): string | { type: string } {
  const m = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:[.,](\d+))?(?:[Zz]|([+-])(\d{2})(?::?(\d{2}))?)$/.exec(text);
  if (m === null) return { type: 'datetime_format' };
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  const days = [31, year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
  if (month < 1 || month > 12 || day < 1 || day > days[month - 1]!) return { type: 'datetime_value' };
  if (hour > 23 || minute > 59 || second > 59) return { type: 'datetime_value' };
  const fraction = m[7] ?? '';
  if (fraction.length > 9) return { type: 'datetime_precision' };
  const offsetHours = m[9] === undefined ? 0 : Number(m[9]);
  const offsetMinutes = m[10] === undefined ? 0 : Number(m[10]);
  if (offsetHours > 23 || offsetMinutes > 59) return { type: 'datetime_value' };
  const offset = (offsetHours * 3600 + offsetMinutes * 60) * (m[8] === '-' ? -1 : 1);
  // setUTCFullYear takes every year as written; Date.UTC would read 0 to 99 as 1900 to 1999.
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day);
  date.setUTCHours(hour, minute, second, 0);
  const seconds = date.getTime() / 1000 - offset;
  if (seconds < 0 || seconds >= MAX_EPOCH_SECONDS) return { type: 'datetime_range' };
  return String(BigInt(seconds) * 1_000_000_000n + BigInt(fraction.padEnd(9, '0')));
}

const seconds = (iso: string): number => Date.parse(iso) / 1000;

describe('parseTimestampNs', () => {
  it.each([
    ['2026-01-31T12:00:00Z', `${seconds('2026-01-31T12:00:00Z')}000000000`],
    ['2026-01-31T12:00:00.123Z', `${seconds('2026-01-31T12:00:00Z')}123000000`],
    ['2026-01-31T12:00:00.123456Z', `${seconds('2026-01-31T12:00:00Z')}123456000`],
    ['2026-01-31T12:00:00.123456789Z', `${seconds('2026-01-31T12:00:00Z')}123456789`],
    ['2026-01-31T12:00:00.1234567Z', `${seconds('2026-01-31T12:00:00Z')}123456700`],
    ['2026-01-31T12:00:00.5z', `${seconds('2026-01-31T12:00:00Z')}500000000`],
    ['2026-01-31t12:00:00,25Z', `${seconds('2026-01-31T12:00:00Z')}250000000`],
    ['2026-01-31 12:00:00Z', `${seconds('2026-01-31T12:00:00Z')}000000000`],
  ])('reads %s with its full fraction', (input, expected) => {
    expect(parseTimestampNs(input)).toBe(expected);
  });

  it.each([
    ['2026-01-31T14:00:00.000000001+02:00', '2026-01-31T12:00:00Z'],
    ['2026-01-31T06:30:00.000000001-05:30', '2026-01-31T12:00:00Z'],
    ['2026-01-31T17:30:00.000000001+0530', '2026-01-31T12:00:00Z'],
    ['2026-01-31T15:00:00.000000001+03', '2026-01-31T12:00:00Z'],
    ['2026-02-01T00:30:00.000000001+12:30', '2026-01-31T12:00:00Z'],
  ])('applies the offset of %s', (input, utc) => {
    expect(parseTimestampNs(input)).toBe(`${seconds(utc)}000000001`);
  });

  it('handles the epoch itself and leap days', () => {
    expect(parseTimestampNs('1970-01-01T00:00:00Z')).toBe('0');
    expect(parseTimestampNs('1970-01-01T00:00:00.000000001Z')).toBe('1');
    expect(parseTimestampNs('2024-02-29T00:00:00Z')).toBe(`${seconds('2024-02-29T00:00:00Z')}000000000`);
    expect(parseTimestampNs('2000-02-29T00:00:00Z')).toBe(`${seconds('2000-02-29T00:00:00Z')}000000000`);
    expect(parseTimestampNs('2261-12-31T23:59:59.999999999Z')).toBe(`${seconds('2261-12-31T23:59:59Z')}999999999`);
  });

  it('reads every year as written, two-digit years included', () => {
    for (const year of ['0000', '0001', '0070', '0099', '0100', '1899', '1969']) {
      expect(parseTimestampNs(`${year}-06-01T12:00:00Z`)).toMatchObject({ type: 'datetime_range' });
    }
    expect(parseTimestampNs('0099-06-01T12:00:00Z')).not.toBe(parseTimestampNs('1999-06-01T12:00:00Z'));
    expect(parseTimestampNs('1999-06-01T12:00:00Z')).toBe(`${seconds('1999-06-01T12:00:00Z')}000000000`);
    expect(parseTimestampNs('0070-01-01T00:00:00Z')).toMatchObject({ type: 'datetime_range' });
  });

  it('applies the bounds it is given, after the range of the representable times', () => {
    const tooEarly = { type: 'datetime_past', msg: 'early' } as const;
    const tooLate = { type: 'datetime_future', msg: 'late' } as const;
    const bounds = { minSeconds: seconds('2026-01-01T00:00:00Z'), maxSeconds: seconds('2026-12-31T00:00:00Z'), tooEarly, tooLate };
    expect(parseTimestampNs('2026-01-01T00:00:00Z', bounds)).toBe(`${bounds.minSeconds}000000000`);
    expect(parseTimestampNs('2025-12-31T23:59:59.999999999Z', bounds)).toBe(tooEarly);
    expect(parseTimestampNs('2026-12-31T00:00:00.999999999Z', bounds)).toBe(`${bounds.maxSeconds}999999999`);
    expect(parseTimestampNs('2026-12-31T00:00:01Z', bounds)).toBe(tooLate);
    expect(parseTimestampNs('2026-12-31T02:00:00+02:00', bounds)).toBe(`${bounds.maxSeconds}000000000`);
    expect(parseTimestampNs('2262-01-01T00:00:00Z', bounds)).toMatchObject({ type: 'datetime_range' });
    expect(parseTimestampNs('1969-12-31T23:59:59Z', bounds)).toMatchObject({ type: 'datetime_range' });
  });

  it.each([
    ['yesterday', 'datetime_format'],
    ['2026-01-31', 'datetime_format'],
    ['2026-01-31T12:00:00', 'datetime_format'],
    ['2026-01-31T12:00Z', 'datetime_format'],
    [' 2026-01-31T12:00:00Z', 'datetime_format'],
    ['2026-01-31T12:00:00.Z', 'datetime_format'],
    ['+2026-01-31T12:00:00Z', 'datetime_format'],
    ['2026-02-30T00:00:00Z', 'datetime_value'],
    ['2100-02-29T00:00:00Z', 'datetime_value'],
    ['2026-13-01T00:00:00Z', 'datetime_value'],
    ['2026-00-10T00:00:00Z', 'datetime_value'],
    ['2026-01-00T00:00:00Z', 'datetime_value'],
    ['2026-01-31T24:00:00Z', 'datetime_value'],
    ['2026-01-31T23:60:00Z', 'datetime_value'],
    ['2026-12-31T23:59:60Z', 'datetime_value'],
    ['2026-01-31T12:00:00+24:00', 'datetime_value'],
    ['2026-01-31T12:00:00.1234567891Z', 'datetime_precision'],
    ['1969-12-31T23:59:59.999999999Z', 'datetime_range'],
    ['1970-01-01T00:30:00+01:00', 'datetime_range'],
    ['2262-01-01T00:00:00Z', 'datetime_range'],
    ['9999-12-31T23:59:59Z', 'datetime_range'],
    ['0099-06-01T12:00:00Z', 'datetime_range'],
    ['0070-01-01T00:00:00Z', 'datetime_range'],
    ['0000-02-29T00:00:00Z', 'datetime_range'],
  ])('refuses %s as %s', (input, type) => {
    const result = parseTimestampNs(input);
    expect(typeof result).toBe('object');
    expect(result).toMatchObject({ type });
  });

  it('agrees with the regular-expression reading of the format on generated text', () => {
    const digit = fc.constantFrom(...'0123456789');
    const digits = (n: number) => fc.array(digit, { minLength: n, maxLength: n }).map((d) => d.join(''));
    const part = fc.oneof(
      fc
        .tuple(digits(4), digits(2), digits(2), fc.constantFrom('T', 't', ' ', 'x'), digits(2), digits(2), digits(2))
        .map(([y, mo, d, sep, h, mi, se]) => `${y}-${mo}-${d}${sep}${h}:${mi}:${se}`),
      fc.date({ min: new Date(0), max: new Date(Date.UTC(2262, 0, 2)), noInvalidDate: true }).map((d) => d.toISOString().slice(0, 19)),
    );
    const fraction = fc.oneof(
      fc.constant(''),
      fc.tuple(fc.constantFrom('.', ',', ':'), fc.array(digit, { maxLength: 11 })).map(([m, d]) => m + d.join('')),
    );
    const zone = fc.oneof(
      fc.constantFrom('Z', 'z', '', 'UTC', '+', '+1', '-05:', '+05:3', '+05:30:00'),
      fc
        .tuple(fc.constantFrom('+', '-'), digits(2), fc.constantFrom('', ':'), fc.oneof(fc.constant(''), digits(2)))
        .map(([s, h, c, m]) => s + h + c + m),
    );
    fc.assert(
      fc.property(fc.tuple(part, fraction, zone, fc.oneof(fc.constant(''), fc.string({ maxLength: 2 }))), ([p, f, z, tail]) => {
        const text = p + f + z + tail;
        const expected = referenceParse(text);
        const actual = parseTimestampNs(text);
        expect(typeof actual === 'string' ? actual : { type: actual.type }).toEqual(expected);
      }),
      { numRuns: propertyRuns(20_000) },
    );
  });

  it('agrees with Date for every millisecond timestamp JavaScript itself prints', () => {
    const dates = fc.date({ min: new Date(0), max: new Date(Date.UTC(2261, 11, 31)), noInvalidDate: true });
    fc.assert(
      fc.property(dates, (date) => {
        const ms = date.getTime();
        const expected = ms === 0 ? '0' : `${ms}000000`;
        expect(parseTimestampNs(date.toISOString())).toBe(expected);
      }),
      { numRuns: propertyRuns(2000) },
    );
  });
});
