/**
 * RFC 3339 / ISO 8601 timestamps to epoch nanoseconds, as decimal strings: JavaScript numbers
 * cannot hold nanosecond epochs exactly and BigInt is slow on the ingest path.
 */

// Date and time separated by T, t or a space; 0-9 fraction digits after . or ,; Z, ±HH:MM, ±HHMM or ±HH.
const TIMESTAMP = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:[.,](\d+))?(?:[Zz]|([+-])(\d{2})(?::?(\d{2}))?)$/;

/** Earliest accepted instant: QuestDB refuses designated timestamps before the epoch. */
export const MIN_EPOCH_SECONDS = 0;
/** First instant refused: 2262-01-01T00:00:00Z, just inside signed 64-bit nanoseconds. */
export const MAX_EPOCH_SECONDS = Date.UTC(2262, 0, 1) / 1000;

export interface TimestampProblem {
  readonly type: 'datetime_format' | 'datetime_value' | 'datetime_precision' | 'datetime_range';
  readonly msg: string;
}

const FORMAT: TimestampProblem = {
  type: 'datetime_format',
  msg: 'Input should be an ISO 8601 / RFC 3339 timestamp with Z or an offset, such as 2026-01-31T12:00:00.000Z',
};
const VALUE: TimestampProblem = { type: 'datetime_value', msg: 'Input is not a real date or time of day' };
const PRECISION: TimestampProblem = {
  type: 'datetime_precision',
  msg: 'Fractional seconds may have at most 9 digits (nanoseconds)',
};
const RANGE: TimestampProblem = {
  type: 'datetime_range',
  msg: 'Timestamp must be between 1970-01-01T00:00:00Z and 2261-12-31T23:59:59.999999999Z',
};

const ZEROS = '000000000';

/** Parses a timestamp into epoch nanoseconds (decimal string), or explains why it cannot. */
export function parseTimestampNs(text: string): string | TimestampProblem {
  const m = TIMESTAMP.exec(text);
  if (m === null) return FORMAT;
  const year = +m[1]!;
  const month = +m[2]!;
  const day = +m[3]!;
  const hour = +m[4]!;
  const minute = +m[5]!;
  const second = +m[6]!;
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return VALUE;
  if (hour > 23 || minute > 59 || second > 59) return VALUE;
  const fraction = m[7] ?? '';
  if (fraction.length > 9) return PRECISION;
  let offsetSeconds = 0;
  if (m[8] !== undefined) {
    const offsetHours = +m[9]!;
    const offsetMinutes = m[10] === undefined ? 0 : +m[10];
    if (offsetHours > 23 || offsetMinutes > 59) return VALUE;
    offsetSeconds = (offsetHours * 3600 + offsetMinutes * 60) * (m[8] === '-' ? -1 : 1);
  }
  const epochSeconds = Date.UTC(year, month - 1, day, hour, minute, second) / 1000 - offsetSeconds;
  if (epochSeconds < MIN_EPOCH_SECONDS || epochSeconds >= MAX_EPOCH_SECONDS) return RANGE;
  const nanos = fraction + ZEROS.slice(fraction.length);
  return epochSeconds === 0 ? String(+nanos) : `${epochSeconds}${nanos}`;
}

function daysInMonth(year: number, month: number): number {
  if (month === 2) return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28;
  return month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
}

/**
 * Receive times for readings sent without one: wall-clock milliseconds plus a nanosecond
 * tie-breaker, so readings of one device received in the same millisecond (a batch, or fast
 * single pushes) stay distinct rows instead of collapsing under deduplication.
 */
export class ReceiveClock {
  #ms = 0;
  #sub = 0;

  constructor(private readonly now: () => number = Date.now) {}

  /** Next receive time in epoch nanoseconds, strictly after the previous one unless the clock stepped back. */
  nextNs(): string {
    const now = this.now();
    // Follow the wall clock forward, and back when it steps back by more than a second (NTP).
    if (now > this.#ms || now < this.#ms - 1000) {
      this.#ms = now;
      this.#sub = 0;
    } else if (++this.#sub === 1_000_000) {
      this.#ms += 1;
      this.#sub = 0;
    }
    const sub = String(this.#sub);
    return `${this.#ms}${ZEROS.slice(3 + sub.length)}${sub}`;
  }
}
