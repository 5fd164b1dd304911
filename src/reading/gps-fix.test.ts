import { describe, expect, it } from 'vitest';
import { parseGpsFixes } from './gps-fix.js';
import { ReceiveClock } from './receive-clock.js';
import { readingSchema } from './reading-schema.js';

const validator = { schema: readingSchema({ maxIdLength: 100 }), limits: { maxIdLength: 100 } };

describe('GPS fixes without a time', () => {
  it('share the request receive time; a ship sending two fixes gets them a nanosecond apart, every reading of a fix alike', () => {
    const clock = new ReceiveClock(() => 1_000);
    const parsed = parseGpsFixes(
      [
        { ship_id: 'a', latitude: 1, longitude: 2, speed: 3 },
        { ship_id: 'b', latitude: 1, longitude: 2 },
        { ship_id: 'a', latitude: 4, longitude: 5 },
        { ship_id: 'a', time: '2026-11-26T10:00:00Z', latitude: 6, longitude: 7 },
        { ship_id: 'a', latitude: 8, longitude: 9, speed: 10 },
      ],
      validator,
      100,
      clock,
    );
    if (!parsed.ok) throw new Error(parsed.message);
    expect(parsed.readings.map((r) => `${r.shipId} ${r.cargoId} ${r.timeNs}`)).toEqual([
      'a latitude 1000000000',
      'a longitude 1000000000',
      'a speed 1000000000',
      'b latitude 1000000000',
      'b longitude 1000000000',
      'a latitude 1000000001',
      'a longitude 1000000001',
      'a latitude 1795687200000000000',
      'a longitude 1795687200000000000',
      'a latitude 1000000002',
      'a longitude 1000000002',
      'a speed 1000000002',
    ]);
    expect(clock.nextNs()).toBe('1000000003');
  });
});
