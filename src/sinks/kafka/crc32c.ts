/** CRC-32C's polynomial (Castagnoli), bit-reversed, as Kafka's record batches use it. */
const POLY = 0x82f63b78;

/**
 * Slicing-by-16 tables: TABLES[k * 256 + b] is the CRC of byte b followed by k zero bytes, so
 * sixteen bytes are folded in one step. Node has no CRC-32C of its own, and a byte at a time is
 * the cost that matters here: every message byte a Kafka sink sends passes through it.
 */
const TABLES = (() => {
  const t = new Int32Array(16 * 256);
  for (let b = 0; b < 256; b++) {
    let crc = b;
    for (let bit = 0; bit < 8; bit++) crc = crc & 1 ? (crc >>> 1) ^ POLY : crc >>> 1;
    t[b] = crc;
  }
  for (let b = 0; b < 256; b++)
    for (let k = 1; k < 16; k++) t[k * 256 + b] = (t[(k - 1) * 256 + b]! >>> 8) ^ t[t[(k - 1) * 256 + b]! & 0xff]!;
  return t;
})();

// Words read through an Int32Array hold their bytes in the platform's order; the folding below takes them little-endian.
const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

/** The CRC-32C of `bytes[start, end)`, unsigned. */
export function crc32c(bytes: Uint8Array, start = 0, end = bytes.length): number {
  const t = TABLES;
  let crc = -1;
  let i = start;
  if (LITTLE_ENDIAN) {
    // A byte at a time up to a 4-byte boundary, then four aligned words (16 bytes) a step: a word
    // read costs less than the four byte reads it replaces.
    while (i < end && ((bytes.byteOffset + i) & 3) !== 0) crc = t[(crc ^ bytes[i++]!) & 0xff]! ^ (crc >>> 8);
    const steps = (end - i) >> 4;
    if (steps > 0) {
      const words = new Int32Array(bytes.buffer, bytes.byteOffset + i, steps * 4);
      for (let w = 0; w < words.length; w += 4) {
        const a = crc ^ words[w]!;
        const b = words[w + 1]!;
        const c = words[w + 2]!;
        const d = words[w + 3]!;
        crc =
          t[3840 + (a & 0xff)]! ^
          t[3584 + ((a >>> 8) & 0xff)]! ^
          t[3328 + ((a >>> 16) & 0xff)]! ^
          t[3072 + (a >>> 24)]! ^
          t[2816 + (b & 0xff)]! ^
          t[2560 + ((b >>> 8) & 0xff)]! ^
          t[2304 + ((b >>> 16) & 0xff)]! ^
          t[2048 + (b >>> 24)]! ^
          t[1792 + (c & 0xff)]! ^
          t[1536 + ((c >>> 8) & 0xff)]! ^
          t[1280 + ((c >>> 16) & 0xff)]! ^
          t[1024 + (c >>> 24)]! ^
          t[768 + (d & 0xff)]! ^
          t[512 + ((d >>> 8) & 0xff)]! ^
          t[256 + ((d >>> 16) & 0xff)]! ^
          t[d >>> 24]!;
      }
      i += steps * 16;
    }
  }
  for (; i < end; i++) crc = t[(crc ^ bytes[i]!) & 0xff]! ^ (crc >>> 8);
  return (crc ^ -1) >>> 0;
}
