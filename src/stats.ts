/** The result of the latest delivery attempt of a sink, as the status endpoint shows it. */
export interface FlushReport {
  at: string;
  ok: boolean;
  readings: number;
  durationMs: number;
  error?: string;
}

/** One sink's counters since start. */
export class SinkStats {
  deliveries = 0;
  delivered = 0;
  failures = 0;
  consecutiveFailures = 0;
  deadLettered = 0;
  /** Readings skipped by the `drop_oldest` policy. */
  dropped = 0;
  /** Readings not sent because the destination would not keep them (older than its retention). */
  expired = 0;
  /** Readings the sink took off its part of the queue: delivered, dead-lettered or dropped. */
  taken = 0;
  last: FlushReport | undefined;
  lastError: { at: string; message: string } | undefined;
}

/** The local QuestDB sink, whose deliveries the gateway's own flush counters are. */
export const LOCAL_SINK = 'questdb';

/** Counters since start, shared by ingest and the sinks and read by the status endpoint. */
export class GatewayStats {
  readonly startedMs = Date.now();
  acceptedRequests = 0;
  acceptedReadings = 0;
  refusedRequests = 0;
  /** Requests whose client closed the connection before their readings were committed: not stored. */
  abandonedRequests = 0;
  readonly sinks = new Map<string, SinkStats>();
  /** The delivery thread's V8 heap as it last reported it (its own isolate: not in process.memoryUsage()). */
  deliveryHeap: { usedBytes: number; totalBytes: number } | undefined;

  /** A sink's counters, made on first use. */
  sink(name: string): SinkStats {
    let stats = this.sinks.get(name);
    if (stats === undefined) {
      stats = new SinkStats();
      this.sinks.set(name, stats);
    }
    return stats;
  }

  /** The flush figures of the gateway as a whole: the local QuestDB sink's, or the first sink's when it has none. */
  get flush(): SinkStats {
    return this.sinks.get(LOCAL_SINK) ?? this.sinks.values().next().value ?? this.sink(LOCAL_SINK);
  }

  /** Dead letters made since start, by every sink. */
  get deadLettered(): number {
    let total = 0;
    for (const sink of this.sinks.values()) total += sink.deadLettered;
    return total;
  }
}
