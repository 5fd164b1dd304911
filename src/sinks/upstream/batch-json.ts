import type { OutgoingReading } from '../outgoing-readings.js';

/**
 * Cuts readings into consecutive requests of at most `maxReadings` readings and `maxBytes` of body
 * (at least one reading each), each of one origin (`originOf`, by default the record's site): a
 * request names its site, and for this gateway's own readings its instance, in headers.
 */
export function chunkReadings(
  readings: readonly OutgoingReading[],
  maxReadings: number,
  maxBytes: number,
  originOf: (r: OutgoingReading) => string | undefined = (r) => r.record.site,
): OutgoingReading[][] {
  const chunks: OutgoingReading[][] = [];
  let chunk: OutgoingReading[] = [];
  // "[" and "]", then a comma before every reading but the first.
  let bytes = 2;
  for (const r of readings) {
    const added = r.bytes + (chunk.length === 0 ? 0 : 1);
    if (chunk.length > 0 && (chunk.length >= maxReadings || bytes + added > maxBytes || originOf(chunk[0]!) !== originOf(r))) {
      chunks.push(chunk);
      chunk = [];
      bytes = 2;
      bytes += r.bytes;
    } else {
      bytes += added;
    }
    chunk.push(r);
  }
  if (chunk.length > 0) chunks.push(chunk);
  return chunks;
}

/** The request body of a chunk: a JSON array of Reading objects. */
export const batchBody = (chunk: readonly OutgoingReading[]): string => `[${chunk.map((r) => r.json).join(',')}]`;
