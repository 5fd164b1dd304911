import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { queuedReading } from '../../test/support/queued-reading.js';
import { ReceiveClock } from '../reading/receive-clock.js';
import { RecordCorruptError, decodeRecord, encodeRecord, idEndAt } from './record-codec.js';

describe('record codec', () => {
  it('round-trips readings exactly, resolving missing times once', () => {
    const clock = new ReceiveClock(() => 1_767_225_600_000);
    const payload = encodeRecord(
      [
        { timeNs: '1767225600123456789', shipId: 'ship 1,a=b"\\é', cargoId: 'lat', value: -0 },
        { timeNs: undefined, shipId: '😀', cargoId: 'lon', value: 5e-324 },
        { timeNs: undefined, shipId: '😀', cargoId: 'lon', value: 1.7976931348623157e308 },
      ],
      clock,
    );
    const decoded = decodeRecord(payload);
    expect(decoded).toEqual([
      { timeNs: '1767225600123456789', shipId: 'ship 1,a=b"\\é', cargoId: 'lat', value: -0 },
      { timeNs: '1767225600000000000', shipId: '😀', cargoId: 'lon', value: 5e-324 },
      { timeNs: '1767225600000000001', shipId: '😀', cargoId: 'lon', value: 1.7976931348623157e308 },
    ]);
    expect(Object.is(decoded[0]!.value, -0)).toBe(true);
  });

  it('round-trips any finite double and any id without control characters', () => {
    const reading = queuedReading(20);
    fc.assert(
      fc.property(fc.array(reading, { minLength: 1, maxLength: 20 }), (readings) => {
        expect(decodeRecord(encodeRecord(readings, new ReceiveClock()))).toEqual(readings);
      }),
    );
  });

  it('finds an id where a record writes it, followed by a tab, and nothing else', () => {
    // Texts from a few pieces, so that an id is often a prefix of what is written, or equal to it.
    const text = (pieces: string[]) => fc.array(fc.constantFrom(...pieces), { maxLength: 5 }).map((p) => p.join(''));
    fc.assert(
      fc.property(text(['a', 'b', 'é', '\u{1F6A2}']), text(['a', 'b', 'é', '\u{1F6A2}', '\t']), fc.nat(3), (expected, written, at) => {
        const text = `${'x'.repeat(at)}${written}`;
        const found = idEndAt(expected, text, at);
        const isThere = text.startsWith(`${expected}\t`, at);
        expect(found).toBe(isThere ? at + expected.length : -1);
      }),
    );
    expect(idEndAt(undefined, 'a\t', 0)).toBe(-1);
  });

  describe('receive times of readings without a time', () => {
    const at = (ms: number) => new ReceiveClock(() => ms);
    const times = (payload: string) => decodeRecord(payload).map((r) => r.timeNs);
    const untimed = (shipId: string, cargoId: string, value = 1) => ({ timeNs: undefined, shipId, cargoId, value });

    it('are one time per request: a GPS pair and every other series share it', () => {
      const payload = encodeRecord([untimed('buoy-1', 'latitude'), untimed('buoy-1', 'longitude'), untimed('buoy-2', 'temp')], at(1_000));
      expect(times(payload)).toEqual(['1000000000', '1000000000', '1000000000']);
    });

    it('tell apart only the readings of one series within the request', () => {
      const clock = at(1_000);
      const payload = encodeRecord(
        [
          untimed('s', 'temp'),
          untimed('s', 'hum'),
          { timeNs: '5', shipId: 's', cargoId: 'temp', value: 2 },
          untimed('s', 'temp'),
          untimed('s', 'hum'),
          untimed('s', 'temp'),
        ],
        clock,
      );
      expect(times(payload)).toEqual(['1000000000', '1000000000', '5', '1000000001', '1000000001', '1000000002']);
      // The next request starts after every time this one took.
      expect(times(encodeRecord([untimed('s', 'temp')], clock))).toEqual(['1000000003']);
    });

    it('keep consecutive requests of one series apart in the same millisecond', () => {
      const clock = at(1_000);
      const first = times(encodeRecord([untimed('s', 'temp'), untimed('s', 'hum')], clock));
      const second = times(encodeRecord([untimed('s', 'temp'), untimed('s', 'hum')], clock));
      expect(first).toEqual(['1000000000', '1000000000']);
      expect(second).toEqual(['1000000001', '1000000001']);
    });

    it('take no receive time for a request whose readings all have one', () => {
      const clock = at(1_000);
      encodeRecord([{ timeNs: '7', shipId: 's', cargoId: 'c', value: 1 }], clock);
      expect(clock.nextNs()).toBe('1000000000');
    });
  });

  it.each(['', 'only\tthree\tfields', 'x\ts\tc\t1', '1\t\tc\t1', '1\ts\tc\tNaN', '1\ts\tc\t'])('refuses the corrupt line %j', (line) => {
    expect(() => decodeRecord(line)).toThrow(RecordCorruptError);
  });
});
