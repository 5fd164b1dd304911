/** CRC-32C's polynomial (Castagnoli), bit-reversed, as Kafka's record batches use it. */
const POLY = 0x82f63b78;

/**
 * Slicing-by-8 tables: TABLES[k * 256 + b] is the CRC of byte b followed by k zero bytes, so eight
 * bytes are folded in one step. Node has no CRC-32C of its own, and a byte at a time is the cost
 * that matters here: every message byte a Kafka sink sends passes through it.
 */
const TABLES = (() => {
  const t = new Int32Array(8 * 256);
  for (let b = 0; b < 256; b++) {
    let crc = b;
    for (let bit = 0; bit < 8; bit++) crc = crc & 1 ? (crc >>> 1) ^ POLY : crc >>> 1;
    t[b] = crc;
  }
  for (let b = 0; b < 256; b++)
    for (let k = 1; k < 8; k++) t[k * 256 + b] = (t[(k - 1) * 256 + b]! >>> 8) ^ t[t[(k - 1) * 256 + b]! & 0xff]!;
  return t;
})();

/** The CRC-32C of `bytes[start, end)`, unsigned. */
export function crc32c(bytes: Uint8Array, start = 0, end = bytes.length): number {
  const t = TABLES;
  let crc = -1;
  let i = start;
  for (; i + 8 <= end; i += 8) {
    const lo = crc ^ (bytes[i]! | (bytes[i + 1]! << 8) | (bytes[i + 2]! << 16) | (bytes[i + 3]! << 24));
    crc =
      t[1792 + (lo & 0xff)]! ^
      t[1536 + ((lo >>> 8) & 0xff)]! ^
      t[1280 + ((lo >>> 16) & 0xff)]! ^
      t[1024 + (lo >>> 24)]! ^
      t[768 + bytes[i + 4]!]! ^
      t[512 + bytes[i + 5]!]! ^
      t[256 + bytes[i + 6]!]! ^
      t[bytes[i + 7]!]!;
  }
  for (; i < end; i++) crc = t[(crc ^ bytes[i]!) & 0xff]! ^ (crc >>> 8);
  return (crc ^ -1) >>> 0;
}
