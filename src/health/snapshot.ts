import type { FlushReport, GatewayParts, GatewayStats, MqttStats, SinkStats } from '../stats.js';
import type { KeyCounters } from '../keys/key-counters.js';
import type { KeyStore } from '../keys/key-store.js';
import type { QueueWriter } from '../queue/queue-writer.js';
import { clockSynchronized } from './clock.js';

/** What the gateway knows about itself: the body of `/status` and the source of health reports. */
export interface GatewaySnapshot {
  version: string;
  /** This gateway's site id and its instance, which it sends with what it forwards. */
  identity?: { site: string; instance: string };
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
    /**
     * The sink that holds the queue: of those that never drop (the local QuestDB, `block` sinks),
     * the one with most readings still to deliver; null when none has any. When the queue is
     * full, ingest refuses readings until this sink catches up. (Optional only for snapshots
     * written by hand; takeSnapshot always sets it.)
     */
    heldBy?: string | null;
  };
  deadLetters: number;
  /** The HTTPS certificate devices see; a technician checks its fingerprint against the device's. */
  tls: TlsSummary | null;
  /** The local QuestDB sink's deliveries (the gateway's flushes). */
  flush: {
    last: FlushReport | null;
    lastError: { at: string; message: string } | null;
    consecutiveFailures: number;
  };
  /** Every sink with its own backlog, progress and errors. */
  sinks: SinkSnapshot[];
  totals: {
    acceptedRequests: number;
    acceptedReadings: number;
    refusedRequests: number;
    /** Closed by their client before the commit: nothing of them stored. */
    abandonedRequests?: number;
    flushes: number;
    flushFailures: number;
    flushedReadings: number;
    deadLettered: number;
  };
  /** Per key: what each device did since start, so a site manager sees which one is failing. */
  keys: KeyCounters[];
  /** Requests with a wrong or missing key, and the addresses whose wrong-key answers are being slowed down. */
  auth: { wrongKeyRequests: number; addressesTracked: number };
  /** `Idempotency-Key`: keys held, repetitions answered without storing, keys forgotten before their window passed. */
  idempotency?: { keys: number; repeats: number; forgottenEarly: number } | null;
  /** The process's resident memory and V8's used heap: a leak shows as one of them growing. */
  /** Heaps: `heap*` the HTTP thread's, `deliveryHeap*` the delivery thread's (null until it reports). */
  memory: {
    rssBytes: number;
    heapUsedBytes: number;
    heapTotalBytes: number;
    deliveryHeapUsedBytes: number | null;
    deliveryHeapTotalBytes: number | null;
  };
  /** MQTT's counters, when its endpoint or a subscription is on. */
  mqtt?: MqttSnapshot;
  /**
   * At a centre: how many sites gateway instances claimed, and each site another instance forwards
   * under too (refused in the last 10 minutes). Null where no gateway forwards to this one.
   */
  siteClaims?: { sites: number; conflicts: SiteConflictSnapshot[] } | null;
  /** Which optional parts are on; those off hold none of their code. Absent until the gateway has started. */
  parts?: GatewayParts;
}

/** A site two gateway instances forward under: the owner, whose readings are stored, and the one refused. */
export interface SiteConflictSnapshot {
  site: string;
  owner: { instance: string; gateway: string | null; since: string; lastHeard: string } | null;
  claimant: { instance: string; gateway: string | null; refusedSince: string; lastRefused: string; refusedRequests: number };
}

/** What the centre's site claims give the snapshot (claims/site-claims.ts `view`). */
export interface SiteClaimsSource {
  sites: number;
  conflicts: readonly {
    site: string;
    instance: string;
    gateway: string | null;
    firstMs: number;
    lastMs: number;
    refusedRequests: number;
    owner: { instance: string; gateway: string | null; firstMs: number; lastMs: number } | undefined;
  }[];
}

function siteClaimsSnapshot(view: SiteClaimsSource): GatewaySnapshot['siteClaims'] {
  if (view.sites === 0 && view.conflicts.length === 0) return null;
  const iso = (ms: number) => new Date(ms).toISOString();
  return {
    sites: view.sites,
    conflicts: view.conflicts.map((c) => ({
      site: c.site,
      owner:
        c.owner === undefined
          ? null
          : { instance: c.owner.instance, gateway: c.owner.gateway, since: iso(c.owner.firstMs), lastHeard: iso(c.owner.lastMs) },
      claimant: {
        instance: c.instance,
        gateway: c.gateway,
        refusedSince: iso(c.firstMs),
        lastRefused: iso(c.lastMs),
        refusedRequests: c.refusedRequests,
      },
    })),
  };
}

export interface MqttSnapshot {
  clients: number;
  connections: number;
  refusedConnections: number;
  publishes: { qos0: number; qos1: number; qos2: number };
  acceptedReadings: number;
  refusedPublishes: number;
  /** Refused publishes kept as dead letters, per key. */
  deadLettered: { key: string; count: number }[];
  unacknowledged: number;
  closedByGateway: number;
  subscription: {
    connected: boolean;
    connects: number;
    messages: number;
    readings: number;
    withoutReadings: number;
    deadLettered: number;
    /** The QoS the broker granted each topic filter (2: each message stored once); null before the SUBACK. */
    grantedQos: number[] | null;
    /** Messages that came with QoS 1: stored at least once, a crash may store one twice. */
    atLeastOnce: number;
    /** QoS 2 copies of messages taken before, acknowledged again and not stored. */
    copies: number;
    lastError: { at: string; message: string } | null;
  } | null;
}

function mqttSnapshot(m: MqttStats): MqttSnapshot {
  const sub = m.subscription;
  return {
    clients: m.clients,
    connections: m.connections,
    refusedConnections: m.refusedConnections,
    publishes: { qos0: m.publishes[0] ?? 0, qos1: m.publishes[1] ?? 0, qos2: m.publishes[2] ?? 0 },
    acceptedReadings: m.acceptedReadings,
    refusedPublishes: m.refusedPublishes,
    deadLettered: [...m.deadLetteredByKey].map(([key, count]) => ({ key, count })),
    unacknowledged: m.unacknowledged,
    closedByGateway: m.closedByGateway,
    subscription:
      sub === undefined
        ? null
        : {
            connected: sub.connected,
            connects: sub.connects,
            messages: sub.messages,
            readings: sub.readings,
            withoutReadings: sub.withoutReadings,
            deadLettered: sub.deadLettered,
            grantedQos: sub.grantedQos ?? null,
            atLeastOnce: sub.atLeastOnce,
            copies: sub.copies,
            lastError: sub.lastError ?? null,
          },
  };
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
  /** The configured sinks, in order. */
  sinks?: readonly SinkDescription[];
  idempotency?: { readonly size: number; readonly repeats: number; readonly forgottenEarly: number };
  identity?: { site: string; instance: string };
  /** The centre's site claims, when the gateway keeps them. */
  siteClaims?: () => SiteClaimsSource;
}

export interface SinkDescription {
  name: string;
  /** The destination, without secrets. */
  destination: string;
  policy: string;
  /** How long the sink gathers readings before it delivers them (a full batch goes at once). */
  flushIntervalMs: number;
  /** The sink's bandwidth budget in bytes a second, when it has one. */
  budgetBytesPerS?: number;
  /** Times of day without the budget (`22:00-06:00`), when it has any. */
  budgetCheapHours?: string;
}

/** One sink as /status shows it and the health rows record it. */
export interface SinkSnapshot extends SinkDescription {
  /** Readings it has still to deliver, and how long ago the oldest of them was received. */
  backlog: number;
  oldestAgeSeconds: number | null;
  delivered: number;
  deliveries: number;
  failures: number;
  consecutiveFailures: number;
  deadLettered: number;
  dropped: number;
  /** Readings it did not send because its destination would not keep them (older than its retention). */
  expired: number;
  /** Readings its thinning did not send as themselves (held back by a deadband, gathered into a summary). */
  thinned: number;
  /** Bytes of the readings sent since start, as queued (what a budget counts). */
  sentBytes: number;
  /**
   * With a budget: seconds until the backlog is sent at the budget, by the bytes per reading sent
   * so far (by the queue's average before the first delivery); null without a budget.
   */
  catchUpSeconds: number | null;
  last: FlushReport | null;
  lastError: { at: string; message: string } | null;
  /** Seconds its attempts have failed without a success in between; null while they succeed. */
  failingSeconds: number | null;
  /** Seconds the attempt under way has had no answer, once it is a few seconds; else null. */
  waitingSeconds: number | null;
  /** How far this site's clock is ahead of the destination's (negative: behind), when the destination told; else null. */
  clockAheadSeconds: number | null;
}

const secondsSince = (ms: number | undefined, now: number): number | null => (ms === undefined ? null : Math.max(0, (now - ms) / 1000));

function catchUpSeconds(budget: number | undefined, backlog: number, s: SinkStats, queue: QueueWriter): number | null {
  if (budget === undefined || budget <= 0) return null;
  const perReading = s.taken > 0 ? s.sentBytes / s.taken : queue.readings > 0 ? queue.bytes / queue.readings : 0;
  return Math.round((backlog * perReading) / budget);
}

export function sinkSnapshot(sink: SinkDescription, stats: GatewayStats, queue: QueueWriter, now: number): SinkSnapshot {
  const s = stats.sink(sink.name);
  const backlog = queue.sinkBacklog(sink.name, s.taken);
  const oldest = backlog?.oldestReceivedMs;
  return {
    ...sink,
    backlog: backlog?.readings ?? 0,
    oldestAgeSeconds: oldest === undefined ? null : Math.max(0, (now - oldest) / 1000),
    delivered: s.delivered,
    deliveries: s.deliveries,
    failures: s.failures,
    consecutiveFailures: s.consecutiveFailures,
    deadLettered: s.deadLettered,
    dropped: s.dropped,
    expired: s.expired,
    thinned: s.thinned,
    sentBytes: s.sentBytes,
    catchUpSeconds: catchUpSeconds(sink.budgetBytesPerS, backlog?.readings ?? 0, s, queue),
    last: s.last ?? null,
    lastError: s.lastError ?? null,
    failingSeconds: s.consecutiveFailures > 0 ? secondsSince(s.failingSinceMs, now) : null,
    waitingSeconds: secondsSince(s.waitingSinceMs, now),
    clockAheadSeconds: s.clockAheadMs === undefined ? null : s.clockAheadMs / 1000,
  };
}

/** The sink of `sinks` that holds the queue (see GatewaySnapshot.queue.heldBy). */
export function queueHolder(sinks: readonly SinkSnapshot[]): SinkSnapshot | undefined {
  let holder: SinkSnapshot | undefined;
  for (const sink of sinks) {
    if (sink.policy === 'block' && sink.backlog > 0 && (holder === undefined || sink.backlog > holder.backlog)) holder = sink;
  }
  return holder;
}

export function takeSnapshot(
  { queue, stats, keys, failureDelay, isStopping, version, tls, sinks = [], idempotency, identity, siteClaims }: SnapshotSources,
  now = Date.now(),
): GatewaySnapshot {
  const depth = queue.stats();
  const oldest = queue.oldestReceivedMs();
  const memory = process.memoryUsage();
  const flush = stats.flush;
  const sinkSnapshots = sinks.map((sink) => sinkSnapshot(sink, stats, queue, now));
  return {
    version,
    ...(identity === undefined ? {} : { identity }),
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
      heldBy: queueHolder(sinkSnapshots)?.name ?? null,
    },
    deadLetters: queue.deadLetterCount(),
    tls: tls?.() ?? null,
    flush: {
      last: flush.last ?? null,
      lastError: flush.lastError ?? null,
      consecutiveFailures: flush.consecutiveFailures,
    },
    sinks: sinkSnapshots,
    totals: {
      acceptedRequests: stats.acceptedRequests,
      acceptedReadings: stats.acceptedReadings,
      refusedRequests: stats.refusedRequests,
      abandonedRequests: stats.abandonedRequests,
      flushes: flush.deliveries,
      flushFailures: flush.failures,
      flushedReadings: flush.delivered,
      deadLettered: stats.deadLettered,
    },
    keys: keys.counters.list(),
    auth: { wrongKeyRequests: failureDelay.total, addressesTracked: failureDelay.tracked },
    idempotency:
      idempotency === undefined
        ? null
        : { keys: idempotency.size, repeats: idempotency.repeats, forgottenEarly: idempotency.forgottenEarly },
    memory: {
      rssBytes: memory.rss,
      heapUsedBytes: memory.heapUsed,
      heapTotalBytes: memory.heapTotal,
      deliveryHeapUsedBytes: stats.deliveryHeap?.usedBytes ?? null,
      deliveryHeapTotalBytes: stats.deliveryHeap?.totalBytes ?? null,
    },
    ...(stats.mqtt === undefined ? {} : { mqtt: mqttSnapshot(stats.mqtt) }),
    ...(siteClaims === undefined ? {} : { siteClaims: siteClaimsSnapshot(siteClaims()) }),
    ...(stats.parts === undefined ? {} : { parts: stats.parts }),
  };
}
