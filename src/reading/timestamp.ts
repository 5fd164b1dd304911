/**
 * RFC 3339 / ISO 8601 timestamps to epoch nanoseconds, as decimal strings: JavaScript numbers
 * cannot hold nanosecond epochs exactly and BigInt is slow on the ingest path.
 */

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

const ZERO = 48;

/** The value of two ASCII digits at `i`, or -1. */
function twoDigits(text: string, i: number): number {
  const a = text.charCodeAt(i) - ZERO;
  const b = text.charCodeAt(i + 1) - ZERO;
  return a >= 0 && a <= 9 && b >= 0 && b <= 9 ? a * 10 + b : -1;
}

/**
 * Parses `YYYY-MM-DD(T|t| )hh:mm:ss[(.|,)fraction](Z|z|±hh[[:]mm])` into epoch nanoseconds
 * (a decimal string), or says why it cannot. Hand-written rather than a regular expression: it runs
 * for every reading on the ingest path.
 */
export function parseTimestampNs(text: string): string | TimestampProblem {
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
  const epochSeconds = Date.UTC(year, month - 1, day, hour, minute, second) / 1000 - offsetSign * (offsetHours * 3600 + offsetMinutes * 60);
  if (epochSeconds < MIN_EPOCH_SECONDS || epochSeconds >= MAX_EPOCH_SECONDS) return RANGE;
  const nanos = text.slice(fractionStart, fractionEnd) + ZEROS.slice(digits);
  return epochSeconds === 0 ? String(+nanos) : `${epochSeconds}${nanos}`;
}

function daysInMonth(year: number, month: number): number {
  if (month === 2) return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28;
  return month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
}
