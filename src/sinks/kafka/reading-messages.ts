import type { DeadLetterInput, QueueRecord } from '../../queue/queue-reader.js';
import { isTimeNs, RecordCorruptError, scanRecord, type QueuedReading } from '../../queue/record-codec.js';
import { corruptRecordLetter } from '../dead-letter-reason.js';
import { jsonValueText, originsJson } from '../outgoing-readings.js';
import { BytesCache } from './bytes-cache.js';
import { murmur2, murmur2Ascii } from './murmur2.js';
import type { MessageList } from './produce-request.js';

const OPEN = Buffer.from('{"time":"');
const SHIP = Buffer.from('","ship_id":');
const CARGO = Buffer.from(',"cargo_id":');
const VALUE = Buffer.from(',"value":');
const SITE = Buffer.from(',"site":');
const QUOTE = 0x22;
const DOT = 0x2e;
const ZERO = 0x30;
const Z = 0x5a;
const CLOSE = 0x7d; // }
// RFC 3339 with nine fraction digits: `YYYY-MM-DDTHH:MM:SS` (19), the dot, the digits and `Z`.
const TIME_BYTES = 19 + 1 + 9 + 1;
const FIXED_BYTES = OPEN.length + TIME_BYTES + SHIP.length + CARGO.length + VALUE.length + 1;

// Flags of a reading whose part is plain ASCII in the record, written from it as it stands.
const SHIP_PLAIN = 1;
const CARGO_PLAIN = 2;
const VALUE_PLAIN = 4;

/** Printable ASCII without `"` or `\`: its JSON string is itself in quotes, its UTF-8 bytes its characters. */
function isPlain(text: string, start: number, end: number): boolean {
  for (let i = start; i < end; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x20 || c > 0x7e || c === QUOTE || c === 0x5c) return false;
  }
  return true;
}

const isDigit = (c: number): boolean => c >= 0x30 && c <= 0x39;

// Longest value text taken as it stands: a decimal of fewer digits, without exponent, is finite.
const MAX_PLAIN_NUMBER = 300;

/**
 * JSON's number grammar without exponent on `text[start, end)`, at most MAX_PLAIN_NUMBER
 * characters: the queue's text of a value (String of the double received) mostly is one, finite
 * and sent as it stands. Any other text is parsed and formatted as `jsonValueText` does.
 */
function isPlainNumber(text: string, start: number, end: number): boolean {
  if (end - start > MAX_PLAIN_NUMBER) return false;
  let i = start;
  if (text.charCodeAt(i) === 0x2d) i++;
  if (i >= end || !isDigit(text.charCodeAt(i))) return false;
  if (text.charCodeAt(i) === ZERO) i++;
  else while (i < end && isDigit(text.charCodeAt(i))) i++;
  if (i < end && text.charCodeAt(i) === DOT) {
    i++;
    if (i >= end || !isDigit(text.charCodeAt(i))) return false;
    while (i < end && isDigit(text.charCodeAt(i))) i++;
  }
  return i === end;
}

/** The queue codec's own account of what is wrong with a record found malformed here. */
function corruption(payload: string): RecordCorruptError {
  try {
    scanRecord(payload, () => undefined);
  } catch (error) {
    if (error instanceof RecordCorruptError) return error;
    throw error;
  }
  return new RecordCorruptError('queue record is malformed');
}

/** What a reading that is not plain ASCII writes instead of its record's characters: bytes made once per distinct text. */
interface OddParts {
  key: Buffer | undefined;
  ship: Buffer | undefined;
  cargo: Buffer | undefined;
  value: string | undefined;
}

/**
 * The Kafka messages of a batch's readings, written straight from the queue records' text: each
 * reading is where its fields lie in its record (typed arrays, kept from batch to batch), so no
 * object or string is made per reading, and what a batch leaves behind is its records alone. A
 * message's key is the ship_id's bytes; its value is `readingJson(reading, siteJson, valueText)`
 * byte for byte: ids and values that are plain ASCII are copied from the record, others (quotes,
 * backslashes, other scripts, values not in JSON's number form) written as readingJson writes them.
 */
export class ReadingMessages implements MessageList {
  #length = 0;
  #record = new Int32Array(0);
  #time = new Int32Array(0);
  #tab1 = new Int32Array(0);
  #tab2 = new Int32Array(0);
  #tab3 = new Int32Array(0);
  #end = new Int32Array(0);
  #bytes = new Int32Array(0);
  #hash = new Uint32Array(0);
  #flags = new Uint8Array(0);
  #records: readonly QueueRecord[] = [];
  #sites: (Buffer | undefined)[] = [];
  readonly #odd = new Map<number, OddParts>();
  readonly #keys = new BytesCache((shipId) => Buffer.from(shipId));
  readonly #ids = new BytesCache((id) => Buffer.from(JSON.stringify(id)));
  readonly #siteBytes = new BytesCache((siteJson) => Buffer.from(siteJson));
  // The date and time of the last second written, as in formatTimestampNs.
  #lastSeconds = '';
  readonly #prefix = Buffer.alloc(19);

  /** How many readings the batch holds. */
  get length(): number {
    return this.#length;
  }

  /**
   * Takes a batch's records in queue order; a record that cannot be decoded becomes one dead letter
   * as a whole. With `site` (this gateway's), each value names its site: the record's, else that
   * one, and with `instance` this gateway's instance for its own readings (`originJson`). Holds the
   * records until `release`.
   */
  load(records: readonly QueueRecord[], deadLetters: DeadLetterInput[], site?: string, instance?: string): void {
    this.release();
    this.#records = records;
    // Room for the readings the records say they hold, so a batch's arrays are no larger than it.
    let readings = 0;
    for (const record of records) readings += record.readings;
    if (readings > this.#record.length) this.#grow(readings);
    const origin = site === undefined ? undefined : originsJson(site, instance);
    for (let r = 0; r < records.length; r++) {
      const record = records[r]!;
      const siteJson = origin?.(record);
      const siteBuffer = siteJson === undefined ? undefined : this.#siteBytes.of(siteJson);
      this.#sites.push(siteBuffer);
      const first = this.#length;
      if (!this.#takeRecord(record.payload, r, siteBuffer === undefined ? 0 : SITE.length + siteBuffer.length)) {
        // None of a corrupt record's readings is sent: the record is one dead letter.
        for (let i = first; i < this.#length; i++) this.#odd.delete(i);
        this.#length = first;
        deadLetters.push(corruptRecordLetter(record, corruption(record.payload)));
      }
    }
  }

  /**
   * Indexes record `r`'s lines `time_ns \t ship_id \t cargo_id \t value`; false at the first
   * malformed one, as the queue codec's scanRecord decides, without a string or number per line.
   */
  #takeRecord(text: string, r: number, siteBytes: number): boolean {
    const length = text.length;
    let start = 0;
    for (;;) {
      let end = text.indexOf('\n', start);
      if (end === -1) end = length;
      const tab1 = text.indexOf('\t', start);
      const tab2 = tab1 === -1 ? -1 : text.indexOf('\t', tab1 + 1);
      const tab3 = tab2 === -1 ? -1 : text.indexOf('\t', tab2 + 1);
      if (tab3 === -1 || tab3 >= end || tab3 + 1 === end || tab2 === tab1 + 1 || tab3 === tab2 + 1 || !isTimeNs(text, start, tab1))
        return false;
      const extra = text.indexOf('\t', tab3 + 1);
      if ((extra !== -1 && extra < end) || !this.#takeLine(text, r, start, tab1, tab2, tab3, end, siteBytes)) return false;
      if (end === length) return true;
      start = end + 1;
    }
  }

  /** One well-formed line but for its value, which is checked here: false when it is no finite number. */
  #takeLine(text: string, r: number, time: number, tab1: number, tab2: number, tab3: number, end: number, siteBytes: number): boolean {
    const n = this.#length;
    let flags = 0;
    let keyBytes: number;
    let idsBytes: number;
    let valueBytes: number;
    let odd: OddParts | undefined;
    if (isPlainNumber(text, tab3 + 1, end)) {
      flags |= VALUE_PLAIN;
      valueBytes = end - tab3 - 1;
    } else {
      const valueText = text.slice(tab3 + 1, end);
      const value = Number(valueText);
      if (!Number.isFinite(value)) return false;
      odd = {
        key: undefined,
        ship: undefined,
        cargo: undefined,
        value: jsonValueText({ timeNs: '', shipId: '', cargoId: '', value }, valueText),
      };
      valueBytes = odd.value!.length;
    }
    if (n === this.#record.length) this.#grow(n * 2);
    if (isPlain(text, tab1 + 1, tab2)) {
      flags |= SHIP_PLAIN;
      keyBytes = tab2 - tab1 - 1;
      idsBytes = keyBytes + 2;
      this.#hash[n] = murmur2Ascii(text, tab1 + 1, tab2);
    } else {
      const shipId = text.slice(tab1 + 1, tab2);
      odd ??= { key: undefined, ship: undefined, cargo: undefined, value: undefined };
      odd.key = this.#keys.of(shipId);
      odd.ship = this.#ids.of(shipId);
      keyBytes = odd.key.length;
      idsBytes = odd.ship.length;
      this.#hash[n] = murmur2(odd.key);
    }
    if (isPlain(text, tab2 + 1, tab3)) {
      flags |= CARGO_PLAIN;
      idsBytes += tab3 - tab2 + 1;
    } else {
      odd ??= { key: undefined, ship: undefined, cargo: undefined, value: undefined };
      odd.cargo = this.#ids.of(text.slice(tab2 + 1, tab3));
      idsBytes += odd.cargo.length;
    }
    if (odd !== undefined) this.#odd.set(n, odd);
    this.#record[n] = r;
    this.#time[n] = time;
    this.#tab1[n] = tab1;
    this.#tab2[n] = tab2;
    this.#tab3[n] = tab3;
    this.#end[n] = end;
    this.#flags[n] = flags;
    this.#bytes[n] = keyBytes + FIXED_BYTES + idsBytes + valueBytes + siteBytes;
    this.#length = n + 1;
    return true;
  }

  /** Lets go of the batch's records. */
  release(): void {
    this.#length = 0;
    this.#records = [];
    this.#sites = [];
    this.#odd.clear();
  }

  /** Reading `i`'s message bytes, key and value. */
  bytes(i: number): number {
    return this.#bytes[i]!;
  }

  /** Reading `i`'s partition hash (murmur2 of its key, unsigned). */
  hash(i: number): number {
    return this.#hash[i]!;
  }

  /** The record reading `i` came from. */
  record(i: number): QueueRecord {
    return this.#records[this.#record[i]!]!;
  }

  /** Reading `i` as an object, for a dead letter. */
  reading(i: number): QueuedReading {
    const text = this.#records[this.#record[i]!]!.payload;
    const tab1 = this.#tab1[i]!;
    const tab2 = this.#tab2[i]!;
    const tab3 = this.#tab3[i]!;
    return {
      timeNs: text.slice(this.#time[i], tab1),
      shipId: text.slice(tab1 + 1, tab2),
      cargoId: text.slice(tab2 + 1, tab3),
      value: Number(text.slice(tab3 + 1, this.#end[i])),
    };
  }

  keyBytes(i: number): number {
    return this.#flags[i]! & SHIP_PLAIN ? this.#tab2[i]! - this.#tab1[i]! - 1 : this.#odd.get(i)!.key!.length;
  }

  valueBytes(i: number): number {
    return this.#bytes[i]! - this.keyBytes(i);
  }

  writeKey(i: number, out: Buffer, at: number): number {
    if (!(this.#flags[i]! & SHIP_PLAIN)) {
      const key = this.#odd.get(i)!.key!;
      out.set(key, at);
      return at + key.length;
    }
    return writeChars(out, at, this.#records[this.#record[i]!]!.payload, this.#tab1[i]! + 1, this.#tab2[i]!);
  }

  writeValue(i: number, out: Buffer, at: number): number {
    const r = this.#record[i]!;
    const text = this.#records[r]!.payload;
    const flags = this.#flags[i]!;
    const odd = flags === (SHIP_PLAIN | CARGO_PLAIN | VALUE_PLAIN) ? undefined : this.#odd.get(i);
    const tab1 = this.#tab1[i]!;
    const tab2 = this.#tab2[i]!;
    const tab3 = this.#tab3[i]!;
    out.set(OPEN, at);
    at = this.#writeTime(out, at + OPEN.length, text, this.#time[i]!, tab1);
    out.set(SHIP, at);
    at += SHIP.length;
    at = flags & SHIP_PLAIN ? writeQuoted(out, at, text, tab1 + 1, tab2) : writeBytes(out, at, odd!.ship!);
    out.set(CARGO, at);
    at += CARGO.length;
    at = flags & CARGO_PLAIN ? writeQuoted(out, at, text, tab2 + 1, tab3) : writeBytes(out, at, odd!.cargo!);
    out.set(VALUE, at);
    at += VALUE.length;
    if (flags & VALUE_PLAIN) at = writeChars(out, at, text, tab3 + 1, this.#end[i]!);
    else at += out.write(odd!.value!, at, 'latin1');
    const site = this.#sites[r];
    if (site !== undefined) {
      out.set(SITE, at);
      at = writeBytes(out, at + SITE.length, site);
    }
    out[at++] = CLOSE;
    return at;
  }

  /** Epoch nanoseconds `text[start, end)` as formatTimestampNs formats them, the last second's date and time kept. */
  #writeTime(out: Buffer, at: number, text: string, start: number, end: number): number {
    const fraction = end - 9;
    const secondsFrom = start < fraction ? start : -1;
    const last = this.#lastSeconds;
    let same = secondsFrom === -1 ? last === '0' : fraction - secondsFrom === last.length;
    for (let i = 0; same && secondsFrom !== -1 && i < last.length; i++) same = text.charCodeAt(secondsFrom + i) === last.charCodeAt(i);
    if (!same) {
      this.#lastSeconds = secondsFrom === -1 ? '0' : text.slice(secondsFrom, fraction);
      this.#prefix.write(new Date(Number(this.#lastSeconds) * 1000).toISOString().slice(0, 19), 0, 'latin1');
    }
    out.set(this.#prefix, at);
    at += 19;
    out[at++] = DOT;
    for (let i = fraction; i < end; i++) out[at++] = i < start ? ZERO : text.charCodeAt(i);
    out[at++] = Z;
    return at;
  }

  /** Room for at least `readings` (and 1,024). */
  #grow(readings: number): void {
    const size = Math.max(1024, readings);
    const grown = <T extends Int32Array | Uint32Array | Uint8Array>(old: T, make: (n: number) => T): T => {
      const next = make(size);
      next.set(old);
      return next;
    };
    this.#record = grown(this.#record, (n) => new Int32Array(n));
    this.#time = grown(this.#time, (n) => new Int32Array(n));
    this.#tab1 = grown(this.#tab1, (n) => new Int32Array(n));
    this.#tab2 = grown(this.#tab2, (n) => new Int32Array(n));
    this.#tab3 = grown(this.#tab3, (n) => new Int32Array(n));
    this.#end = grown(this.#end, (n) => new Int32Array(n));
    this.#bytes = grown(this.#bytes, (n) => new Int32Array(n));
    this.#hash = grown(this.#hash, (n) => new Uint32Array(n));
    this.#flags = grown(this.#flags, (n) => new Uint8Array(n));
  }
}

/** ASCII characters byte by byte: for a few of them a loop costs less than a Buffer call. */
function writeChars(out: Buffer, at: number, text: string, start: number, end: number): number {
  for (let i = start; i < end; i++) out[at++] = text.charCodeAt(i);
  return at;
}

function writeQuoted(out: Buffer, at: number, text: string, start: number, end: number): number {
  out[at++] = QUOTE;
  at = writeChars(out, at, text, start, end);
  out[at++] = QUOTE;
  return at;
}

function writeBytes(out: Buffer, at: number, bytes: Buffer): number {
  out.set(bytes, at);
  return at + bytes.length;
}
