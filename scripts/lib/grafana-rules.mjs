// The provisioned alert rules: ships and cargo for the site manager, gateways for the operator.
import { stringify } from 'yaml';
import {
  CARGO_ONLY,
  cargoNow,
  crossedLimit,
  GATEWAY_LAST_WORD,
  joinShipNames,
  latestOf,
  named,
  REPORTING_MINUTES,
  SHIP_NAMES,
  SHIPS_SEEN,
  siteOf,
} from './grafana-sql.mjs';

/** Minutes without a report after which a gateway counts as stopped: it writes one every 10 s. */
export const GATEWAY_SILENT_MINUTES = 3;
/** Minutes a series may be silent while its ship reports. */
export const SERIES_SILENT_MINUTES = 60;
/** The tables the dashboards and rules read; the gateway creates them at its start. */
export const DASHBOARD_TABLES = [
  'cargo_data',
  'gateway_health',
  'gateway_key_health',
  'gateway_sink_health',
  'gateway_events',
  'cargo_catalogue',
  'ship_catalogue',
  'fleet_site_health',
  'fleet_sink_health',
];

/**
 * A number in a summary as a site manager reads it: `printf`, never `humanize`, whose metric
 * prefixes turn 1500 minutes into "1.5k" and 0.3 °C into "300m". Whole (`%.0f`), or with up to
 * two decimals and no trailing zeros.
 */
const whole = (/** @type {string} */ value) => `{{ printf "%.0f" ${value} }}`;
const plain = (/** @type {string} */ value) => `{{ reReplaceAll "\\\\.?0+$" "" (printf "%.2f" ${value}) }}`;
/** The ship as the summaries name it: its name, and its site where the reading has one. */
const SHIP = '{{ $labels.ship }}{{ if $labels.site }} at {{ $labels.site }}{{ end }}';

/**
 * One rule: an SQL query answering a row per ship, series or gateway (its text columns become the
 * alert's labels, the one number its value) and a threshold on it. A failing query keeps the last
 * state (`KeepLast`): QuestDB down or not yet set up is one alert of its own (harbor-tables-missing),
 * not one per rule; a rule's first minute of pending also rides out a start's first seconds.
 */
/**
 * @param {{ uid: string, title: string, sql: string, seconds: number, evaluator: 'gt' | 'lt', params: number[], pending?: string,
 *   summary: string, description: string, labels: Record<string, string>, errors?: 'KeepLast' | 'Error' }} settings
 */
function rule({ uid, title, sql, seconds, evaluator, params, pending = '1m', summary, description, labels, errors = 'KeepLast' }) {
  return {
    uid,
    title,
    condition: 'C',
    for: pending,
    data: [
      {
        refId: 'A',
        relativeTimeRange: { from: seconds, to: 0 },
        datasourceUid: 'questdb',
        model: { refId: 'A', rawQuery: true, editorMode: 'code', format: 'table', rawSql: sql },
      },
      {
        refId: 'C',
        datasourceUid: '__expr__',
        model: { refId: 'C', type: 'threshold', expression: 'A', conditions: [{ evaluator: { type: evaluator, params } }] },
      },
    ],
    noDataState: 'OK',
    execErrState: errors,
    annotations: { summary, description },
    labels,
  };
}

const readings = [
  rule({
    uid: 'harbor-ship-silent',
    title: 'Ship stopped reporting',
    seconds: 30 * 86400,
    sql: `WITH seen AS (
  ${latestOf(`time > ${SHIPS_SEEN}`, ['site', 'ship_id'], [])}
), ${SHIP_NAMES}
SELECT ${siteOf('s')}, s.ship_id, coalesce(n.name, s.ship_id) AS ship, datediff('s', s.time, now()) / 60.0 AS minutes_silent
FROM seen s ${joinShipNames('s')}`,
    evaluator: 'gt',
    params: [REPORTING_MINUTES],
    summary: `Ship ${SHIP} has sent no reading for ${whole('$values.A.Value')} min`,
    description: `No reading of this ship reached QuestDB for more than ${REPORTING_MINUTES} minutes. It alerts until the ship reports again, however long, as long as it was seen within the window (30 days unless SHIPS_SEEN_DAYS says otherwise); its series alert no more meanwhile. Its sensors, its uplink or the gateway may be down; the gateway alerts tell which.`,
    labels: { harbor: 'readings' },
  }),
  rule({
    uid: 'harbor-series-silent',
    title: 'Series stopped reporting',
    seconds: 30 * 86400,
    // Only while the ship reports: a silent ship is one alert (the rule above), not one per sensor.
    sql: `WITH series AS (
  ${latestOf(`time > ${SHIPS_SEEN}`, ['site', 'ship_id', 'cargo_id'], [])}
), reporting AS (
  SELECT time, site, ship_id, cargo_id FROM (
    SELECT time, site, ship_id, cargo_id, max(time) OVER (PARTITION BY site, ship_id) AS ship_time FROM series
  ) WHERE ship_time > dateadd('m', -${REPORTING_MINUTES}, now())
), ${named('reporting', ['time', 'site', 'ship_id', 'cargo_id'])}, ${SHIP_NAMES}
SELECT ${siteOf('m')}, m.ship_id, coalesce(n.name, m.ship_id) AS ship, m.cargo_id, m.cargo, datediff('s', m.time, now()) / 60.0 AS minutes_silent
FROM named m ${joinShipNames('m')}`,
    evaluator: 'gt',
    params: [SERIES_SILENT_MINUTES],
    summary: `${SHIP}: {{ $labels.cargo }} has sent no reading for ${whole('$values.A.Value')} min while the ship reports`,
    description: `One sensor of this ship has sent nothing for more than ${SERIES_SILENT_MINUTES} minutes while the ship itself reports. It alerts until the sensor reports again, however long; once the whole ship is silent, "Ship stopped reporting" speaks for it.`,
    labels: { harbor: 'readings' },
  }),
  rule({
    uid: 'harbor-cargo-outside',
    title: 'Cargo outside its normal range',
    seconds: 30 * 86400,
    pending: '10m',
    sql: `WITH ${cargoNow(`time > ${SHIPS_SEEN}`)}, ${SHIP_NAMES}
SELECT ${siteOf('m')}, m.ship_id, coalesce(n.name, m.ship_id) AS ship, m.cargo_id, m.cargo, coalesce(m.unit, '') AS unit,
  ${crossedLimit} AS crossed,
  CASE WHEN m.value > m.normal_max THEN m.value - m.normal_max WHEN m.value < m.normal_min THEN m.normal_min - m.value ELSE 0 END AS outside_by
FROM named m
${joinShipNames('m')}
WHERE (m.normal_min IS NOT NULL OR m.normal_max IS NOT NULL) AND ${CARGO_ONLY}`,
    evaluator: 'gt',
    params: [0],
    summary: `${SHIP}: {{ $labels.cargo }} {{ $labels.crossed }} for 10 min (by ${plain('$values.A.Value')} {{ $labels.unit }})`,
    description:
      "The latest reading of this cargo has been outside the normal range the site's catalogue gives it for 10 minutes. It alerts until a reading within the range arrives: a ship that went silent meanwhile keeps it firing, beside its own alert, since its last word was outside.",
    labels: { harbor: 'readings' },
  }),
];

/**
 * A gateway rule on each gateway's latest health row of the last 10 minutes: `value` is the
 * column (an expression and its name) compared with the threshold.
 * @param {{ value: string } & Omit<Parameters<typeof rule>[0], 'sql' | 'seconds' | 'evaluator' | 'labels'>} settings
 */
const healthRule = ({ value, ...settings }) =>
  rule({
    seconds: 600,
    sql: `SELECT gateway, ${value}
FROM gateway_health
WHERE time > dateadd('m', -10, now())
LATEST ON time PARTITION BY gateway`,
    evaluator: 'gt',
    labels: { harbor: 'gateway' },
    ...settings,
  });

const gateways = [
  rule({
    uid: 'harbor-gateway-stopped',
    title: 'Gateway stopped reporting',
    seconds: 600,
    sql: `WITH ${GATEWAY_LAST_WORD}
SELECT gateway,
  CASE
    WHEN state = 'stopped' THEN text
    WHEN kind = 'started' THEN 'started, and wrote no report since'
    ELSE 'no stop reported: it crashed, lost power, or lost its way to QuestDB'
  END AS last_word,
  datediff('s', time, now()) / 60.0 AS minutes_silent
FROM last
WHERE kind != 'retired'`,
    evaluator: 'gt',
    params: [GATEWAY_SILENT_MINUTES],
    summary: `Gateway {{ $labels.gateway }} has not reported for ${whole('$values.A.Value')} min ({{ $labels.last_word }})`,
    description: `A gateway writes a health row every 10 s; this one has written none for more than ${GATEWAY_SILENT_MINUTES} minutes. Its last word says whether it stopped on purpose (an upgrade, a restart, a shutdown) or went quiet. It alerts until the gateway reports again, however long; a gateway renamed by GATEWAY_NAME is retired by its next start under the new name.`,
    labels: { harbor: 'gateway' },
  }),
  healthRule({
    uid: 'harbor-oldest-queued',
    title: 'Readings waiting in the gateway',
    value: 'coalesce(oldest_age_s, 0) / 60.0 AS oldest_queued_minutes',
    params: [10],
    summary: `Gateway {{ $labels.gateway }}: the oldest queued reading is ${whole('$values.A.Value')} min old`,
    description:
      "Readings are safe in the gateway's queue but have not reached QuestDB for more than 10 minutes. QuestDB or the uplink to it is down, or too slow for the traffic.",
  }),
  healthRule({
    uid: 'harbor-flush-failures',
    title: 'Gateway cannot deliver to QuestDB',
    // A single failure is retried within seconds; five minutes of failures in a row is an outage.
    pending: '5m',
    value: 'consecutive_flush_failures AS failures_in_a_row',
    params: [0],
    summary: `Gateway {{ $labels.gateway }}: ${whole('$values.A.Value')} flushes to QuestDB failed in a row`,
    description:
      'The gateway keeps readings in its queue and retries. Its state on the dashboard says for how long and how full the queue is.',
  }),
  rule({
    uid: 'harbor-dead-letters',
    title: 'Dead letters appearing',
    seconds: 3600,
    sql: `SELECT gateway, last(dead_letters) - first(dead_letters) AS new_dead_letters
FROM gateway_health
WHERE time > dateadd('h', -1, now())
GROUP BY gateway`,
    evaluator: 'gt',
    params: [0],
    summary: `Gateway {{ $labels.gateway }}: ${whole('$values.A.Value')} new dead letters in the last hour`,
    description:
      "QuestDB refused readings the gateway had accepted; they wait in the gateway's dead letters (harbor-gateway dead-letters list) to be corrected and re-queued.",
    labels: { harbor: 'gateway' },
  }),
  healthRule({
    uid: 'harbor-clock-unsynchronised',
    title: 'Gateway clock not synchronised',
    // Boards without a battery-backed clock start with a wrong time until NTP answers.
    pending: '10m',
    value: "CASE WHEN clock = 'unsynchronised' THEN 1 ELSE 0 END AS clock_unsynchronised",
    params: [0],
    summary: 'Gateway {{ $labels.gateway }}: system clock not synchronised',
    description:
      "Readings sent without a time get the gateway's receive time, which is wrong until the clock is synchronised (NTP reachable from the site LAN?).",
  }),
  rule({
    uid: 'harbor-tables-missing',
    title: 'QuestDB not set up for the dashboards',
    seconds: 600,
    pending: '5m',
    sql: `SELECT count() AS tables_present
FROM tables()
WHERE table_name IN (${DASHBOARD_TABLES.map((t) => `'${t}'`).join(', ')})`,
    evaluator: 'lt',
    params: [DASHBOARD_TABLES.length],
    summary: `${whole('$values.A.Value')} of the ${DASHBOARD_TABLES.length} tables the dashboards read exist in QuestDB`,
    description:
      'The gateway creates these tables as it starts, before anything else. Missing for 5 minutes, no gateway has started against this QuestDB: it fails to start (see its log), or it writes to another QuestDB. This rule also goes to Error while QuestDB does not answer Grafana, for all the rules, which keep their last state then.',
    labels: { harbor: 'gateway' },
    errors: 'Error',
  }),
];

const HEADER = `# Alert rules of the Harbor dashboards, evaluated by Grafana every minute against QuestDB. Written by
# scripts/grafana-provisioning.mjs (edit the rules there, then run it). Each query answers one row
# per ship, series or gateway: text columns become the alert's labels, the one number is compared
# with the threshold, so every ship or gateway alerts on its own. Nobody is notified unless a
# contact point is configured (ALERT_EMAIL or ALERT_WEBHOOK_URL); the alerts are listed under
# Alerting in Grafana either way. Thresholds are the \`params\`, pending periods the \`for\`.
`;

export function alertRules() {
  const group = (/** @type {string} */ name, /** @type {object[]} */ rules) => ({
    orgId: 1,
    name,
    folder: 'Harbor',
    interval: '1m',
    rules,
  });
  const file = { apiVersion: 1, groups: [group('Harbor readings', readings), group('Harbor gateways', gateways)] };
  return `${HEADER}${stringify(file, { lineWidth: 0, blockQuote: 'literal' })}`;
}
