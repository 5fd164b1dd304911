import type { QueueRecord } from '../../src/queue/queue-reader.js';

/** A record of the queue's first segment holding `payload`: record lines `time_ns⇥ship_id⇥cargo_id⇥value`. */
export const queueRecord = (id: number, payload: string, receivedMs = 1_000 + id): QueueRecord => ({
  segment: 1,
  id,
  receivedMs,
  readings: payload.split('\n').length,
  bytes: payload.length,
  payload,
});
