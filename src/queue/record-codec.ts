import type { Reading } from '../reading/reading-schema.js';
import type { ReceiveClock } from '../reading/receive-clock.js';

/**
 * A queue record holds the readings of one request (or of small ones committed together, commit-rows.ts)
 * as text lines `time_ns \t ship_id \t cargo_id \t value`.
 * Ids cannot contain control characters (validation refuses them), so tab and newline need no escaping.
 * Missing times are resolved here, once, so a replay after a crash sends identical rows.
 */
export interface QueuedReading {
  timeNs: string;
  shipId: string;
  cargoId: string;
  value: number;
}

export class RecordCorruptError extends Error {
  override name = 'RecordCorruptError';
}

// String(-0) is "0"; keep the sign so the stored double is the one received.
const formatValue = (value: number): string => (Object.is(value, -0) ? '-0' : String(value));

/** One reading as a record line; also the form dead letters keep. */
export const formatLine = (r: QueuedReading): string => `${r.timeNs}\t${r.shipId}\t${r.cargoId}\t${formatValue(r.value)}`;

/**
 * One request's readings as a record. Readings without a time share one receive time per request,
 * as a GPS pair must, except that a series (ship_id, cargo_id) met again in the request takes the
 * next nanosecond, so deduplication keeps both; the clock never gives any time twice.
 */
export function encodeRecord(readings: readonly Reading[], clock: ReceiveClock): string {
  const offsets = receiveTimeOffsets(readings);
  const times = offsets === undefined ? undefined : clock.reserve(offsets.span);
  const first = times?.ns();
  let payload = '';
  for (let i = 0; i < readings.length; i++) {
    const r = readings[i]!;
    const offset = offsets?.of?.[i] ?? 0;
    const time = r.timeNs ?? (offset === 0 ? first : times!.ns(offset));
    payload += `${i === 0 ? '' : '\n'}${time}\t${r.shipId}\t${r.cargoId}\t${formatValue(r.value)}`;
  }
  // V8 keeps a string built piece by piece as a tree of its pieces (32 bytes a node, several a
  // line) until something reads it; reading a character makes it one flat string now. A record
  // waits for its commit, and a minor collection meanwhile copies what it holds: a batch of 1,000
  // held about 190 KB as a tree and holds 50 KB flat. The copy is the one SQLite's binding made.
  payload.charCodeAt(0);
  return payload;
}

/**
 * For the readings without a time: how many earlier readings of their series in the request had
 * none either (`of`, absent when all are 0), and how many receive times the request needs (`span`).
 * Undefined when every reading has its own time.
 */
function receiveTimeOffsets(readings: readonly Reading[]): { of: number[] | undefined; span: number } | undefined {
  let untimed = 0;
  for (let i = 0; i < readings.length; i++) if (readings[i]!.timeNs === undefined) untimed += 1;
  if (untimed === 0) return undefined;
  if (untimed === 1) return { of: undefined, span: 1 };
  // By ship, then cargo: no key string to build per reading.
  const seen = new Map<string, Map<string, number>>();
  const of: number[] = new Array(readings.length).fill(0);
  let span = 1;
  for (let i = 0; i < readings.length; i++) {
    const r = readings[i]!;
    if (r.timeNs !== undefined) continue;
    let cargos = seen.get(r.shipId);
    if (cargos === undefined) {
      cargos = new Map();
      seen.set(r.shipId, cargos);
    }
    const before = cargos.get(r.cargoId) ?? 0;
    cargos.set(r.cargoId, before + 1);
    of[i] = before;
    if (before >= span) span = before + 1;
  }
  return { of, span };
}

/** 1 to 19 ASCII digits: an epoch in nanoseconds as written by encodeRecord. */
export function isTimeNs(text: string, start: number, end: number): boolean {
  if (end <= start || end - start > 19) return false;
  for (let i = start; i < end; i++) {
    const c = text.charCodeAt(i);
    if (c < 48 || c > 57) return false;
  }
  return true;
}

/** Receives a line's fields as positions in the payload: time [time, tab1), ship_id (tab1, tab2), cargo_id (tab2, tab3), value's text (tab3, end). */
export type LineVisitor = (payload: string, time: number, tab1: number, tab2: number, tab3: number, value: number, end: number) => void;

/**
 * Visits each line of a record; throws RecordCorruptError on a malformed one. The QuestDB sink's hot
 * path, hence indexOf rather than split, and no object per line.
 */
export function scanRecord(payload: string, visit: LineVisitor): void {
  const length = payload.length;
  let start = 0;
  for (;;) {
    let end = payload.indexOf('\n', start);
    if (end === -1) end = length;
    const tab1 = payload.indexOf('\t', start);
    const tab2 = tab1 === -1 ? -1 : payload.indexOf('\t', tab1 + 1);
    const tab3 = tab2 === -1 ? -1 : payload.indexOf('\t', tab2 + 1);
    const extra = tab3 === -1 ? -1 : payload.indexOf('\t', tab3 + 1);
    const value = tab3 === -1 || tab3 >= end || tab3 + 1 === end ? NaN : Number(payload.slice(tab3 + 1, end));
    if (
      tab3 === -1 ||
      tab3 >= end ||
      (extra !== -1 && extra < end) ||
      !isTimeNs(payload, start, tab1) ||
      tab2 === tab1 + 1 ||
      tab3 === tab2 + 1 ||
      !Number.isFinite(value)
    ) {
      throw new RecordCorruptError(`queue record line is malformed: ${JSON.stringify(payload.slice(start, Math.min(end, start + 200)))}`);
    }
    visit(payload, start, tab1, tab2, tab3, value, end);
    if (end === length) return;
    start = end + 1;
  }
}

/**
 * A hash of the text between `start` and `end`: equal texts hash alike whichever string holds them,
 * so an id can be looked up where it stands in a record, without a string of its own.
 */
export function textHash(text: string, start: number, end: number): number {
  let hash = 0;
  for (let i = start; i < end; i++) hash = (Math.imul(hash, 31) + text.charCodeAt(i)) | 0;
  return hash;
}

const TAB = 9;

/**
 * Where the id `id` ends when it is written in `text` from `start` and followed by a tab (the
 * tab's position), or -1. For ingest's own bookkeeping over a record encodeRecord has just made:
 * comparing a short id with the one expected there is cheaper in a loop than a call to
 * startsWith and indexOf, and it finds the field's end as it goes.
 */
export function idEndAt(id: string | undefined, text: string, start: number): number {
  if (id === undefined) return -1;
  const length = id.length;
  for (let i = 0; i < length; i++) if (text.charCodeAt(start + i) !== id.charCodeAt(i)) return -1;
  return text.charCodeAt(start + length) === TAB ? start + length : -1;
}

/**
 * A string of its own, for what a long-lived table or cache keeps from a record. V8 makes a slice
 * of 13 or more characters a view into the whole string, so a kept slice of a record would keep
 * the record (up to a megabyte) alive as long as it is kept.
 */
export const detached = (slice: string): string => Buffer.from(slice, 'utf8').toString('utf8');

/** Reads a record back into readings. */
export function decodeRecord(payload: string, into: QueuedReading[] = []): QueuedReading[] {
  scanRecord(payload, (text, time, tab1, tab2, tab3, value) => {
    into.push({ timeNs: text.slice(time, tab1), shipId: text.slice(tab1 + 1, tab2), cargoId: text.slice(tab2 + 1, tab3), value });
  });
  return into;
}
