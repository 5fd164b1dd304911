import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ReceiveClock, parseTimestampNs } from './timestamp.js';

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
  ])('refuses %s as %s', (input, type) => {
    const result = parseTimestampNs(input);
    expect(typeof result).toBe('object');
    expect(result).toMatchObject({ type });
  });

  it('agrees with Date for every millisecond timestamp JavaScript itself prints', () => {
    const dates = fc.date({ min: new Date(0), max: new Date(Date.UTC(2261, 11, 31)), noInvalidDate: true });
    fc.assert(
      fc.property(dates, (date) => {
        const ms = date.getTime();
        const expected = ms === 0 ? '0' : `${ms}000000`;
        expect(parseTimestampNs(date.toISOString())).toBe(expected);
      }),
      { numRuns: 2000 },
    );
  });
});

describe('ReceiveClock', () => {
  it('gives readings received in the same millisecond distinct, increasing nanoseconds', () => {
    let now = 1_767_225_600_123;
    const clock = new ReceiveClock(() => now);
    expect([clock.nextNs(), clock.nextNs(), clock.nextNs()]).toEqual([
      '1767225600123000000',
      '1767225600123000001',
      '1767225600123000002',
    ]);
    now += 1;
    expect(clock.nextNs()).toBe('1767225600124000000');
  });

  it('carries into the next millisecond after a million readings', () => {
    const clock = new ReceiveClock(() => 1_000);
    let last = '';
    for (let i = 0; i < 1_000_001; i++) last = clock.nextNs();
    expect(last).toBe('1001000000');
  });

  it('stays monotonic across small clock jitter and follows a large step back', () => {
    let now = 2_000_000;
    const clock = new ReceiveClock(() => now);
    expect(clock.nextNs()).toBe('2000000000000');
    now -= 5;
    expect(clock.nextNs()).toBe('2000000000001');
    now -= 10_000;
    expect(clock.nextNs()).toBe('1989995000000');
  });
});
