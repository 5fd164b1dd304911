// A gateway's /status snapshot as the health reporter takes it, with the parts the tests vary.
import type { GatewaySnapshot, SinkSnapshot } from '../../src/health/snapshot.js';

const MB = 1024 * 1024;

export interface SnapshotParts {
  /** Flushes failed in a row, and when the last of them failed (epoch ms or ISO text), with what. */
  failures?: number;
  lastErrorAt?: number | string;
  lastError?: string;
  queued?: number;
  queueBytes?: number;
  /** Age of the oldest queued reading; by default 700 s while readings are queued. */
  oldestAgeSeconds?: number | null;
  heldBy?: string | null;
  deadLetters?: number;
  ready?: boolean;
  clockSynchronized?: boolean | null;
  sinks?: SinkSnapshot[];
}

export function healthSnapshot({
  failures = 0,
  lastErrorAt,
  lastError = 'connect ECONNREFUSED',
  queued = 0,
  queueBytes = 0,
  oldestAgeSeconds = queued > 0 ? 700 : null,
  heldBy = null,
  deadLetters = 0,
  ready = true,
  clockSynchronized = true,
  sinks = [],
}: SnapshotParts = {}): GatewaySnapshot {
  return {
    version: '0.5.0',
    uptimeSeconds: 900,
    durability: 'full',
    ready,
    clockSynchronized,
    queue: { records: 40, readings: queued, bytes: queueBytes, maxBytes: 100 * MB, commits: 40, oldestAgeSeconds, heldBy },
    deadLetters,
    flush: {
      last: null,
      lastError: lastErrorAt === undefined ? null : { at: new Date(lastErrorAt).toISOString(), message: lastError },
      consecutiveFailures: failures,
    },
    sinks,
    totals: {
      acceptedRequests: 40,
      acceptedReadings: 4000,
      refusedRequests: 0,
      flushes: 3,
      flushFailures: failures,
      flushedReadings: 100,
      deadLettered: 0,
    },
    tls: null,
    keys: [],
    auth: { wrongKeyRequests: 0, addressesTracked: 0 },
    memory: { rssBytes: 0, heapUsedBytes: 0, heapTotalBytes: 0, deliveryHeapUsedBytes: null, deliveryHeapTotalBytes: null },
  };
}
