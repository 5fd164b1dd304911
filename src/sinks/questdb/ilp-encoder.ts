import { detached, scanRecord, type QueuedReading } from '../../queue/record-codec.js';
import { escapeIlp } from '../../questdb/ilp-escape.js';

// ILP protocol version 2: a column's '=' is followed by '=' and a type byte for a binary double.
const BINARY_DOUBLE = '==\u0010';
// Distinct (ship_id, cargo_id) pairs whose line heads are kept per site; a site has far fewer.
const HEAD_CACHE_LIMIT = 4096;
// Sites whose line heads are kept; a central gateway with more starts its caches afresh now and then.
const SITE_CACHE_LIMIT = 256;

/** What encodeRecords needs of a queue record: its text and its site (absent: the encoder's own). */
export interface EncodableRecord {
  payload: string;
  site?: string;
}

/**
 * Encodes readings as ILP protocol version 2 lines, byte for byte what @questdb/nodejs-client's
 * SenderBufferV2 writes (a property test holds it to that): symbols ship_id, cargo_id and site, the
 * double `value` in binary form (exact, -0 and subnormals included), the designated timestamp in
 * nanoseconds. The client builds each line from many small Buffer writes and BigInt conversions;
 * this copies a cached head per (site, ship_id, cargo_id), the double's bytes and the time's digits
 * into one reused buffer, which makes the QuestDB sink several times faster on the same core.
 */
export class IlpEncoder {
  readonly #prefix: string;
  /** The site of readings that name none: the gateway's own. */
  readonly #site: string;
  /** Per site, the heads of queue records' lines and of decoded rows, each by its own key. */
  readonly #heads = new Map<string, { records: Map<string, Uint8Array>; rows: Map<string, Uint8Array>; tag: string }>();
  #recordHeads!: Map<string, Uint8Array>;
  #siteTag!: string;
  #buffer: Buffer = Buffer.allocUnsafe(1 << 20);
  #position = 0;
  readonly #double = new Float64Array(1);
  // The double's bytes in the machine's order: ILP wants little-endian, as are x86 and ARM Linux.
  readonly #doubleBytes = new Uint8Array(this.#double.buffer);

  constructor(table: string, site: string) {
    if (new Uint8Array(new Float64Array([1]).buffer)[7] !== 0x3f) {
      throw new Error('ILP wants little-endian doubles; this host is big-endian');
    }
    this.#prefix = `${escapeIlp(table)},ship_id=`;
    this.#site = site;
  }

  /**
   * Encodes rows [start, end), row i of site `sites[i]` (absent: the encoder's own). The result is
   * valid until the next call, which reuses its memory.
   */
  encode(rows: readonly QueuedReading[], start = 0, end = rows.length, sites: readonly (string | undefined)[] = []): Buffer {
    this.#position = 0;
    for (let i = start; i < end; i++) {
      const row = rows[i]!;
      const heads = this.#siteHeads(sites[i] ?? this.#site);
      // Length-prefixed: no two pairs make one key, whatever characters the ids hold.
      const head = this.#head(heads.rows, `${row.shipId.length}:${row.shipId}${row.cargoId}`, row.shipId, row.cargoId);
      this.#line(head, row.value, row.timeNs, 0, row.timeNs.length);
    }
    return this.#buffer.subarray(0, this.#position);
  }

  /**
   * Encodes queue records straight from their text, the same bytes as decoding them and encoding
   * the readings, without an object per reading. Throws RecordCorruptError on a malformed record.
   */
  encodeRecords(records: readonly EncodableRecord[]): Buffer {
    this.#position = 0;
    for (const record of records) {
      const heads = this.#siteHeads(record.site ?? this.#site);
      this.#recordHeads = heads.records;
      scanRecord(record.payload, this.#visit);
    }
    return this.#buffer.subarray(0, this.#position);
  }

  #siteHeads(site: string): { records: Map<string, Uint8Array>; rows: Map<string, Uint8Array>; tag: string } {
    let heads = this.#heads.get(site);
    if (heads === undefined) {
      if (this.#heads.size >= SITE_CACHE_LIMIT) this.#heads.clear();
      heads = { records: new Map(), rows: new Map(), tag: `,site=${escapeIlp(site)}` };
      this.#heads.set(site, heads);
    }
    this.#siteTag = heads.tag;
    return heads;
  }

  readonly #visit = (payload: string, time: number, tab1: number, tab2: number, tab3: number, value: number): void => {
    // A record's "ship_id<TAB>cargo_id" is a key as it is: its ids hold no control characters.
    const key = payload.slice(tab1 + 1, tab3);
    const head =
      this.#recordHeads.get(key) ?? this.#head(this.#recordHeads, key, payload.slice(tab1 + 1, tab2), payload.slice(tab2 + 1, tab3));
    this.#line(head, value, payload, time, tab1);
  };

  /** The bytes of a line up to its double, "table,ship_id=…,cargo_id=…,site=… value==\x10", cached per pair of the current site. */
  #head(cache: Map<string, Uint8Array>, key: string, shipId: string, cargoId: string): Uint8Array {
    let head = cache.get(key);
    if (head === undefined) {
      head = Buffer.from(
        `${this.#prefix}${escapeIlp(shipId)},cargo_id=${escapeIlp(cargoId)}${this.#siteTag} value${BINARY_DOUBLE}`,
        'utf8',
      );
      if (cache.size >= HEAD_CACHE_LIMIT) cache.clear();
      cache.set(detached(key), head);
    }
    return head;
  }

  /** Writes one line; its time is the digits [timeStart, timeEnd) of `timeText`. */
  #line(head: Uint8Array, value: number, timeText: string, timeStart: number, timeEnd: number): void {
    // The head, the double, ' ', the time, 'n\n'.
    const needed = this.#position + head.length + 8 + (timeEnd - timeStart) + 3;
    const buffer = needed > this.#buffer.length ? this.#grow(needed) : this.#buffer;
    let position = this.#position;
    buffer.set(head, position);
    position += head.length;
    // Byte by byte: for eight bytes and a few ASCII digits a loop costs less than a Buffer call
    // (measured in bench/hot-path.mjs).
    this.#double[0] = value;
    const doubleBytes = this.#doubleBytes;
    for (let b = 0; b < 8; b++) buffer[position++] = doubleBytes[b]!;
    buffer[position++] = 32;
    for (let c = timeStart; c < timeEnd; c++) buffer[position++] = timeText.charCodeAt(c);
    buffer[position++] = 110;
    buffer[position++] = 10;
    this.#position = position;
  }

  #grow(needed: number): Buffer {
    const grown = Buffer.allocUnsafe(Math.max(needed, this.#buffer.length * 2));
    this.#buffer.copy(grown, 0, 0, this.#position);
    this.#buffer = grown;
    return grown;
  }
}
