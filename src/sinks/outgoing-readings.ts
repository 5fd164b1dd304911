import type { DeadLetterInput, QueueRecord } from '../queue/queue-reader.js';
import { RecordCorruptError, decodeRecord, type QueuedReading } from '../queue/record-codec.js';
import { formatTimestampNs } from '../reading/format-timestamp.js';
import { corruptRecordLetter } from './dead-letter-reason.js';

/** One reading on its way to a JSON destination: its JSON object, its size, and the record it came from. */
export interface OutgoingReading {
  reading: QueuedReading;
  record: QueueRecord;
  json: string;
  bytes: number;
}

// JSON.stringify(-0) is "0"; keep the sign so the destination stores the double that was received.
const jsonNumber = (value: number): string => (Object.is(value, -0) ? '-0' : String(value));

/**
 * A reading as the API's Reading object, with its stored time in full (RFC 3339, all nine fraction
 * digits): the body of an upstream batch, exactly the API's, and with `siteJson` (the site as a
 * JSON string) the value of a Kafka message.
 */
export function readingJson(r: QueuedReading, siteJson?: string): string {
  return `{"time":"${formatTimestampNs(r.timeNs)}","ship_id":${JSON.stringify(r.shipId)},"cargo_id":${JSON.stringify(r.cargoId)},"value":${jsonNumber(r.value)}${siteJson === undefined ? '' : `,"site":${siteJson}`}}`;
}

/**
 * The records' readings in queue order; a record that cannot be decoded becomes one dead letter as
 * a whole. With `site` (this gateway's), each reading's JSON names its site: the record's, else that one.
 */
export function outgoingReadings(records: readonly QueueRecord[], deadLetters: DeadLetterInput[], site?: string): OutgoingReading[] {
  const out: OutgoingReading[] = [];
  for (const { reading, record, json } of eachReadingJson(records, deadLetters, site))
    out.push({ reading, record, json, bytes: Buffer.byteLength(json) });
  return out;
}

/**
 * The same readings one at a time, made as they are taken: a sink that sends a batch in several
 * requests holds only one request's readings at once (the dead letters are complete once all are taken).
 */
export function* eachReadingJson(
  records: readonly QueueRecord[],
  deadLetters: DeadLetterInput[],
  site?: string,
): Generator<Omit<OutgoingReading, 'bytes'>> {
  const rows: QueuedReading[] = [];
  const ownSiteJson = site === undefined ? undefined : JSON.stringify(site);
  for (const record of records) {
    const siteJson = site === undefined ? undefined : record.site === undefined ? ownSiteJson : JSON.stringify(record.site);
    rows.length = 0;
    try {
      decodeRecord(record.payload, rows);
    } catch (error) {
      if (!(error instanceof RecordCorruptError)) throw error;
      deadLetters.push(corruptRecordLetter(record, error));
      continue;
    }
    for (const reading of rows) yield { reading, record, json: readingJson(reading, siteJson) };
  }
}
