/** A row of the queue as a commit writes it: one request's record, or several joined. */
export interface QueueRow {
  payload: string;
  readings: number;
  /** UTF-8 bytes of the payload. */
  bytes: number;
  receivedMs: number;
  site: string | null;
}

/**
 * Records up to this size share a row with the requests committed beside them; larger ones (batches)
 * keep a row each. A row per single push was most of SQLite's work per request, on both threads.
 */
export const JOIN_MAX_BYTES = 16 * 1024;

/**
 * The rows one commit writes: consecutive records of the same site joined by a newline, which is
 * the record format's own line separator (record-codec.ts), while the row stays within
 * JOIN_MAX_BYTES. Each reading keeps its own line and time, so what the sinks send is unchanged; a
 * row carries the newest receive time of its records.
 */
export function commitRows(records: readonly QueueRow[]): QueueRow[] {
  const rows: QueueRow[] = [];
  // A record alone is its own row; a row is copied only when a second record joins it.
  let joined = false;
  for (const record of records) {
    const last = rows.at(-1);
    if (last === undefined || !joinable(last, record)) {
      rows.push(record);
      joined = false;
      continue;
    }
    const row = joined ? last : { ...last };
    row.payload += `\n${record.payload}`;
    row.readings += record.readings;
    row.bytes += 1 + record.bytes;
    if (record.receivedMs > row.receivedMs) row.receivedMs = record.receivedMs;
    rows[rows.length - 1] = row;
    joined = true;
  }
  return rows;
}

// A record without readings has no line to join; it keeps its own row, as before.
const joinable = (row: QueueRow, record: QueueRow): boolean =>
  row.site === record.site && row.readings > 0 && record.readings > 0 && row.bytes + 1 + record.bytes <= JOIN_MAX_BYTES;
