import type { GatewayState } from '../../health/gateway-state.js';
import type { GatewaySnapshot, MqttSnapshot } from '../../health/snapshot.js';
import type { AuditCount } from '../../audit/audit-trail.js';
import type { RefusalTable } from '../activity/refusal-table.js';
import { Exposition } from './exposition.js';

const STATES = ['delivering', 'catching_up', 'buffering', 'refusing'] as const;

/**
 * The console's figures for a scraper: the same snapshot `/status` and the console read, the
 * refusals by status the console counts, and the process's memory.
 */
export function renderMetrics(s: GatewaySnapshot, state: GatewayState, refusals: RefusalTable, audit: readonly AuditCount[] = []): string {
  const out = new Exposition();
  out
    .family('harbor_gateway_info', 'gauge', 'The running version.', [[{ version: s.version }, 1]])
    .one('harbor_uptime_seconds', 'gauge', 'Seconds since the gateway started.', s.uptimeSeconds)
    .one('harbor_ready', 'gauge', '1 while the queue takes readings.', s.ready ? 1 : 0)
    .family(
      'harbor_state',
      'gauge',
      "The gateway's state in one word, as gateway_health.state: 1 for the current one.",
      STATES.map((code) => [{ state: code }, state.code === code ? 1 : 0] as const),
    );
  if (s.clockSynchronized !== null)
    out.one('harbor_clock_synchronized', 'gauge', '1 once the system clock is synchronised.', s.clockSynchronized ? 1 : 0);

  const statuses: [{ status: string }, number][] = [[{ status: '200' }, s.totals.acceptedRequests]];
  for (const [status, count] of [...refusals.byStatus].sort((a, b) => a[0] - b[0])) statuses.push([{ status: String(status) }, count]);
  out
    .family('harbor_ingest_requests_total', 'counter', 'Ingest requests answered since start, by HTTP status.', statuses)
    .one('harbor_ingest_readings_total', 'counter', 'Readings accepted since start.', s.totals.acceptedReadings)
    .one('harbor_wrong_key_requests_total', 'counter', 'Requests with a wrong or missing X-API-Key since start.', s.auth.wrongKeyRequests);

  out
    .one('harbor_queue_readings', 'gauge', 'Readings in the queue file waiting for a sink.', s.queue.readings)
    .one('harbor_queue_records', 'gauge', 'Requests (records) in the queue file.', s.queue.records)
    .one('harbor_queue_bytes', 'gauge', 'Bytes of queued readings, counted against QUEUE_MAX_BYTES.', s.queue.bytes)
    .one('harbor_queue_max_bytes', 'gauge', 'QUEUE_MAX_BYTES.', s.queue.maxBytes)
    .one('harbor_dead_letters', 'gauge', 'Dead letters in the queue file, all sinks.', s.deadLetters);
  if (s.queue.oldestAgeSeconds !== null)
    out.one('harbor_queue_oldest_age_seconds', 'gauge', 'Age of the oldest queued reading.', s.queue.oldestAgeSeconds);

  /** A family with one sample per item (sink or key) labelled by its name; an item without a value is left out. */
  const each =
    <T extends { name: string }>(label: string, items: readonly T[]) =>
    (name: string, type: 'counter' | 'gauge', help: string, pick: (item: T) => number | null) =>
      out.family(
        name,
        type,
        help,
        items.flatMap((item) => {
          const value = pick(item);
          return value === null ? [] : [[{ [label]: item.name }, value] as const];
        }),
      );
  const sink = each('sink', s.sinks);
  sink('harbor_sink_backlog_readings', 'gauge', 'Readings a sink has still to deliver.', (x) => x.backlog);
  sink('harbor_sink_oldest_age_seconds', 'gauge', "Age of a sink's oldest undelivered reading.", (x) => x.oldestAgeSeconds);
  sink('harbor_sink_delivered_readings_total', 'counter', 'Readings a sink delivered since start.', (x) => x.delivered);
  sink('harbor_sink_deliveries_total', 'counter', 'Successful deliveries of a sink since start.', (x) => x.deliveries);
  sink('harbor_sink_failures_total', 'counter', 'Failed delivery attempts of a sink since start.', (x) => x.failures);
  sink('harbor_sink_consecutive_failures', 'gauge', 'Failed attempts of a sink since its last success.', (x) => x.consecutiveFailures);
  sink('harbor_sink_dead_lettered_total', 'counter', 'Readings a sink made dead letters since start.', (x) => x.deadLettered);
  sink('harbor_sink_dropped_readings_total', 'counter', 'Readings a drop_oldest sink skipped since start.', (x) => x.dropped);
  sink('harbor_sink_expired_readings_total', 'counter', 'Readings not sent because the destination would not keep them.', (x) => x.expired);
  sink(
    'harbor_sink_sent_bytes_total',
    'counter',
    'Bytes of the readings sent, as queued: what a bandwidth budget counts.',
    (x) => x.sentBytes,
  );
  sink(
    'harbor_sink_catch_up_seconds',
    'gauge',
    "Seconds until the sink's backlog is sent at its bandwidth budget (sinks with a budget only).",
    (x) => x.catchUpSeconds,
  );
  sink(
    'harbor_sink_budget_bytes_per_second',
    'gauge',
    "The sink's bandwidth budget (sinks with one only).",
    (x) => x.budgetBytesPerS ?? null,
  );
  sink(
    'harbor_sink_thinned_readings_total',
    'counter',
    'Readings the thinning held back or gathered into summaries: kept locally, not sent as themselves.',
    (x) => x.thinned,
  );

  const key = each('key', s.keys);
  key('harbor_key_accepted_requests_total', 'counter', 'Requests accepted with a key since start.', (k) => k.acceptedRequests);
  key('harbor_key_accepted_readings_total', 'counter', 'Readings accepted with a key since start.', (k) => k.acceptedReadings);
  key(
    'harbor_key_refused_requests_total',
    'counter',
    'Requests with a valid key refused (403, 422, ...) since start.',
    (k) => k.refusedRequests,
  );
  key('harbor_key_last_seen_timestamp_seconds', 'gauge', 'When a key was last used (Unix time).', (k) =>
    k.lastSeen === null ? null : Date.parse(k.lastSeen) / 1000,
  );

  if (s.mqtt !== undefined) mqttMetrics(out, s.mqtt);

  out.family(
    'harbor_audit_events_total',
    'counter',
    'Audited actions since start (logins, logouts, key changes, dead letters re-queued or purged, updates, settings applied), by outcome; those of the command line and the appliance as the gateway read them from the trail.',
    [...audit]
      .sort((a, b) => a.action.localeCompare(b.action) || a.outcome.localeCompare(b.outcome))
      .map(({ action, outcome, count }) => [{ action, outcome }, count] as const),
  );

  out
    .one('process_resident_memory_bytes', 'gauge', 'Resident memory of the gateway process.', s.memory.rssBytes)
    .family('harbor_heap_used_bytes', 'gauge', 'V8 heap in use, per thread.', [
      [{ thread: 'ingest' }, s.memory.heapUsedBytes],
      ...(s.memory.deliveryHeapUsedBytes === null ? [] : [[{ thread: 'delivery' }, s.memory.deliveryHeapUsedBytes] as const]),
    ]);
  return out.text();
}

/** MQTT's counters: the endpoint for devices, and the subscription to a site broker when there is one. */
function mqttMetrics(out: Exposition, m: MqttSnapshot): void {
  out
    .one('harbor_mqtt_clients', 'gauge', 'MQTT clients connected now.', m.clients)
    .one('harbor_mqtt_connections_total', 'counter', 'MQTT connections accepted since start.', m.connections)
    .one(
      'harbor_mqtt_refused_connections_total',
      'counter',
      'MQTT CONNECTs refused (wrong key, full queue, protocol).',
      m.refusedConnections,
    )
    .family('harbor_mqtt_publishes_total', 'counter', 'MQTT PUBLISH packets received since start, by QoS.', [
      [{ qos: '0' }, m.publishes.qos0],
      [{ qos: '1' }, m.publishes.qos1],
      [{ qos: '2' }, m.publishes.qos2],
    ])
    .one('harbor_mqtt_readings_total', 'counter', 'Readings committed from MQTT publishes since start.', m.acceptedReadings)
    .one(
      'harbor_mqtt_refused_publishes_total',
      'counter',
      'MQTT publishes refused for their topic or payload since start.',
      m.refusedPublishes,
    )
    .family(
      'harbor_mqtt_dead_lettered_total',
      'counter',
      'Refused MQTT publishes kept as dead letters (MQTT 3.1.1, QoS 0), per key.',
      m.deadLettered.map(({ key, count }) => [{ key }, count] as const),
    )
    .one(
      'harbor_mqtt_unacknowledged_total',
      'counter',
      'MQTT connections closed without acknowledging a publish the queue could not take (full, stopping).',
      m.unacknowledged,
    )
    .one('harbor_mqtt_closed_total', 'counter', 'MQTT connections the gateway closed for a limit or a protocol error.', m.closedByGateway);
  const sub = m.subscription;
  if (sub === null) return;
  out
    .one('harbor_mqtt_subscription_connected', 'gauge', '1 while the subscription to the site broker is connected.', sub.connected ? 1 : 0)
    .one('harbor_mqtt_subscription_messages_total', 'counter', 'Messages received from the site broker since start.', sub.messages)
    .one('harbor_mqtt_subscription_readings_total', 'counter', 'Readings committed from the site broker since start.', sub.readings)
    .one(
      'harbor_mqtt_subscription_without_readings_total',
      'counter',
      'Messages from the site broker without a number to take (acknowledged, nothing stored).',
      sub.withoutReadings,
    )
    .one('harbor_mqtt_subscription_dead_lettered_total', 'counter', 'Messages from the site broker kept as dead letters.', sub.deadLettered)
    .one(
      'harbor_mqtt_subscription_granted_qos',
      'gauge',
      'The lowest QoS the site broker granted the subscription (2: each message stored once); -1 before its answer.',
      sub.grantedQos === null ? -1 : Math.min(...sub.grantedQos),
    )
    .one(
      'harbor_mqtt_subscription_at_least_once_total',
      'counter',
      'Messages from the site broker that came with QoS 1 (a crash may store one twice).',
      sub.atLeastOnce,
    )
    .one(
      'harbor_mqtt_subscription_copies_total',
      'counter',
      'QoS 2 copies of messages the gateway had taken, acknowledged again and not stored.',
      sub.copies,
    );
}
