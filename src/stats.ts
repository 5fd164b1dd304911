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
  /** Readings its thinning held back or gathered into summaries (thinning/): taken off the queue, not sent as themselves. */
  thinned = 0;
  /** Bytes of the readings sent (as queued), and the readings taken with them: the backlog's bytes per reading. */
  sentBytes = 0;
  /** Readings the sink took off its part of the queue: delivered, dead-lettered or dropped. */
  taken = 0;
  last: FlushReport | undefined;
  lastError: { at: string; message: string } | undefined;
  /** When the current run of failed attempts began (epoch ms); undefined while they succeed. */
  failingSinceMs: number | undefined;
  /** Set while an attempt has gone on for seconds without an outcome: when it began (epoch ms). */
  waitingSinceMs: number | undefined;
  /** What the destination told of this site's clock: ms ahead of its own (negative: behind). */
  clockAheadMs: number | undefined;
}

/** The local QuestDB sink, whose deliveries the gateway's own flush counters are. */
export const LOCAL_SINK = 'questdb';

/** Counters since start, shared by ingest and the sinks and read by the status endpoint. */
/**
 * The optional parts of the gateway as it started: `off`, none of a part's code is loaded and it
 * holds no memory (docs/architecture.md, "What loads when").
 */
export interface GatewayParts {
  /** The console and `/metrics` (`CONSOLE`). */
  console: 'on' | 'off';
  /** The MQTT endpoint for devices (`MQTT`). */
  mqtt: 'on' | 'off';
  /** The subscription to a site broker (`MQTT_SUBSCRIBE_URL`). */
  mqttSubscription: 'on' | 'off';
  /** The site's catalogue (`CATALOGUE_FILE`). */
  catalogue: 'on' | 'off';
  /** The site's report to the centre, on when a sink forwards to one and health reports are on. */
  fleetReport: 'on' | 'off';
  /** The Kafka sink (`KAFKA_BROKERS`). */
  kafka: 'on' | 'off';
}

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
  /** MQTT's own counters, when the endpoint or a subscription is on. */
  mqtt: MqttStats | undefined;
  /** The optional parts, once the gateway has started. */
  parts: GatewayParts | undefined;

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

/** The MQTT endpoint's and the site-broker subscription's counters since start, for `/status`, `/metrics` and the console. */
export class MqttStats {
  /** Clients connected now, and connections accepted (CONNACK 0) since start. */
  clients = 0;
  connections = 0;
  /** CONNECTs refused: wrong or missing key, a full queue, an unsupported protocol. */
  refusedConnections = 0;
  /** PUBLISH packets received, by QoS. */
  readonly publishes = [0, 0, 0];
  acceptedReadings = 0;
  /** Publishes refused (bad payload, unknown topic, a ship the key may not send). */
  refusedPublishes = 0;
  /** Refused publishes kept as dead letters (MQTT 3.1.1 and QoS 0 cannot be told), per key. */
  readonly deadLetteredByKey = new Map<string, number>();
  /** Connections closed because the queue could not take a publish (full, stopping, disk): nothing acknowledged. */
  unacknowledged = 0;
  /** Connections closed for breaking the protocol or a limit (size, keep-alive, slow packet, no CONNECT). */
  closedByGateway = 0;
  /** The subscription to a site broker, when configured. */
  subscription: MqttSubscriptionStats | undefined;

  deadLettered(key: string): void {
    this.deadLetteredByKey.set(key, (this.deadLetteredByKey.get(key) ?? 0) + 1);
  }
}

export class MqttSubscriptionStats {
  connected = false;
  messages = 0;
  readings = 0;
  /** Messages without a number to take (a state like "ON", a sensor's "nan"): acknowledged, nothing stored. */
  withoutReadings = 0;
  deadLettered = 0;
  connects = 0;
  /** The QoS the broker granted each topic filter at the last SUBACK (2: exactly once). */
  grantedQos: number[] | undefined;
  /** Messages that came with QoS 1 (a publisher's or a grant's): each may be stored again after a crash. */
  atLeastOnce = 0;
  /** QoS 2 copies of messages taken before (their PUBREC was lost), acknowledged again without storing. */
  copies = 0;
  lastError: { at: string; message: string } | undefined;
}
