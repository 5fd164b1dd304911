import type { SinkSnapshot } from '../../src/health/snapshot.js';

/** A sink as /status shows it, up to date with nothing failing, with `change` applied: for the health tests. */
export const sinkSnapshotOf = (change: Partial<SinkSnapshot> & Pick<SinkSnapshot, 'name' | 'destination'>): SinkSnapshot => ({
  policy: 'block',
  flushIntervalMs: 1000,
  backlog: 0,
  oldestAgeSeconds: null,
  delivered: 0,
  deliveries: 0,
  failures: 0,
  consecutiveFailures: 0,
  deadLettered: 0,
  dropped: 0,
  expired: 0,
  thinned: 0,
  sentBytes: 0,
  catchUpSeconds: null,
  last: null,
  lastError: null,
  failingSeconds: null,
  waitingSeconds: null,
  clockAheadSeconds: null,
  ...change,
});
