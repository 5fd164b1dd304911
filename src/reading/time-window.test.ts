import { describe, expect, it } from 'vitest';
import { TimeWindow } from './time-window.js';
import { parseTimestampNs } from './timestamp.js';

describe('TimeWindow', () => {
  it('accepts from the retention window to the lead over the clock, read at each refresh', () => {
    let now = Date.UTC(2026, 10, 26, 12, 0, 0, 900);
    const window = new TimeWindow({ maxAheadS: 3600, maxAgeS: 2 * 86_400, ageReason: 'RETENTION_DAYS=2' }, () => now);
    expect(typeof parseTimestampNs('2026-11-26T13:00:00.999Z', window)).toBe('string');
    expect(parseTimestampNs('2026-11-26T13:00:01Z', window)).toMatchObject({
      type: 'datetime_future',
      msg: "Timestamp is more than 1 h ahead of the gateway's clock (2026-11-26T12:00:00Z; MAX_TIME_AHEAD_S). Is the device clock set?",
    });
    expect(typeof parseTimestampNs('2026-11-24T12:00:00Z', window)).toBe('string');
    expect(parseTimestampNs('2026-11-24T11:59:59.999Z', window)).toMatchObject({
      type: 'datetime_past',
      msg: 'Timestamp is before the retention window, which starts at 2026-11-24T12:00:00Z (RETENTION_DAYS=2): it would not be kept. Is the device clock set?',
    });
    expect(parseTimestampNs('1970-01-01T00:00:00Z', window)).toMatchObject({ type: 'datetime_past' });
    now += 2000;
    expect(typeof parseTimestampNs('2026-11-26T13:00:01Z', window)).toBe('object');
    window.refresh();
    expect(typeof parseTimestampNs('2026-11-26T13:00:01Z', window)).toBe('string');
  });

  it('without a past bound accepts back to 1970, and never past what QuestDB stores', () => {
    const window = new TimeWindow({ maxAheadS: 9_999_999_999, maxAgeS: undefined }, () => Date.UTC(2026, 0, 1));
    expect(parseTimestampNs('1970-01-01T00:00:00Z', window)).toBe('0');
    expect(typeof parseTimestampNs('2261-12-31T23:59:59.999999999Z', window)).toBe('string');
    expect(parseTimestampNs('2262-01-01T00:00:00Z', window)).toMatchObject({ type: 'datetime_range' });
  });
});
