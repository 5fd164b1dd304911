import type { FlushReport, GatewayStats } from '../stats.js';
import type { KeyCounters } from '../keys/key-counters.js';
import type { KeyStore } from '../keys/key-store.js';
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
  /** The HTTPS certificate devices see; a technician checks its fingerprint against the device's. */
  tls: TlsSummary | null;
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
  /** Per key: what each device did since start, so a site manager sees which one is failing. */
  keys: KeyCounters[];
  /** Requests with a wrong or missing key, and the addresses whose wrong-key answers are being slowed down. */
  auth: { wrongKeyRequests: number; addressesTracked: number };
  /** The process's resident memory and V8's used heap: a leak shows as one of them growing. */
  memory: { rssBytes: number; heapUsedBytes: number };
}

export interface TlsSummary {
  source: string;
  fingerprintSha256: string;
  notAfter: string;
}

export interface SnapshotSources {
  queue: QueueWriter;
  stats: GatewayStats;
  keys: Pick<KeyStore, 'counters'>;
  /** The wrong-key delay's counts (the HTTP layer's FailureDelay). */
  failureDelay: { readonly total: number; readonly tracked: number };
  isStopping: () => boolean;
  version: string;
  tls?: () => TlsSummary;
}

export function takeSnapshot(
  { queue, stats, keys, failureDelay, isStopping, version, tls }: SnapshotSources,
  now = Date.now(),
): GatewaySnapshot {
  const depth = queue.stats();
  const oldest = queue.oldestReceivedMs();
  const memory = process.memoryUsage();
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
    tls: tls?.() ?? null,
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
    keys: keys.counters.list(),
    auth: { wrongKeyRequests: failureDelay.total, addressesTracked: failureDelay.tracked },
    memory: { rssBytes: memory.rss, heapUsedBytes: memory.heapUsed },
  };
}
