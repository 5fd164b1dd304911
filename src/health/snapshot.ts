import type { FlushReport, GatewayStats } from '../stats.js';
import type { QueueWriter } from '../queue/queue-writer.js';
import { clockSynchronized } from './clock.js';

/** What the gateway knows about itself: the body of `/status` and the source of health reports. */
export interface GatewaySnapshot {
  version: string;
  uptimeSeconds: number;
  durability: string;
  ready: boolean;
  /** Synchronised since boot (systemd-timesyncd); null where unknown. Readings without a time get this clock's time. */
  clockSynchronized: boolean | null;
  queue: {
    records: number;
    readings: number;
    bytes: number;
    maxBytes: number;
    commits: number;
    oldestAgeSeconds: number | null;
  };
  deadLetters: number;
  flush: {
    last: FlushReport | null;
    lastError: { at: string; message: string } | null;
    consecutiveFailures: number;
  };
  totals: {
    acceptedRequests: number;
    acceptedReadings: number;
    refusedRequests: number;
    flushes: number;
    flushFailures: number;
    flushedReadings: number;
    deadLettered: number;
  };
}

export interface SnapshotSources {
  queue: QueueWriter;
  stats: GatewayStats;
  isStopping: () => boolean;
  version: string;
}

export function takeSnapshot({ queue, stats, isStopping, version }: SnapshotSources): GatewaySnapshot {
  const now = Date.now();
  const depth = queue.stats();
  const oldest = queue.oldestReceivedMs();
  return {
    version,
    uptimeSeconds: Math.round((now - stats.startedMs) / 1000),
    durability: queue.durability,
    ready: !isStopping() && queue.isWritable(now),
    clockSynchronized: clockSynchronized(),
    queue: {
      records: depth.records,
      readings: depth.readings,
      bytes: depth.bytes,
      maxBytes: depth.maxBytes,
      commits: depth.commits,
      oldestAgeSeconds: oldest === undefined ? null : Math.max(0, (now - oldest) / 1000),
    },
    deadLetters: queue.deadLetterCount(),
    flush: {
      last: stats.lastFlush ?? null,
      lastError: stats.lastFlushError ?? null,
      consecutiveFailures: stats.consecutiveFlushFailures,
    },
    totals: {
      acceptedRequests: stats.acceptedRequests,
      acceptedReadings: stats.acceptedReadings,
      refusedRequests: stats.refusedRequests,
      flushes: stats.flushes,
      flushFailures: stats.flushFailures,
      flushedReadings: stats.flushedReadings,
      deadLettered: stats.deadLettered,
    },
  };
}
