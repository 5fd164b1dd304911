import type { QueueRecord } from '../../queue/queue-reader.js';

/** True when the decimal digits `text[start, end)` are a smaller number than `threshold` (no leading zeros either). */
function isBefore(text: string, start: number, end: number, threshold: string): boolean {
  const length = end - start;
  if (length !== threshold.length) return length < threshold.length;
  for (let i = 0; i < length; i++) {
    const a = text.charCodeAt(start + i);
    const b = threshold.charCodeAt(i);
    if (a !== b) return a < b;
  }
  return false;
}

/**
 * The records without their readings older than `thresholdNs` (epoch nanoseconds as the queue
 * writes them: a record's lines start with the time, then a tab), and how many those were. Records
 * left with no reading are left out; a record with nothing old is passed on as it is. A line that
 * does not start that way is kept, for the decoder to set aside as corrupt.
 */
export function withoutExpired(records: readonly QueueRecord[], thresholdNs: string): { records: QueueRecord[]; expired: number } {
  let expired = 0;
  const kept: QueueRecord[] = [];
  for (const record of records) {
    const payload = record.payload;
    let lines: string[] | undefined;
    let start = 0;
    while (start <= payload.length) {
      const newline = payload.indexOf('\n', start);
      const end = newline === -1 ? payload.length : newline;
      const tab = payload.indexOf('\t', start);
      const old = tab > start && tab < end && isBefore(payload, start, tab, thresholdNs);
      if (old) {
        // The lines before the first old one are kept as they are.
        lines ??= start === 0 ? [] : payload.slice(0, start - 1).split('\n');
        expired += 1;
      } else {
        lines?.push(payload.slice(start, end));
      }
      if (newline === -1) break;
      start = newline + 1;
    }
    if (lines === undefined) kept.push(record);
    else if (lines.length > 0) kept.push({ ...record, payload: lines.join('\n'), readings: lines.length });
  }
  return { records: kept, expired };
}
