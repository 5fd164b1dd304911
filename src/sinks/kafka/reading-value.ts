import { formatTimestampNs } from '../../reading/format-timestamp.js';
import { jsonValueText, type TakenReading } from '../outgoing-readings.js';
import { BytesCache } from './bytes-cache.js';
import type { MessageValue } from './produce-request.js';

const OPEN = Buffer.from('{"time":"');
const SHIP = Buffer.from('","ship_id":');
const CARGO = Buffer.from(',"cargo_id":');
const VALUE = Buffer.from(',"value":');
const SITE = Buffer.from(',"site":');
const CLOSE = 0x7d; // }
const FIXED_BYTES = OPEN.length + SHIP.length + CARGO.length + VALUE.length + 1;

/** ASCII text (a formatted time, a JSON number) byte by byte: for a few characters a loop costs less than a Buffer call. */
function writeAscii(out: Buffer, at: number, text: string): number {
  for (let i = 0; i < text.length; i++) out[at++] = text.charCodeAt(i);
  return at;
}

/**
 * A reading's Kafka message value, `readingJson(reading, siteJson, valueText)` byte for byte,
 * written straight into the request from its parts: the ids' and site's JSON are made once per
 * distinct text, and no JSON string is made per reading (they were most of the sink's garbage).
 */
export class ReadingValue implements MessageValue {
  readonly bytes: number;

  constructor(
    private readonly time: string,
    private readonly ship: Buffer,
    private readonly cargo: Buffer,
    private readonly number: string,
    private readonly site: Buffer | undefined,
  ) {
    this.bytes =
      FIXED_BYTES + time.length + ship.length + cargo.length + number.length + (site === undefined ? 0 : SITE.length + site.length);
  }

  writeTo(out: Buffer, at: number): number {
    out.set(OPEN, at);
    at = writeAscii(out, at + OPEN.length, this.time);
    out.set(SHIP, at);
    at += SHIP.length;
    out.set(this.ship, at);
    at += this.ship.length;
    out.set(CARGO, at);
    at += CARGO.length;
    out.set(this.cargo, at);
    at += this.cargo.length;
    out.set(VALUE, at);
    at = writeAscii(out, at + VALUE.length, this.number);
    if (this.site !== undefined) {
      out.set(SITE, at);
      at += SITE.length;
      out.set(this.site, at);
      at += this.site.length;
    }
    out[at++] = CLOSE;
    return at;
  }
}

/** Makes readings' message values, keeping each id's and site's JSON bytes. */
export class ReadingValues {
  readonly #ids = new BytesCache((id) => Buffer.from(JSON.stringify(id)));
  readonly #sites = new BytesCache((siteJson) => Buffer.from(siteJson));

  of({ reading, valueText, siteJson }: TakenReading): ReadingValue {
    return new ReadingValue(
      formatTimestampNs(reading.timeNs),
      this.#ids.of(reading.shipId),
      this.#ids.of(reading.cargoId),
      jsonValueText(reading, valueText),
      siteJson === undefined ? undefined : this.#sites.of(siteJson),
    );
  }
}
