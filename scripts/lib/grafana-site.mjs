// The site manager's dashboard, "Comprehensive Telemetry Dashboard": ships at a glance, cargo with
// the catalogue's names, units and normal ranges, positions, radio link quality and the alerts.
import {
  byName,
  colouredText,
  byRegexp,
  dashboard,
  dashboardLink,
  DATASOURCE,
  GATEWAY_UID,
  gatewayStatePanel,
  LEGEND,
  panel,
  row,
  SITE_UID,
  steps,
  TABLE_OPTIONS,
  target,
} from './grafana-panels.mjs';
import {
  CARGO_FILTER,
  CATALOGUE,
  CARGO_ONLY,
  cargoNow,
  cargoState,
  IS_CARGO,
  joinShipNames,
  labelledBySite,
  LATITUDE_IDS,
  latestOf,
  LONGITUDE_IDS,
  matchesId,
  named,
  normalRange,
  REPORTING_MINUTES,
  SHIP_FILTER,
  SHIP_NAMES,
  SHIPS_SEEN,
  SITE_FILTER,
  siteOf,
} from './grafana-sql.mjs';

const variable = (/** @type {string} */ name, /** @type {string} */ label, /** @type {string} */ query) => ({
  name,
  label,
  type: 'query',
  datasource: DATASOURCE,
  query,
  definition: query,
  refresh: 2,
  multi: true,
  includeAll: true,
  sort: 1,
  regex: '',
  hide: 0,
  skipUrlSync: false,
  current: { selected: true, text: ['All'], value: ['$__all'] },
  options: [],
  allValue: "''",
});

/**
 * Sites seen within the window: a central QuestDB holds many, a site's own one. Readings stored
 * before sites existed have none; All alone shows them. LATEST ON stops at the newest reading of
 * each site, where DISTINCT reads the whole window.
 */
const SITE_VARIABLE = `SELECT site FROM (
  SELECT site, time FROM cargo_data WHERE time > ${SHIPS_SEEN}
  LATEST ON time PARTITION BY site
) WHERE site IS NOT NULL
ORDER BY site`;

/**
 * Ships of the selected sites seen within the window, by display name; an id that two sites name
 * apart (or one names and one does not) is listed by its id, and selects that id at every site.
 */
const SHIP_VARIABLE = `WITH seen AS (
  ${latestOf(`time > ${SHIPS_SEEN} AND ${SITE_FILTER}`, ['site', 'ship_id'], [])}
), ${SHIP_NAMES}, labels AS (
  SELECT s.ship_id, coalesce(n.name, s.ship_id) AS label FROM seen s ${joinShipNames('s')}
)
SELECT ship_id AS __value, CASE WHEN min(label) = max(label) THEN min(label) ELSE ship_id END AS __text
FROM labels
ORDER BY __text`;

/** Cargo ids of the selected ships within the window, by catalogue name; positions and radio fields are not cargo. */
const CARGO_VARIABLE = `WITH ids AS (
  SELECT cargo_id FROM (
    SELECT cargo_id FROM cargo_data
    WHERE time > ${SHIPS_SEEN} AND ${SHIP_FILTER}
    LATEST ON time PARTITION BY cargo_id
  ) WHERE ${IS_CARGO}
), ${named('ids', ['cargo_id'], 'cargo_id')}
SELECT cargo_id AS __value, cargo AS __text
FROM named
ORDER BY __text`;

/** A value rounded to the catalogue's decimals where it gives them (`m` is a row of `named`). */
const rounded = (/** @type {string} */ value) => `CASE WHEN m.decimals IS NULL THEN ${value} ELSE round(${value}, m.decimals) END`;

/** Each ship of the selection (a site and a ship id) seen within the window, with the time of its last reading. */
const SEEN_SHIPS = `seen AS (
  ${latestOf(`time > ${SHIPS_SEEN} AND ${SHIP_FILTER}`, ['site', 'ship_id'], [])}
)`;

/**
 * `recent`: the latest reading of each series of the selection where `where` holds, with the
 * count, lowest and highest of its readings in the last hour (null without one): a reading that
 * left the normal range and came back shows there. One pass over each, joined on the series.
 */
const latestWithLastHour = (/** @type {string} */ where) => `latest AS (
  ${latestOf(`${where} AND ${SHIP_FILTER}`)}
), hour AS (
  SELECT site, ship_id, cargo_id, count() AS readings, min(value) AS low, max(value) AS high
  FROM cargo_data WHERE time > dateadd('h', -1, now()) AND ${SHIP_FILTER}
), recent AS (
  SELECT l.time, l.site, l.ship_id, l.cargo_id, l.value, h.readings, h.low, h.high
  FROM latest l LEFT JOIN hour h ON l.site = h.site AND l.ship_id = h.ship_id AND l.cargo_id = h.cargo_id
), ${named('recent', ['time', 'site', 'ship_id', 'cargo_id', 'value', 'readings', 'low', 'high'])}`;

/** What the stat and table panels show when a query answers no rows. */
const NO_READINGS = 'No readings yet';

function glance() {
  const ships = panel(3, 'table', 'Ships at a glance', [0, 5, 16, 9], {
    targets: [
      target(`WITH ${SEEN_SHIPS}, ${latestWithLastHour(`time > ${SHIPS_SEEN}`)}, classified AS (
  SELECT time, site, ship_id, value, readings, low, high, normal_min, normal_max,
    CASE WHEN cargo_id ~ '${LATITUDE_IDS}' THEN 'latitude' WHEN cargo_id ~ '${LONGITUDE_IDS}' THEN 'longitude' WHEN ${IS_CARGO} THEN 'cargo' END AS field
  FROM named
), fields AS (
  SELECT site, ship_id, time, value, readings, low, high, normal_min, normal_max, field,
    row_number() OVER (PARTITION BY site, ship_id, field ORDER BY time DESC) AS newest
  FROM classified
), per_ship AS (
  SELECT site, ship_id,
    max(CASE WHEN field = 'latitude' AND newest = 1 THEN value END) AS latitude,
    max(CASE WHEN field = 'longitude' AND newest = 1 THEN value END) AS longitude,
    coalesce(sum(readings), 0) AS readings,
    sum(CASE WHEN field = 'cargo' AND time > dateadd('d', -1, now()) THEN 1 ELSE 0 END) AS series,
    sum(CASE WHEN field = 'cargo' AND time > dateadd('d', -1, now()) AND (value > normal_max OR value < normal_min) THEN 1 ELSE 0 END) AS outside,
    sum(CASE WHEN field = 'cargo' AND (high > normal_max OR low < normal_min) THEN 1 ELSE 0 END) AS left_range,
    sum(CASE WHEN field = 'cargo' AND time > dateadd('d', -1, now()) AND (normal_min IS NOT NULL OR normal_max IS NOT NULL) THEN 1 ELSE 0 END) AS ranged
  FROM fields
), ${SHIP_NAMES}
SELECT ${siteOf('s')}, coalesce(n.name, s.ship_id) AS ship, datediff('s', s.time, now()) AS last_seen, coalesce(p.readings, 0) AS readings_last_hour,
  p.latitude, p.longitude,
  CASE
    WHEN p.outside > 0 THEN concat(p.outside, ' of ', p.series, ' outside the normal range')
    WHEN p.left_range > 0 THEN concat('within the normal range now; ', p.left_range, ' left it in the last hour')
    WHEN p.ranged > 0 THEN 'all within the normal range'
    WHEN p.series > 0 THEN 'no normal range set'
    ELSE 'no cargo reading in the last day'
  END AS cargo,
  s.ship_id
FROM seen s
LEFT JOIN per_ship p ON s.site = p.site AND s.ship_id = p.ship_id
${joinShipNames('s')}
ORDER BY ship, site`),
    ],
    description: `One row per ship of each site seen within the window (30 days unless SHIPS_SEEN_DAYS says otherwise): how long since its last reading (red after ${REPORTING_MINUTES} min), its readings in the last hour, its last position within the window, and its worst cargo state by the catalogue's normal ranges: cargo outside the range now (red), or back within it after leaving it in the last hour (orange). Click a ship to show only it.`,
    defaults: { custom: { align: 'auto', filterable: true }, noValue: NO_READINGS },
    overrides: [
      byName('ship', {
        links: [
          {
            // biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's own ${name} syntax, not a template literal
            title: 'Show ${__data.fields.ship}',
            url: `/d/${SITE_UID}?var-ship=\${__data.fields.ship_id:percentencode}&var-site=\${__data.fields.site:percentencode}&\${__url_time_range}`,
          },
        ],
      }),
      byName('last_seen', {
        displayName: 'last seen',
        unit: 'dtdurations',
        thresholds: steps(['green'], [REPORTING_MINUTES * 60, 'red']),
        'custom.cellOptions': { type: 'color-text' },
      }),
      byName('readings_last_hour', { displayName: 'readings, last hour', decimals: 0 }),
      byName('latitude', { decimals: 5 }),
      byName('longitude', { decimals: 5 }),
      colouredText('cargo', [
        ['outside', 'red'],
        ['left it', 'orange'],
        ['^all within', 'green'],
      ]),
      byName('ship_id', { displayName: 'id' }),
    ],
    options: TABLE_OPTIONS,
  });
  const alerts = {
    id: 4,
    type: 'alertlist',
    title: 'Alerts',
    gridPos: { h: 9, w: 8, x: 16, y: 5 },
    description:
      'Alerts of this site that fire or are about to: a ship or gateway silent, cargo outside its normal range, readings waiting in the gateway. Nobody is notified unless ALERT_EMAIL or ALERT_WEBHOOK_URL names someone.',
    options: {
      viewMode: 'list',
      groupMode: 'default',
      groupBy: [],
      maxItems: 20,
      sortOrder: 3,
      dashboardAlerts: false,
      alertName: '',
      alertInstanceLabelFilter: '',
      datasource: '',
      folder: { uid: 'harbor', title: 'Harbor' },
      showInstances: true,
      showInactiveAlerts: false,
      stateFilter: { firing: true, pending: true, recovering: true, noData: false, normal: false, error: true },
    },
  };
  return [ships, alerts];
}

function overview() {
  const reporting = panel(1, 'stat', 'Ships reporting now', [0, 0, 6, 4], {
    targets: [
      target(`WITH ${SEEN_SHIPS}
SELECT coalesce(sum(CASE WHEN time > dateadd('m', -${REPORTING_MINUTES}, now()) THEN 1 ELSE 0 END), 0) AS reporting,
  coalesce(sum(CASE WHEN time > dateadd('m', -${REPORTING_MINUTES}, now()) THEN 0 ELSE 1 END), 0) AS silent,
  count() AS seen
FROM seen`),
    ],
    description: `Ships with a reading in the last ${REPORTING_MINUTES} minutes, ships silent longer (red from one), and the ships seen within the window (30 days unless SHIPS_SEEN_DAYS says otherwise); the same ship id at two sites is two ships.`,
    defaults: { unit: 'short', decimals: 0, color: { mode: 'fixed', fixedColor: 'text' } },
    overrides: [
      byName('reporting', { displayName: 'reporting now' }),
      byName('silent', { displayName: 'silent', color: { mode: 'thresholds' }, thresholds: steps(['green'], [1, 'red']) }),
      byName('seen', { displayName: 'seen' }),
    ],
    options: statOptions('value_and_name'),
  });
  const outside = panel(2, 'stat', 'Cargo outside the normal range', [6, 0, 6, 4], {
    targets: [
      target(`WITH ${latestWithLastHour("time > dateadd('d', -1, now())")}
SELECT coalesce(sum(CASE WHEN m.value > m.normal_max OR m.value < m.normal_min THEN 1 ELSE 0 END), 0) AS outside,
  coalesce(sum(CASE WHEN m.high > m.normal_max OR m.low < m.normal_min THEN 1 ELSE 0 END), 0) AS left_last_hour
FROM named m
WHERE ${CARGO_ONLY}`),
    ],
    description:
      "Cargo series whose latest reading of the last day lies outside the catalogue's normal range (Cargo now lists them), and those with a reading outside it in the last hour, back within it since or not (Cargo summary shows how far). Ids without a range in the catalogue are not counted.",
    defaults: { unit: 'short', decimals: 0, color: { mode: 'thresholds' }, thresholds: steps(['green'], [1, 'red']) },
    overrides: [
      byName('outside', { displayName: 'outside now' }),
      byName('left_last_hour', { displayName: 'outside in the last hour', thresholds: steps(['green'], [1, 'orange']) }),
    ],
    options: statOptions('value_and_name'),
  });
  const readings = panel(5, 'stat', 'Readings', [12, 0, 5, 4], {
    targets: [
      target(`SELECT count() AS readings
FROM cargo_data
WHERE $__timeFilter(time) AND ${SHIP_FILTER} AND ${CARGO_FILTER}`),
    ],
    description: 'Readings of the selected ships and cargo in the time range.',
    defaults: { unit: 'short', decimals: 0, color: { mode: 'fixed', fixedColor: 'blue' } },
    options: statOptions('value'),
  });
  const gateway = gatewayStatePanel(6, [17, 0, 7, 4]);
  gateway.title = 'Gateway';
  gateway.description = `${gateway.description} The Gateway dashboard has the details.`;
  gateway.links = [{ title: 'Gateway dashboard', url: `/d/${GATEWAY_UID}?\${__url_time_range}` }];
  return [reporting, outside, readings, gateway];
}

const statOptions = (/** @type {string} */ textMode) => ({
  reduceOptions: { calcs: ['lastNotNull'], fields: '', values: false },
  colorMode: 'value',
  graphMode: 'none',
  textMode,
  justifyMode: 'auto',
  orientation: 'auto',
});

/** @param {number} y */
function cargo(y) {
  const now = panel(8, 'table', 'Cargo now', [0, y + 1, 24, 9], {
    targets: [
      target(`WITH ${cargoNow(`$__timeFilter(time) AND ${SHIP_FILTER} AND ${CARGO_FILTER}`)}, ${SHIP_NAMES}
SELECT ${siteOf('m')}, coalesce(n.name, m.ship_id) AS ship, m.cargo, ${rounded('m.value')} AS value,
  coalesce(m.unit, '') AS unit, ${normalRange} AS normal_range, ${cargoState('m.value')} AS state,
  m.time, m.ship_id, m.cargo_id
FROM named m
${joinShipNames('m')}
WHERE ${CARGO_ONLY}
ORDER BY ship, site, cargo`),
    ],
    description:
      "The latest reading of each ship's cargo in the time range, named, with its unit and normal range from the site's catalogue: red above the range, blue below it. Ids the catalogue does not know show as they are. Positions and radio fields are in their own rows below.",
    defaults: { custom: { align: 'auto', filterable: true }, noValue: NO_READINGS },
    overrides: [
      byName('state', {
        'custom.cellOptions': { type: 'color-background' },
        mappings: [
          {
            type: 'value',
            options: {
              above: { text: 'above the range', color: 'red', index: 0 },
              below: { text: 'below the range', color: 'blue', index: 1 },
              normal: { text: 'normal', color: 'green', index: 2 },
              'no range': { text: 'no range set', color: 'transparent', index: 3 },
            },
          },
        ],
      }),
      byName('normal_range', { displayName: 'normal range' }),
      byName('time', { unit: 'dateTimeAsIso' }),
      byName('ship_id', { displayName: 'ship id' }),
      byName('cargo_id', { displayName: 'cargo id' }),
    ],
    options: TABLE_OPTIONS,
  });
  // biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's own ${name} syntax, not a template literal
  const overTime = panel(9, 'timeseries', 'Values over time: ${cargo:text}', [0, y + 10, 12, 9], {
    targets: [
      target(
        `WITH v AS (
  SELECT time, site, ship_id, avg(value) AS value
  FROM cargo_data
  WHERE $__timeFilter(time) AND ${SHIP_FILTER} AND ${CARGO_FILTER}
  SAMPLE BY \${__interval_ms}T
), ${SHIP_NAMES}, lines AS (
  SELECT v.time, v.site, v.value, coalesce(n.name, v.ship_id) AS label FROM v ${joinShipNames('v')}
)
SELECT time, label AS metric, value
FROM (${labelledBySite('lines', ['time', 'value'])})
ORDER BY time`,
        { format: 'time_series' },
      ),
      target(
        `WITH ${CATALOGUE}
SELECT CASE WHEN c.unit IS NULL THEN NULL ELSE concat('suffix:', c.unit) END AS unit, c.decimals, c.normal_min AS low, c.normal_max AS high
FROM catalogue c
WHERE ${matchesId('$cargo')}
ORDER BY c.position
LIMIT 1`,
        { refId: 'B' },
      ),
    ],
    description:
      "One panel per selected cargo id, a line per ship: the average in each time bucket (Grafana's interval, in milliseconds). The unit, decimals and the normal range (dashed lines) come from the site's catalogue.",
    repeat: 'cargo',
    repeatDirection: 'h',
    maxPerRow: 2,
    transformations: [
      {
        id: 'configFromData',
        options: {
          configRefId: 'B',
          applyTo: { id: 'byType', options: 'number' },
          mappings: [
            { fieldName: 'unit', handlerKey: 'unit' },
            { fieldName: 'decimals', handlerKey: 'decimals' },
            { fieldName: 'low', handlerKey: 'threshold1' },
            { fieldName: 'high', handlerKey: 'threshold1' },
          ],
        },
      },
    ],
    defaults: {
      custom: {
        drawStyle: 'line',
        lineWidth: 1,
        fillOpacity: 0,
        showPoints: 'auto',
        spanNulls: false,
        thresholdsStyle: { mode: 'dashed' },
      },
      color: { mode: 'palette-classic' },
      thresholds: steps(['transparent']),
    },
    options: LEGEND,
  });
  const summary = panel(10, 'table', 'Cargo summary', [0, y + 19, 24, 8], {
    targets: [
      target(`WITH s AS (
  SELECT site, ship_id, cargo_id, min(value) AS min, avg(value) AS avg, max(value) AS max, count() AS readings
  FROM cargo_data
  WHERE $__timeFilter(time) AND ${SHIP_FILTER} AND ${CARGO_FILTER}
), ids AS (
  SELECT cargo_id FROM cargo_data
  WHERE $__timeFilter(time) AND ${SHIP_FILTER} AND ${CARGO_FILTER}
  LATEST ON time PARTITION BY cargo_id
), ${named('ids', ['cargo_id'], 'cargo_id')}, ${SHIP_NAMES}
SELECT ${siteOf('s')}, coalesce(n.name, s.ship_id) AS ship, m.cargo,
  ${rounded('s.min')} AS min, ${rounded('s.avg')} AS avg, ${rounded('s.max')} AS max, coalesce(m.unit, '') AS unit,
  CASE
    WHEN s.max > m.normal_max AND s.min < m.normal_min THEN 'above and below'
    WHEN s.max > m.normal_max THEN 'above'
    WHEN s.min < m.normal_min THEN 'below'
    WHEN m.normal_min IS NULL AND m.normal_max IS NULL THEN 'no range'
    ELSE 'normal'
  END AS range_state, s.readings
FROM s
JOIN named m ON s.cargo_id = m.cargo_id
${joinShipNames('s')}
WHERE ${CARGO_ONLY}
ORDER BY ship, site, cargo`),
    ],
    // Positions and radio fields are left out by the cargo id of `named` (a few rows): QuestDB would
    // push a filter on `s` down into the scan, a regular expression on every reading.
    description:
      "Lowest, average and highest reading and the number of readings of each ship and cargo id in the time range, and whether any left the catalogue's normal range: a spike that came back shows here in red (above) or blue (below).",
    defaults: { custom: { align: 'auto', filterable: true }, noValue: NO_READINGS },
    overrides: [
      byName('range_state', {
        displayName: 'in the time range',
        'custom.cellOptions': { type: 'color-background' },
        mappings: [
          {
            type: 'value',
            options: {
              'above and below': { text: 'went above and below the range', color: 'red', index: 0 },
              above: { text: 'went above the range', color: 'red', index: 1 },
              below: { text: 'went below the range', color: 'blue', index: 2 },
              normal: { text: 'stayed within the range', color: 'green', index: 3 },
              'no range': { text: 'no range set', color: 'transparent', index: 4 },
            },
          },
        ],
      }),
      byName('readings', { decimals: 0 }),
    ],
    options: TABLE_OPTIONS,
  });
  return [row(7, 'Cargo', y), now, overTime, summary];
}

/** The map's queries: GPS halves paired within 2 s into positions (the track), and each device's latest. */
const positionsSql = (/** @type {boolean} */ latest) => `WITH lat AS (
  SELECT time, site, ship_id, regexp_replace(cargo_id, '(?i)^(?:(.*)_)?(?:latitude|lat)$', '$1') AS prefix, value AS latitude
  FROM cargo_data
  WHERE $__timeFilter(time) AND ${SHIP_FILTER} AND cargo_id ~ '${LATITUDE_IDS}'
), lon AS (
  SELECT time, site, ship_id, regexp_replace(cargo_id, '(?i)^(?:(.*)_)?(?:longitude|long|lon|lng)$', '$1') AS prefix, value AS longitude
  FROM cargo_data
  WHERE $__timeFilter(time) AND ${SHIP_FILTER} AND cargo_id ~ '${LONGITUDE_IDS}'
), last_lat AS (
  SELECT max(time) AS fix, site, ship_id, prefix, last(latitude) AS latitude FROM lat SAMPLE BY \${__interval_ms}T
), last_lon AS (
  SELECT max(time) AS fix, site, ship_id, prefix, last(longitude) AS longitude FROM lon SAMPLE BY \${__interval_ms}T
), pairs AS (
  SELECT l.fix AS lat_time, lon.time AS lon_time, l.site, l.ship_id, l.prefix, l.latitude, lon.longitude
  FROM ((SELECT * FROM last_lat ORDER BY fix) timestamp(fix)) l
  ASOF JOIN lon ON (site, ship_id, prefix) TOLERANCE 2s
  UNION
  SELECT lat.time, o.fix, o.site, o.ship_id, o.prefix, lat.latitude, o.longitude
  FROM ((SELECT * FROM last_lon ORDER BY fix) timestamp(fix)) o
  ASOF JOIN lat ON (site, ship_id, prefix) TOLERANCE 2s
), candidates AS (
  SELECT CASE WHEN lat_time > lon_time THEN lat_time ELSE lon_time END AS time, site, ship_id,
    CASE WHEN prefix = '' THEN ship_id ELSE concat(ship_id, ' / ', prefix) END AS device, latitude, longitude,
    abs(cast(lat_time AS long) - cast(lon_time AS long)) AS gap
  FROM pairs
  WHERE lat_time IS NOT NULL AND lon_time IS NOT NULL
), positions AS (
  SELECT time, site, ship_id, device, latitude, longitude,
    row_number() OVER (PARTITION BY site, device, timestamp_floor('\${__interval_ms}T', time) ORDER BY gap, time DESC) AS choice
  FROM candidates
)
SELECT time, coalesce(site, '') AS site, ship_id, device, latitude, longitude
${
  latest
    ? `FROM ((SELECT * FROM positions WHERE choice = 1 ORDER BY time) timestamp(time))
LATEST ON time PARTITION BY site, device
ORDER BY device, site`
    : `FROM positions
WHERE choice = 1
ORDER BY device, site, time`
}`;

/** @param {number} y @param {Record<string, any>} mapPanel */
function positions(y, mapPanel) {
  const details = panel(12, 'table', 'Position details', [16, y + 1, 8, 14], {
    targets: [
      target(`WITH recent AS (
  ${latestOf(`$__timeFilter(time) AND ${SHIP_FILTER}`)}
), fields AS (
  SELECT site, ship_id, time, value,
    CASE
      WHEN cargo_id ~ '${LATITUDE_IDS}' THEN 'latitude'
      WHEN cargo_id ~ '${LONGITUDE_IDS}' THEN 'longitude'
      WHEN cargo_id ~ '(?i)^(.*_)?(altitude|alt)$' THEN 'altitude'
      WHEN cargo_id ~ '(?i)^(.*_)?(satellites|sats)$' THEN 'satellites'
    END AS field
  FROM recent
), newest AS (
  SELECT site, ship_id, time, value, field FROM (
    SELECT site, ship_id, time, value, field, row_number() OVER (PARTITION BY site, ship_id, field ORDER BY time DESC) AS pick
    FROM fields WHERE field IS NOT NULL
  ) WHERE pick = 1
), ${SHIP_NAMES}
SELECT ${siteOf('p')}, coalesce(n.name, p.ship_id) AS ship, p.latitude, p.longitude, p.altitude, p.satellites, p.time AS fix_time, p.ship_id
FROM (
  SELECT site, ship_id, max(CASE WHEN field = 'latitude' THEN value END) AS latitude, max(CASE WHEN field = 'longitude' THEN value END) AS longitude,
    max(CASE WHEN field = 'altitude' THEN value END) AS altitude, max(CASE WHEN field = 'satellites' THEN value END) AS satellites,
    max(time) AS time
  FROM newest
) p
${joinShipNames('p')}
ORDER BY ship, site`),
    ],
    description:
      "Each ship's latest position fields in the time range (latitude and longitude in any naming the map pairs, altitude, satellites): position readings, not cargo.",
    defaults: { custom: { align: 'auto' }, noValue: 'No positions in the time range' },
    overrides: [
      byName('latitude', { decimals: 5 }),
      byName('longitude', { decimals: 5 }),
      byName('altitude', { unit: 'lengthm' }),
      byName('satellites', { decimals: 0 }),
      byName('fix_time', { displayName: 'last fix', unit: 'dateTimeFromNow' }),
      byName('ship_id', { displayName: 'id' }),
    ],
    options: TABLE_OPTIONS,
  });
  return [row(13, 'Positions', y), { ...mapPanel, gridPos: { h: 14, w: 16, x: 0, y: y + 1 } }, details];
}

/** The radio fields of TTN uplinks: rssi, snr, channel rssi, spreading factor, bandwidth, frequency. */
/** @param {number} y */
function link(y) {
  const quality = panel(15, 'timeseries', 'Radio link quality', [0, y + 1, 12, 8], {
    targets: [
      target(
        `WITH v AS (
  SELECT time, site, ship_id, cargo_id, avg(value) AS value
  FROM cargo_data
  WHERE $__timeFilter(time) AND ${SHIP_FILTER} AND cargo_id IN ('rssi', 'snr')
  SAMPLE BY \${__interval_ms}T
), ${SHIP_NAMES}, lines AS (
  SELECT v.time, v.site, v.cargo_id, v.value, coalesce(n.name, v.ship_id) AS label FROM v ${joinShipNames('v')}
)
SELECT time, concat(label, ' ', cargo_id) AS metric, value
FROM (${labelledBySite('lines', ['time', 'cargo_id', 'value'])})
ORDER BY time`,
        { format: 'time_series' },
      ),
    ],
    description:
      "Signal strength (RSSI, dBm) and signal-to-noise ratio (SNR, dB) of each LoRaWAN device's uplinks, as The Things Network's first gateway received them.",
    defaults: { custom: { drawStyle: 'line', lineWidth: 1, fillOpacity: 0, showPoints: 'auto' }, color: { mode: 'palette-classic' } },
    overrides: [byRegexp('.* rssi$', { unit: 'dBm' }), byRegexp('.* snr$', { unit: 'dB' })],
    options: LEGEND,
  });
  const now = panel(16, 'table', 'Radio link now', [12, y + 1, 12, 8], {
    targets: [
      target(`WITH recent AS (
  ${latestOf(`$__timeFilter(time) AND ${SHIP_FILTER} AND cargo_id IN ('rssi', 'channel_rssi', 'snr', 'spreading_factor', 'bandwidth', 'frequency')`)}
), ${SHIP_NAMES}
SELECT ${siteOf('r')}, coalesce(n.name, r.ship_id) AS ship, r.rssi, r.channel_rssi, r.snr, r.spreading_factor, r.bandwidth, r.frequency, r.time AS last_uplink, r.ship_id
FROM (
  SELECT site, ship_id, max(CASE WHEN cargo_id = 'rssi' THEN value END) AS rssi, max(CASE WHEN cargo_id = 'channel_rssi' THEN value END) AS channel_rssi,
    max(CASE WHEN cargo_id = 'snr' THEN value END) AS snr, max(CASE WHEN cargo_id = 'spreading_factor' THEN value END) AS spreading_factor,
    max(CASE WHEN cargo_id = 'bandwidth' THEN value END) AS bandwidth, max(CASE WHEN cargo_id = 'frequency' THEN value END) AS frequency,
    max(time) AS time
  FROM recent
) r
${joinShipNames('r')}
ORDER BY ship, site`),
    ],
    description: "Each LoRaWAN device's latest radio fields in the time range.",
    defaults: { custom: { align: 'auto' }, noValue: 'No LoRaWAN uplinks in the time range' },
    overrides: [
      byName('rssi', { unit: 'dBm' }),
      byName('channel_rssi', { unit: 'dBm', displayName: 'channel rssi' }),
      byName('snr', { unit: 'dB' }),
      byName('spreading_factor', { displayName: 'SF', decimals: 0 }),
      byName('bandwidth', { unit: 'hertz' }),
      byName('frequency', { unit: 'hertz' }),
      byName('last_uplink', { displayName: 'last uplink', unit: 'dateTimeFromNow' }),
      byName('ship_id', { displayName: 'id' }),
    ],
    options: TABLE_OPTIONS,
  });
  return [row(14, 'Radio link quality', y), quality, now];
}

/**
 * A geomap layer of circle markers at the latitude and longitude of query `refId`'s rows.
 * @param {string} name @param {string} refId @param {Record<string, unknown>} style size, colour, opacity, text
 */
const markers = (name, refId, { size, color, opacity, ...text }) => ({
  type: 'markers',
  name,
  tooltip: true,
  filterData: { id: 'byRefId', options: refId },
  location: { mode: 'coords', latitude: 'latitude', longitude: 'longitude' },
  config: {
    showLegend: false,
    style: { size, color, opacity, symbol: { mode: 'fixed', fixed: 'img/icons/marker/circle.svg' }, ...text },
  },
});

/** The Geomap of the positions: the track of each device and its latest position, labelled. */
const MAP = {
  id: 11,
  type: 'geomap',
  title: 'Positions and tracks',
  datasource: DATASOURCE,
  targets: [target(positionsSql(false)), target(positionsSql(true), { refId: 'B' })],
  description:
    'Latitude and longitude readings of the same ship at the same time, paired by name (latitude/longitude, lat/lon, lat/long, lat/lng, with or without a device prefix such as gps_lat/gps_lon). Small dots: the track of each device, its last position in each time bucket. Large markers: the latest position of each device, labelled. Without internet access the base map stays blank; the positions are drawn either way.',
  maxDataPoints: 200,
  fieldConfig: { defaults: { color: { mode: 'fixed', fixedColor: 'blue' } }, overrides: [] },
  options: {
    view: { id: 'fit', allLayers: true, lat: 0, lon: 0, zoom: 2, padding: 10 },
    controls: { showZoom: true, mouseWheelZoom: true, showAttribution: true, showScale: true, showMeasure: false, showDebug: false },
    tooltip: { mode: 'details' },
    basemap: { type: 'default', name: 'Base map', config: {} },
    layers: [
      markers('Tracks', 'A', { size: { fixed: 3 }, color: { fixed: 'blue' }, opacity: 0.6 }),
      markers('Latest position', 'B', {
        size: { fixed: 9 },
        color: { fixed: 'red' },
        opacity: 0.9,
        text: { mode: 'field', field: 'device', fixed: '' },
        textConfig: { fontSize: 12, offsetX: 0, offsetY: -14, textAlign: 'center', textBaseline: 'bottom' },
      }),
    ],
  },
};

export function siteDashboard() {
  const top = [...overview(), row(17, 'Ships', 4), ...glance()];
  const cargoPanels = cargo(14);
  const positionPanels = positions(42, MAP);
  const linkPanels = link(57);
  return dashboard({
    uid: SITE_UID,
    title: 'Comprehensive Telemetry Dashboard',
    description:
      "The site at a glance, for its manager: the ships and how recently they reported, their cargo named and measured against the catalogue's normal ranges, positions, radio link quality and the alerts. The gateway's own health is on the Gateway dashboard.",
    tags: ['harbor', 'telemetry', 'site'],
    links: [dashboardLink('Gateway', GATEWAY_UID, "The gateway's queue, sinks, keys, flush errors and clock")],
    templating: [
      variable('site', 'Site', SITE_VARIABLE),
      variable('ship', 'Ship', SHIP_VARIABLE),
      variable('cargo', 'Cargo', CARGO_VARIABLE),
    ],
    panels: [...top, ...cargoPanels, ...positionPanels, ...linkPanels],
  });
}
