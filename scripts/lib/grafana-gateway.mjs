// The operator's dashboard, "Harbor Gateway": each gateway's state, its events, queue, flush
// errors, device keys, sinks and clock, from the rows the gateway writes about itself.
import {
  byName,
  colouredText,
  dashboard,
  dashboardLink,
  GATEWAY_UID,
  gatewayStatePanel,
  LEGEND,
  panel,
  row,
  SITE_UID,
  TABLE_OPTIONS,
  target,
} from './grafana-panels.mjs';

/**
 * A series per gateway (or per gateway and sink) of `columns`, aggregates sampled at the panel's interval.
 * @param {string} metric @param {string} table @returns {(columns: string) => object[]}
 */
const sampled = (metric, table) => (columns) => [
  target(
    `SELECT time, ${metric} AS metric, ${columns}
FROM ${table}
WHERE $__timeFilter(time)
SAMPLE BY \${__interval_ms}T
ORDER BY time`,
    { format: 'time_series' },
  ),
];
const perGateway = sampled('gateway', 'gateway_health');
const perSink = sampled("concat(gateway, ' / ', sink)", 'gateway_sink_health');
const TIME_SERIES = { drawStyle: 'line', fillOpacity: 10 };

/** @param {number} id @param {[number, number, number, number]} gridPos */
function events(id, gridPos) {
  return panel(id, 'table', 'Gateway events', gridPos, {
    targets: [
      target(`SELECT time, gateway, event, reason, text, until
FROM gateway_events
WHERE $__timeFilter(time)
ORDER BY time DESC`),
    ],
    description:
      'Starts (and what came before: an upgrade, a restart, a crash or power cut), stops with their reason, outages of QuestDB and renamed gateways, in the time range. The same events mark the time series.',
    defaults: { custom: { align: 'auto', filterable: true }, noValue: 'No gateway events in the time range' },
    overrides: [
      byName('time', { unit: 'dateTimeAsIso', 'custom.width': 200 }),
      byName('until', { unit: 'dateTimeAsIso', 'custom.width': 200 }),
      colouredText('event', [
        ['^started$', 'green'],
        ['^stopped$', 'blue'],
        ['^outage$', 'red'],
      ]),
    ],
    options: TABLE_OPTIONS,
  });
}

/** @param {number} y */
function queue(y) {
  const depth = panel(5, 'timeseries', 'Queue depth', [0, y, 8, 8], {
    targets: perGateway('max(queue_readings) AS queue_readings'),
    description: "Readings waiting in each gateway's queue for QuestDB. It grows while QuestDB is unreachable and drains when it is back.",
    defaults: { unit: 'short', min: 0, decimals: 0, custom: TIME_SERIES },
    options: LEGEND,
  });
  const oldest = panel(6, 'timeseries', 'Oldest queued reading', [8, y, 8, 8], {
    targets: perGateway('max(coalesce(oldest_age_s, 0)) AS oldest_age'),
    description: 'Age of the oldest reading still queued on each gateway; 0 when the queue is empty.',
    defaults: { unit: 's', min: 0, custom: TIME_SERIES },
    options: LEGEND,
  });
  const failures = panel(7, 'timeseries', 'Flush errors', [16, y, 8, 8], {
    targets: perGateway('max(consecutive_flush_failures) AS consecutive_failures, max(flush_failures) AS failures_since_start'),
    description: 'Failed flushes to QuestDB: in a row right now, and in total since the gateway started.',
    defaults: { unit: 'short', min: 0, decimals: 0, custom: TIME_SERIES },
    options: LEGEND,
  });
  const gateways = panel(8, 'table', 'Gateways', [0, y + 8, 24, 6], {
    targets: [
      target(`SELECT gateway, time AS last_report, ready, clock, queue_readings, queue_bytes, queue_max_bytes, oldest_age_s, dead_letters,
  flush_failures, consecutive_flush_failures, accepted_readings, flushed_readings, refused_requests
FROM gateway_health
WHERE $__timeFilter(time)
LATEST ON time PARTITION BY gateway
ORDER BY gateway`),
    ],
    description:
      'The last health report of each gateway in the time range (written every 10 s while the gateway runs): its queue against its bound, dead letters, flush counters since its start, and its clock (synchronised by NTP, or empty where it cannot be known, as in a container).',
    defaults: { custom: { align: 'auto' }, noValue: 'No health report in the time range' },
    overrides: [
      byName('last_report', { unit: 'dateTimeAsIso' }),
      byName('queue_bytes', { unit: 'bytes' }),
      byName('queue_max_bytes', { unit: 'bytes' }),
      byName('oldest_age_s', { unit: 's' }),
      colouredText('clock', [
        ['^synchronised$', 'green'],
        ['^unsynchronised$', 'red'],
      ]),
    ],
    options: TABLE_OPTIONS,
  });
  const keys = panel(9, 'table', 'Device keys', [0, y + 14, 24, 7], {
    targets: [
      target(`SELECT gateway, key, ship_prefix, last_seen, refused_requests, accepted_requests, accepted_readings
FROM gateway_key_health
WHERE $__timeFilter(time)
LATEST ON time PARTITION BY gateway, key
ORDER BY refused_requests DESC, gateway, key`),
    ],
    description:
      "Per device key, the counters of its gateway's last health report in the time range (since the gateway started): a key with refusals or an old last_seen is a device to look at.",
    defaults: { custom: { align: 'auto' }, noValue: 'No key report in the time range' },
    overrides: [byName('last_seen', { unit: 'dateTimeFromNow' })],
    options: TABLE_OPTIONS,
  });
  return [row(4, 'Queue and flushes', y - 1), depth, oldest, failures, gateways, keys];
}

/** @param {number} y */
function sinks(y) {
  const backlog = panel(11, 'timeseries', 'Sink backlog', [0, y + 1, 12, 8], {
    targets: perSink('max(backlog_readings) AS backlog_readings'),
    description:
      'Readings queued for each destination of each gateway (its sinks: the local QuestDB, an upstream gateway or service, Kafka, a remote QuestDB). A sink whose link is down grows while the others stay flat.',
    defaults: { unit: 'short', min: 0, decimals: 0, custom: TIME_SERIES },
    options: LEGEND,
  });
  const oldest = panel(12, 'timeseries', 'Oldest undelivered reading per sink', [12, y + 1, 12, 8], {
    targets: perSink('max(coalesce(oldest_age_s, 0)) AS oldest_age'),
    description:
      "How long the oldest reading a sink has not delivered has been waiting: the length of that destination's outage, as the site sees it.",
    defaults: { unit: 's', min: 0, custom: TIME_SERIES },
    options: LEGEND,
  });
  const table = panel(13, 'table', 'Sinks', [0, y + 9, 24, 6], {
    targets: [
      target(`SELECT gateway, sink, state, time AS last_report, backlog_readings, oldest_age_s, delivered_readings, failed_deliveries,
  dead_lettered, dropped_readings
FROM gateway_sink_health
WHERE $__timeFilter(time)
LATEST ON time PARTITION BY gateway, sink
ORDER BY gateway, sink`),
    ],
    description:
      'The last report of each sink of each gateway: its state, backlog, and what it delivered, failed, set aside as dead letters and, under drop_oldest while the queue was full, dropped since the gateway started.',
    defaults: { custom: { align: 'auto' }, noValue: 'No sink report in the time range' },
    overrides: [
      byName('last_report', { unit: 'dateTimeAsIso' }),
      byName('oldest_age_s', { unit: 's' }),
      colouredText('state', [
        ['^up to date$', 'green'],
        ['^behind$', 'yellow'],
        ['^failing$', 'red'],
      ]),
    ],
    options: TABLE_OPTIONS,
  });
  return [row(10, 'Sinks', y), backlog, oldest, table];
}

export function gatewayDashboard() {
  return dashboard({
    uid: GATEWAY_UID,
    title: 'Harbor Gateway',
    description:
      "The gateway's own health, for its operator: its state in words, starts and stops, queue, flush errors, device keys, sinks and clock. The site's ships and cargo are on the Comprehensive Telemetry Dashboard.",
    tags: ['harbor', 'gateway'],
    links: [dashboardLink('Site', SITE_UID, "The site's ships, cargo, positions and alerts")],
    templating: [],
    panels: [gatewayStatePanel(1, [0, 0, 24, 5]), events(2, [0, 5, 24, 7]), ...queue(13), ...sinks(34)],
  });
}
