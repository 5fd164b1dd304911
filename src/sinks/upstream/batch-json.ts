import type { DeadLetterInput, QueueRecord } from '../../queue/queue-reader.js';
import { RecordCorruptError, decodeRecord, type QueuedReading } from '../../queue/record-codec.js';
import { formatTimestampNs } from '../../reading/format-timestamp.js';

/** One reading on its way upstream: its JSON object, its size, and the record it came from. */
export interface OutgoingReading {
  reading: QueuedReading;
  record: QueueRecord;
  json: string;
  bytes: number;
}

// JSON.stringify(-0) is "0"; keep the sign so the destination stores the double that was received.
const jsonNumber = (value: number): string => (Object.is(value, -0) ? '-0' : String(value));

/** A reading as the API's Reading object, with its stored time in full (RFC 3339, nanoseconds). */
export function readingJson(r: QueuedReading): string {
  return `{"time":"${formatTimestampNs(r.timeNs)}","ship_id":${JSON.stringify(r.shipId)},"cargo_id":${JSON.stringify(r.cargoId)},"value":${jsonNumber(r.value)}}`;
}

/**
 * The records' readings in queue order; a record that cannot be decoded becomes one dead letter
 * as a whole (`reason` names why), as the local sink does.
 */
export function outgoingReadings(
  records: readonly QueueRecord[],
  deadLetters: DeadLetterInput[],
  reason: (text: string) => string,
): OutgoingReading[] {
  const out: OutgoingReading[] = [];
  const rows: QueuedReading[] = [];
  for (const record of records) {
    rows.length = 0;
    try {
      decodeRecord(record.payload, rows);
    } catch (error) {
      if (!(error instanceof RecordCorruptError)) throw error;
      deadLetters.push({ receivedMs: record.receivedMs, reason: reason(`corrupt queue record: ${error.message}`), line: record.payload });
      continue;
    }
    for (const reading of rows) {
      const json = readingJson(reading);
      out.push({ reading, record, json, bytes: Buffer.byteLength(json) });
    }
  }
  return out;
}

/** Cuts readings into consecutive requests of at most `maxReadings` readings and `maxBytes` of body (at least one reading each). */
export function chunkReadings(readings: readonly OutgoingReading[], maxReadings: number, maxBytes: number): OutgoingReading[][] {
  const chunks: OutgoingReading[][] = [];
  let chunk: OutgoingReading[] = [];
  // "[" and "]", then a comma before every reading but the first.
  let bytes = 2;
  for (const r of readings) {
    const added = r.bytes + (chunk.length === 0 ? 0 : 1);
    if (chunk.length > 0 && (chunk.length >= maxReadings || bytes + added > maxBytes)) {
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
