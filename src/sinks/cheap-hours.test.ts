import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type DailyWindow, formatDailyWindows, parseDailyWindows } from '../config/daily-windows.js';
import { msUntilWindow, withinWindows } from './cheap-hours.js';

const at = (hours: number, minutes: number, seconds = 0): Date => new Date(2026, 10, 28, hours, minutes, seconds);

describe('times of day', () => {
  it('read HH:MM-HH:MM stretches, past midnight too, and say what is wrong with any other', () => {
    expect(parseDailyWindows('22:00-06:00')).toEqual([{ start: 1320, end: 360 }]);
    expect(parseDailyWindows('00:00-06:00, 12:00-13:30')).toEqual([
      { start: 0, end: 360 },
      { start: 720, end: 810 },
    ]);
    expect(parseDailyWindows('24:00-06:00')).toMatch(/"24:00-06:00" is not a stretch of the day/);
    expect(parseDailyWindows('22:00')).toMatch(/is not a stretch of the day/);
    expect(parseDailyWindows('6:00-7:00')).toMatch(/is not a stretch of the day/);
    expect(parseDailyWindows('08:00-08:00')).toMatch(/starts where it ends/);
    expect(formatDailyWindows(parseDailyWindows('00:00-06:00,22:30-23:45') as DailyWindow[])).toBe('00:00-06:00,22:30-23:45');
  });

  it('tell whether a moment is inside, and how long until the next begins', () => {
    const night = parseDailyWindows('22:00-06:00') as DailyWindow[];
    expect(withinWindows(night, at(21, 59, 59))).toBe(false);
    expect(withinWindows(night, at(22, 0))).toBe(true);
    expect(withinWindows(night, at(3, 0))).toBe(true);
    expect(withinWindows(night, at(6, 0))).toBe(false);
    expect(msUntilWindow(night, at(21, 59))).toBe(60_000);
    expect(msUntilWindow(night, at(6, 0))).toBe(16 * 3_600_000);
    expect(msUntilWindow(night, at(23, 0))).toBe(0);
    expect(msUntilWindow([], at(23, 0))).toBe(Number.POSITIVE_INFINITY);
  });

  it('agree with a minute-by-minute reference on any windows', () => {
    const hhmm = fc.tuple(fc.integer({ min: 0, max: 23 }), fc.integer({ min: 0, max: 59 }));
    const text = ([h, m]: [number, number]) => `${String(h).padStart(2, '0')}:${String(m).padStart(2, '0')}`;
    fc.assert(
      fc.property(fc.array(fc.tuple(hhmm, hhmm), { minLength: 1, maxLength: 3 }), hhmm, (pairs, [h, m]) => {
        const windows = parseDailyWindows(pairs.map(([a, b]) => `${text(a)}-${text(b)}`).join(','));
        fc.pre(typeof windows !== 'string');
        const minuteIn = (w: DailyWindow, minute: number) => {
          for (let x = w.start; x !== w.end; x = (x + 1) % 1440) if (x === minute) return true;
          return false;
        };
        const list = windows as DailyWindow[];
        const now = h * 60 + m;
        expect(withinWindows(list, at(h, m))).toBe(list.some((w) => minuteIn(w, now)));
        let wait = 0;
        while (!list.some((w) => minuteIn(w, (now + wait) % 1440))) wait += 1;
        expect(msUntilWindow(list, at(h, m))).toBe(wait * 60_000);
      }),
    );
  });
});
