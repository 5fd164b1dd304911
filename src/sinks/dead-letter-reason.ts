import type { DeadLetterInput, QueueRecord } from '../queue/queue-reader.js';
import { formatLine, type QueuedReading, type RecordCorruptError } from '../queue/record-codec.js';

/** Longest reason kept in a dead letter or a log line. */
export const MAX_REASON_LENGTH = 1000;

/** A destination's or client's message on one line and bounded: messages may span lines. */
export function reasonText(text: string): string {
  const line = text.replace(/\s*[\r\n]+\s*/g, ' ').trim();
  return line.length > MAX_REASON_LENGTH ? `${line.slice(0, MAX_REASON_LENGTH)}…` : line;
}

/** QuestDB's words before the cause of a refused line: they name the protocol and a line of a request the reader never saw. */
const QUESTDB_PREAMBLE = /^failed to parse line protocol:\s*errors encountered on line\(s\):\s*(error in line \d+:\s*)?/i;

/** A reading QuestDB refused, in the words a technician reads: "QuestDB refused the reading: Could not parse timestamp: …". */
export const questDbRowReason = (message: string): string =>
  reasonText(`QuestDB refused the reading: ${reasonText(message).replace(QUESTDB_PREAMBLE, '')}`);

/**
 * The record's site for a dead letter of its readings (another site's name, or the id of this
 * gateway's name it was answered under), and whether the record is a dead letter of this sink
 * re-queued for it (a record for one sink is read by that sink alone).
 */
const originOf = (record: QueueRecord): { site?: string; ownSite?: number; again?: true } => {
  const from: { site?: string; ownSite?: number; again?: true } =
    record.ownSite !== undefined ? { ownSite: record.ownSite } : record.site === undefined ? {} : { site: record.site };
  if (record.sink !== undefined) from.again = true;
  return from;
};

/** A record that cannot be decoded becomes one dead letter as a whole, whichever sink reads it. */
export function corruptRecordLetter(record: QueueRecord, error: RecordCorruptError): DeadLetterInput {
  return {
    receivedMs: record.receivedMs,
    reason: reasonText(`corrupt queue record: ${error.message}`),
    line: record.payload,
    ...originOf(record),
  };
}

/** One reading of `record` its destination refused, with the reason (already made one bounded line). */
export function readingLetter(record: QueueRecord, reading: QueuedReading, reason: string): DeadLetterInput {
  return { receivedMs: record.receivedMs, reason, line: formatLine(reading), ...originOf(record) };
}

/** A whole record its destination refused (the site of its readings given to another gateway), with the reason. */
export function recordLetter(record: QueueRecord, reason: string): DeadLetterInput {
  return { receivedMs: record.receivedMs, reason: reasonText(reason), line: record.payload, ...originOf(record) };
}
