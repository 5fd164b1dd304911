import { scanRecord, type QueuedReading } from '../queue/record-codec.js';

// ILP protocol version 2: a column's '=' is followed by '=' and a type byte for a binary double.
const BINARY_DOUBLE = '==\u0010';
const NEEDS_ESCAPE = /[ ,=\n\r\\]/;
const ESCAPE = /[ ,=\n\r\\]/g;
const ESCAPED_CACHE_LIMIT = 4096;

/**
 * Encodes readings as ILP protocol version 2 lines, byte for byte what @questdb/nodejs-client's
 * SenderBufferV2 writes (a property test holds it to that): symbols ship_id and cargo_id, the
 * double `value` in binary form (exact, -0 and subnormals included), the designated timestamp in
 * nanoseconds. The client builds each line from many small Buffer writes and BigInt conversions;
 * this writes three pieces per line and reuses its buffer, which makes the flusher several times
 * faster on the same core.
 */
export class IlpEncoder {
  readonly #prefix: string;
  readonly #escaped = new Map<string, string>();
  #buffer: Buffer = Buffer.allocUnsafe(1 << 20);
  #position = 0;
  readonly #double = new Float64Array(1);
  // The double's bytes in the machine's order: ILP wants little-endian, as are x86 and ARM Linux.
  readonly #doubleBytes = new Uint8Array(this.#double.buffer);

  constructor(table: string) {
    if (new Uint8Array(new Float64Array([1]).buffer)[7] !== 0x3f) {
      throw new Error('ILP wants little-endian doubles; this host is big-endian');
    }
    this.#prefix = `${escapeIlp(table)},ship_id=`;
  }

  /** Encodes rows [start, end). The result is valid until the next call, which reuses its memory. */
  encode(rows: readonly QueuedReading[], start = 0, end = rows.length): Buffer {
    this.#position = 0;
    for (let i = start; i < end; i++) {
      const row = rows[i]!;
      this.#line(row.shipId, row.cargoId, row.value, row.timeNs, 0, row.timeNs.length);
    }
    return this.#buffer.subarray(0, this.#position);
  }

  /**
   * Encodes queue records straight from their text, the same bytes as decoding them and encoding
   * the readings, without an object per reading. Throws RecordCorruptError on a malformed record.
   */
  encodeRecords(payloads: readonly string[]): Buffer {
    this.#position = 0;
    for (const payload of payloads) scanRecord(payload, this.#visit);
    return this.#buffer.subarray(0, this.#position);
  }

  readonly #visit = (payload: string, time: number, tab1: number, tab2: number, tab3: number, value: number): void => {
    this.#line(payload.slice(tab1 + 1, tab2), payload.slice(tab2 + 1, tab3), value, payload, time, tab1);
  };

  /** Writes one line; its time is the digits [timeStart, timeEnd) of `timeText`. */
  #line(shipId: string, cargoId: string, value: number, timeText: string, timeStart: number, timeEnd: number): void {
    const head = `${this.#prefix}${this.#escape(shipId)},cargo_id=${this.#escape(cargoId)} value${BINARY_DOUBLE}`;
    // Worst case of UTF-8 is 3 bytes per UTF-16 unit; then the double, ' ', the time, 'n\n'.
    const needed = this.#position + 3 * head.length + 8 + (timeEnd - timeStart) + 3;
    const buffer = needed > this.#buffer.length ? this.#grow(needed) : this.#buffer;
    let position = this.#position;
    position += buffer.write(head, position, 'utf8');
    // Byte by byte: a Buffer write call costs more than the eight bytes of the double and the
    // ASCII digits of the time (measured in bench/hot-path.mjs).
    this.#double[0] = value;
    const doubleBytes = this.#doubleBytes;
    for (let b = 0; b < 8; b++) buffer[position++] = doubleBytes[b]!;
    buffer[position++] = 32;
    for (let c = timeStart; c < timeEnd; c++) buffer[position++] = timeText.charCodeAt(c);
    buffer[position++] = 110;
    buffer[position++] = 10;
    this.#position = position;
  }

  #escape(id: string): string {
    if (!NEEDS_ESCAPE.test(id)) return id;
    let escaped = this.#escaped.get(id);
    if (escaped === undefined) {
      escaped = id.replace(ESCAPE, escapeChar);
      if (this.#escaped.size >= ESCAPED_CACHE_LIMIT) this.#escaped.clear();
      this.#escaped.set(id, escaped);
    }
    return escaped;
  }

  #grow(needed: number): Buffer {
    const grown = Buffer.allocUnsafe(Math.max(needed, this.#buffer.length * 2));
    this.#buffer.copy(grown, 0, 0, this.#position);
    this.#buffer = grown;
    return grown;
  }
}

const escapeChar = (char: string): string => (char === '\\' ? '\\\\' : `\\${char}`);

/** Escapes a table name, tag value or column name as ILP writes them outside quotes. */
export function escapeIlp(name: string): string {
  return name.replace(ESCAPE, escapeChar);
}
