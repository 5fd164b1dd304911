/**
 * RFC 3339 / ISO 8601 timestamps to epoch nanoseconds, as decimal strings: JavaScript numbers
 * cannot hold nanosecond epochs exactly and BigInt is slow on the ingest path.
 */

/** Earliest accepted instant: QuestDB refuses designated timestamps before the epoch. */
export const MIN_EPOCH_SECONDS = 0;
/** First instant refused: 2262-01-01T00:00:00Z, just inside signed 64-bit nanoseconds. */
export const MAX_EPOCH_SECONDS = Date.UTC(2262, 0, 1) / 1000;

export interface TimestampProblem {
  readonly type: 'datetime_format' | 'datetime_value' | 'datetime_precision' | 'datetime_range' | 'datetime_past' | 'datetime_future';
  readonly msg: string;
}

/**
 * The part of the representable range a reading's time must fall in right now (see TimeWindow):
 * whole epoch seconds, both ends included, and what to say about a time outside.
 */
export interface TimeBounds {
  readonly minSeconds: number;
  readonly maxSeconds: number;
  /** Read only when a time falls outside, so the message may be built then. */
  readonly tooEarly: TimestampProblem;
  readonly tooLate: TimestampProblem;
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

const ZERO = 48;

/** The value of two ASCII digits at `i`, or -1. */
function twoDigits(text: string, i: number): number {
  const a = text.charCodeAt(i) - ZERO;
  const b = text.charCodeAt(i + 1) - ZERO;
  return a >= 0 && a <= 9 && b >= 0 && b <= 9 ? a * 10 + b : -1;
}

/**
 * Parses `YYYY-MM-DD(T|t| )hh:mm:ss[(.|,)fraction](Z|z|±hh[[:]mm])` into epoch nanoseconds
 * (a decimal string), or says why it cannot. Every year is read as written (`0099` is the year 99,
 * refused as before 1970, not 1999). Hand-written rather than a regular expression: it runs for
 * every reading on the ingest path. `bounds` narrows the accepted range further (a TimeWindow).
 */
export function parseTimestampNs(text: string, bounds?: TimeBounds): string | TimestampProblem {
  const length = text.length;
  if (length < 20) return FORMAT;
  const century = twoDigits(text, 0);
  const yy = twoDigits(text, 2);
  const month = twoDigits(text, 5);
  const day = twoDigits(text, 8);
  const hour = twoDigits(text, 11);
  const minute = twoDigits(text, 14);
  const second = twoDigits(text, 17);
  const separator = text.charCodeAt(10);
  if (
    century < 0 ||
    yy < 0 ||
    month < 0 ||
    day < 0 ||
    hour < 0 ||
    minute < 0 ||
    second < 0 ||
    text.charCodeAt(4) !== 45 ||
    text.charCodeAt(7) !== 45 ||
    text.charCodeAt(13) !== 58 ||
    text.charCodeAt(16) !== 58 ||
    (separator !== 84 && separator !== 116 && separator !== 32)
  ) {
    return FORMAT;
  }
  let i = 19;
  let fractionStart = i;
  let fractionEnd = i;
  const mark = text.charCodeAt(i);
  if (mark === 46 || mark === 44) {
    fractionStart = ++i;
    while (i < length && text.charCodeAt(i) >= ZERO && text.charCodeAt(i) <= ZERO + 9) i++;
    fractionEnd = i;
    if (fractionEnd === fractionStart) return FORMAT;
  }
  let offsetSign = 0;
  let offsetHours = 0;
  let offsetMinutes = 0;
  const zone = text.charCodeAt(i);
  if (zone === 90 || zone === 122) {
    if (i + 1 !== length) return FORMAT;
  } else if (zone === 43 || zone === 45) {
    offsetSign = zone === 45 ? -1 : 1;
    offsetHours = twoDigits(text, i + 1);
    const rest = length - (i + 3);
    if (offsetHours < 0) return FORMAT;
    if (rest === 2) offsetMinutes = twoDigits(text, i + 3);
    else if (rest === 3 && text.charCodeAt(i + 3) === 58) offsetMinutes = twoDigits(text, i + 4);
    else if (rest !== 0) return FORMAT;
    if (offsetMinutes < 0) return FORMAT;
  } else {
    return FORMAT;
  }

  const year = century * 100 + yy;
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return VALUE;
  if (hour > 23 || minute > 59 || second > 59) return VALUE;
  const digits = fractionEnd - fractionStart;
  if (digits > 9) return PRECISION;
  if (offsetHours > 23 || offsetMinutes > 59) return VALUE;
  const epochSeconds =
    daysFromEpoch(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offsetSign * (offsetHours * 3600 + offsetMinutes * 60);
  if (epochSeconds < MIN_EPOCH_SECONDS || epochSeconds >= MAX_EPOCH_SECONDS) return RANGE;
  if (bounds !== undefined) {
    if (epochSeconds < bounds.minSeconds) return bounds.tooEarly;
    if (epochSeconds > bounds.maxSeconds) return bounds.tooLate;
  }
  const nanos = text.slice(fractionStart, fractionEnd) + ZEROS.slice(digits);
  return epochSeconds === 0 ? String(+nanos) : `${epochSeconds}${nanos}`;
}

/**
 * Days from 1970-01-01 to a proleptic Gregorian date, for any year as written. `Date.UTC` would
 * read the years 0 to 99 as 1900 to 1999.
 */
function daysFromEpoch(year: number, month: number, day: number): number {
  // Years counted from March, so the leap day ends a year (the civil-calendar algorithm of H. Hinnant).
  const y = month <= 2 ? year - 1 : year;
  const era = Math.floor(y / 400);
  const yearOfEra = y - era * 400;
  const dayOfYear = Math.floor((153 * (month > 2 ? month - 3 : month + 9) + 2) / 5) + day - 1;
  const dayOfEra = yearOfEra * 365 + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100) + dayOfYear;
  return era * 146_097 + dayOfEra - 719_468;
}

function daysInMonth(year: number, month: number): number {
  if (month === 2) return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28;
  return month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
}
