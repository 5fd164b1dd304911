import type { DeadLetterInput, QueueRecord } from '../queue/queue-reader.js';
import { formatLine, type QueuedReading, type RecordCorruptError } from '../queue/record-codec.js';

/** Longest reason kept in a dead letter or a log line. */
export const MAX_REASON_LENGTH = 1000;

/** A destination's or client's message on one line and bounded: messages may span lines. */
export function reasonText(text: string): string {
  const line = text.replace(/\s*[\r\n]+\s*/g, ' ').trim();
  return line.length > MAX_REASON_LENGTH ? `${line.slice(0, MAX_REASON_LENGTH)}…` : line;
}

/** The record's site, when it has one, for a dead letter of its readings. */
const siteOf = (record: QueueRecord): { site?: string } => (record.site === undefined ? {} : { site: record.site });

/** A record that cannot be decoded becomes one dead letter as a whole, whichever sink reads it. */
export function corruptRecordLetter(record: QueueRecord, error: RecordCorruptError): DeadLetterInput {
  return {
    receivedMs: record.receivedMs,
    reason: reasonText(`corrupt queue record: ${error.message}`),
    line: record.payload,
    ...siteOf(record),
  };
}

/** One reading of `record` its destination refused, with the reason (already made one bounded line). */
export function readingLetter(record: QueueRecord, reading: QueuedReading, reason: string): DeadLetterInput {
  return { receivedMs: record.receivedMs, reason, line: formatLine(reading), ...siteOf(record) };
}
