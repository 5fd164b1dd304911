import { describe, expect, it } from 'vitest';
import { unsynchronisedClockRefusal } from './ingest.js';

const future = { loc: ['body', 0, 'time'], msg: 'ahead', type: 'datetime_future' };
const past = { loc: ['body', 1, 'time'], msg: 'before', type: 'datetime_past' };
const value = { loc: ['body', 2, 'value'], msg: 'no', type: 'finite_number' };

describe('a reading time outside the window while the gateway clock is not synchronised', () => {
  it('is answered "retry" (clock_unsynchronised), not refused for good', () => {
    expect(unsynchronisedClockRefusal([future, past], () => false)?.details.map((d) => d.type)).toEqual([
      'clock_unsynchronised',
      'clock_unsynchronised',
    ]);
  });

  it('is refused as the device clock at fault when the clock is synchronised or cannot be known', () => {
    expect(unsynchronisedClockRefusal([future], () => true)).toBeUndefined();
    expect(unsynchronisedClockRefusal([future], () => null)).toBeUndefined();
  });

  it('leaves every other refusal alone, without looking at the clock', () => {
    expect(
      unsynchronisedClockRefusal([future, value], () => {
        throw new Error('looked');
      }),
    ).toBeUndefined();
  });
});
