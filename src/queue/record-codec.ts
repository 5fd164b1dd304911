import type { Reading } from '../reading/reading-schema.js';
import type { ReceiveClock } from '../reading/timestamp.js';

/**
 * A queue record holds the readings of one request as text lines `time_ns \t ship_id \t cargo_id \t value`.
 * Ids cannot contain control characters (validation refuses them), so tab and newline need no escaping.
 * Missing times are resolved here, once, so a replay after a crash sends identical rows.
 */
export interface QueuedReading {
  timeNs: string;
  shipId: string;
  cargoId: string;
  value: number;
}

export class RecordCorruptError extends Error {
  override name = 'RecordCorruptError';
}

// String(-0) is "0"; keep the sign so the stored double is the one received.
const formatValue = (value: number): string => (Object.is(value, -0) ? '-0' : String(value));

/** One reading as a record line; also the form dead letters keep. */
export const formatLine = (r: QueuedReading): string => `${r.timeNs}\t${r.shipId}\t${r.cargoId}\t${formatValue(r.value)}`;

export function encodeRecord(readings: readonly Reading[], clock: ReceiveClock): string {
  let payload = '';
  for (let i = 0; i < readings.length; i++) {
    const r = readings[i]!;
    payload += `${i === 0 ? '' : '\n'}${r.timeNs ?? clock.nextNs()}\t${r.shipId}\t${r.cargoId}\t${formatValue(r.value)}`;
  }
  return payload;
}

const TIME_NS = /^\d{1,19}$/;

export function decodeRecord(payload: string, into: QueuedReading[] = []): QueuedReading[] {
  for (const line of payload.split('\n')) {
    const fields = line.split('\t');
    const value = Number(fields[3]);
    if (fields.length !== 4 || !TIME_NS.test(fields[0]!) || !fields[1] || !fields[2] || fields[3] === '' || !Number.isFinite(value)) {
      throw new RecordCorruptError(`queue record line is malformed: ${JSON.stringify(line.slice(0, 200))}`);
    }
    into.push({ timeNs: fields[0]!, shipId: fields[1], cargoId: fields[2], value });
  }
  return into;
}
