import { describe, expect, it } from 'vitest';
import { readingJson } from './reading-message.js';

describe('a reading as a Kafka message', () => {
  it('carries the time in RFC 3339 with nanoseconds, the ids and the value as JSON', () => {
    const json = readingJson({ timeNs: '1795780800123456789', shipId: 'ship-001', cargoId: 'temperature', value: 23.5 });
    expect(json).toBe('{"time":"2026-11-27T12:00:00.123456789Z","ship_id":"ship-001","cargo_id":"temperature","value":23.5}');
    expect(JSON.parse(json)).toEqual({ time: '2026-11-27T12:00:00.123456789Z', ship_id: 'ship-001', cargo_id: 'temperature', value: 23.5 });
  });

  it('escapes ids that JSON must escape and keeps every double exactly, negative zero too', () => {
    for (const value of [-0, 1e21, 5e-324, -1.7976931348623157e308, 0.1 + 0.2]) {
      const parsed = JSON.parse(readingJson({ timeNs: '0', shipId: 'ship "7" \\ ü', cargoId: 'c/1', value }));
      expect(Object.is(parsed.value, value)).toBe(true);
      expect(parsed.ship_id).toBe('ship "7" \\ ü');
      expect(parsed.time).toBe('1970-01-01T00:00:00.000000000Z');
    }
  });
});
