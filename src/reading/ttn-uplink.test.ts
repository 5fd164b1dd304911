import { describe, expect, it } from 'vitest';
import { TimeWindow } from './time-window.js';
import { uplinkToReadings } from './ttn-uplink.js';

const NOW = Date.UTC(2026, 10, 26, 9, 0, 0);
const RECEIVED = '2026-11-26T08:59:59.123456789Z';

const uplink = (time: unknown) => ({
  end_device_ids: { device_id: 'eui-1' },
  received_at: RECEIVED,
  uplink_message: { decoded_payload: { time, temperature: 21.5 } },
});

const timeOf = (result: ReturnType<typeof uplinkToReadings>): unknown => {
  if (!result.ok) throw new Error('not an uplink');
  return (result.readings[0] as { time: unknown }).time;
};

describe('the time of a TTN uplink reading', () => {
  it('is decoded_payload.time when it is at most a day ahead', () => {
    expect(timeOf(uplinkToReadings(uplink('2026-11-27T08:59:59Z'), undefined, NOW))).toBe('2026-11-27T08:59:59Z');
    expect(timeOf(uplinkToReadings(uplink('2026-11-20T00:00:00Z'), undefined, NOW))).toBe('2026-11-20T00:00:00Z');
  });

  it('is received_at when decoded_payload.time is more than a day ahead, as the existing stack does', () => {
    expect(timeOf(uplinkToReadings(uplink('2031-01-01T00:00:00Z'), undefined, NOW))).toBe(RECEIVED);
    expect(timeOf(uplinkToReadings(uplink('2026-11-27T09:00:01Z'), undefined, NOW))).toBe(RECEIVED);
  });

  it('is received_at when decoded_payload.time is before the retention window or not a time', () => {
    const window = new TimeWindow({ maxAheadS: 3600, maxAgeS: 30 * 86_400 }, () => NOW);
    expect(timeOf(uplinkToReadings(uplink('1970-01-01T00:00:05Z'), window, NOW))).toBe(RECEIVED);
    expect(timeOf(uplinkToReadings(uplink('2026-11-26T10:30:00Z'), window, NOW))).toBe(RECEIVED);
    expect(timeOf(uplinkToReadings(uplink('2026-11-20T00:00:00Z'), window, NOW))).toBe('2026-11-20T00:00:00Z');
    expect(timeOf(uplinkToReadings(uplink('soon'), window, NOW))).toBe(RECEIVED);
  });
});

describe('the fields of a TTN uplink that are readings', () => {
  it('counts numeric strings ("3.3"), as the existing stack does, but not those under a name that names a thing', () => {
    const result = uplinkToReadings({
      end_device_ids: { device_id: 'eui-1' },
      received_at: RECEIVED,
      uplink_message: { decoded_payload: { voltage: '3.3', level: '007', sensor_id: '031697792281', DevEUI: '0011', id: 4 } },
    });
    if (!result.ok) throw new Error('not an uplink');
    expect(result.readings.map((r) => [(r as { cargo_id: string }).cargo_id, (r as { value: number }).value])).toEqual([
      ['voltage', 3.3],
      ['level', 7],
      ['id', 4],
    ]);
  });
});
