// Building blocks of the provisioned dashboards: the data source, SQL targets, panels and their
// field settings, in the JSON of Grafana's dashboard schema (schemaVersion 41).
import { GATEWAY_LAST_WORD } from './grafana-sql.mjs';

export const DATASOURCE = { type: 'grafana-postgresql-datasource', uid: 'questdb' };
export const SITE_UID = 'harbor-telemetry';
export const GATEWAY_UID = 'harbor-gateway';

/**
 * One SQL query of a panel, as Grafana's code editor stores it.
 * @param {string} rawSql
 * @param {{ format?: 'table' | 'time_series', refId?: string }} [options]
 */
export const target = (rawSql, { format = 'table', refId = 'A' } = {}) => ({
  refId,
  datasource: DATASOURCE,
  editorMode: 'code',
  format,
  rawQuery: true,
  rawSql,
});

/**
 * @typedef {object} PanelSettings
 * @property {object[]} targets
 * @property {string} description
 * @property {Record<string, unknown>} [defaults]  fieldConfig.defaults
 * @property {object[]} [overrides]  fieldConfig.overrides
 * @property {Record<string, unknown>} [options]
 * @property {unknown} [repeat]
 * @property {unknown} [repeatDirection]
 * @property {unknown} [maxPerRow]
 * @property {unknown} [transformations]
 * @property {unknown} [maxDataPoints]
 */

/**
 * A panel: its place on the 24-column grid (x, y, width, height), its queries and its settings.
 * @param {number} id
 * @param {string} type
 * @param {string} title
 * @param {[number, number, number, number]} gridPos
 * @param {PanelSettings} settings
 * @returns {Record<string, any>}
 */
export function panel(id, type, title, [x, y, w, h], { targets, description, defaults = {}, overrides = [], options = {}, ...rest }) {
  return {
    id,
    type,
    title,
    datasource: DATASOURCE,
    gridPos: { h, w, x, y },
    targets,
    description,
    ...rest,
    fieldConfig: { defaults, overrides },
    options,
  };
}

/** @param {number} id @param {string} title @param {number} y */
export const row = (id, title, y) => ({ id, type: 'row', title, collapsed: false, gridPos: { h: 1, w: 24, x: 0, y }, panels: [] });

/**
 * An override of the fields named `name`: `{ unit: 'dBm' }` sets the property `unit`.
 * @param {string} name
 * @param {Record<string, unknown>} properties
 */
export const byName = (name, properties) => ({
  matcher: { id: 'byName', options: name },
  properties: Object.entries(properties).map(([id, value]) => ({ id, value })),
});

/** @param {string} pattern @param {Record<string, unknown>} properties */
export const byRegexp = (pattern, properties) => ({
  matcher: { id: 'byRegexp', options: pattern },
  properties: Object.entries(properties).map(([id, value]) => ({ id, value })),
});

/**
 * The fields named `name` as text coloured by regular expression, first match wins: `[pattern, colour]`.
 * @param {string} name
 * @param {[string, string][]} pairs
 */
export const colouredText = (name, pairs) =>
  byName(name, {
    'custom.cellOptions': { type: 'color-text' },
    mappings: pairs.map(([pattern, color], index) => ({ type: 'regex', options: { pattern, result: { color, index } } })),
  });

/**
 * Thresholds from a base colour: `steps(['green'], [900, 'red'])`.
 * @param {[string]} base
 * @param {...[number, string]} rest
 */
export const steps = ([base], ...rest) => ({
  mode: 'absolute',
  steps: [{ color: base, value: null }, ...rest.map(([value, color]) => ({ color, value }))],
});

export const TABLE_OPTIONS = { showHeader: true, cellHeight: 'sm', footer: { show: false } };
export const LEGEND = { legend: { displayMode: 'list', placement: 'bottom', showLegend: true }, tooltip: { mode: 'multi', sort: 'desc' } };

/**
 * Words for a time span in SQL: `45 s`, `12 min`, `5 h`, `3 d`, as the gateway words its state.
 * @param {string} time  an SQL expression
 */
export const ago = (time) => `CASE
      WHEN datediff('s', ${time}, now()) < 60 THEN concat(datediff('s', ${time}, now()), ' s')
      WHEN datediff('s', ${time}, now()) < 3600 THEN concat(datediff('s', ${time}, now()) / 60, ' min')
      WHEN datediff('s', ${time}, now()) < 172800 THEN concat(datediff('s', ${time}, now()) / 3600, ' h')
      ELSE concat(datediff('s', ${time}, now()) / 86400, ' d') END`;

/**
 * Each gateway's state in words, from its last word: the state it reported, `stopped — why`,
 * `starting`, or `no report for …` once its last row is over 2 minutes old (it writes one every 10 s).
 */
/** @param {number} id @param {[number, number, number, number]} gridPos */
export function gatewayStatePanel(id, gridPos) {
  return panel(id, 'table', 'Gateway state', gridPos, {
    targets: [
      target(`WITH ${GATEWAY_LAST_WORD}
SELECT gateway,
  CASE
    WHEN state = 'stopped' THEN concat(text, ' (', ${ago('time')}, ' ago)')
    WHEN kind = 'started' AND time < dateadd('m', -2, now()) THEN concat('no report since its start ', ${ago('time')}, ' ago — it failed to start, or cannot reach QuestDB')
    WHEN kind = 'started' THEN concat('starting: ', text)
    WHEN time < dateadd('m', -2, now()) THEN concat('no report for ', ${ago('time')}, ' — stopped without a word (crash or power cut), or cut off from QuestDB')
    ELSE coalesce(text, 'reporting; this gateway version does not name its state')
  END AS state,
  time AS last_report
FROM last
WHERE kind != 'retired'
ORDER BY gateway`),
    ],
    description:
      "Each gateway's state as it last reported it (every 10 s): delivering, catching up, buffering, refusing; stopped with the reason it gave (an upgrade, a restart, a shutdown); failed to start, and why; or no report for a while, when it stopped without a word or lost its way to QuestDB.",
    defaults: { custom: { align: 'auto' }, noValue: 'No gateway has reported yet' },
    overrides: [
      colouredText('state', [
        ['^delivering$', 'green'],
        ['^delivering, .*', 'yellow'],
        ['^catching up.*', 'yellow'],
        ['^(stopped|starting).*', 'blue'],
        ['^(buffering|refusing|no report|failed to start).*', 'red'],
      ]),
      byName('gateway', { 'custom.width': 200 }),
      byName('last_report', { 'custom.width': 220, unit: 'dateTimeAsIso' }),
    ],
    options: TABLE_OPTIONS,
  });
}

/**
 * Gateway starts (a region from its last report before, so the time it was down shows), stops with
 * their reason, outages of QuestDB (from their start to their end) and renamed gateways, from
 * `gateway_events`, on every time series of the dashboard.
 */
export const GATEWAY_ANNOTATIONS = {
  name: 'Gateway events',
  enable: true,
  hide: false,
  iconColor: 'rgba(255, 152, 48, 1)',
  datasource: DATASOURCE,
  target: target(`WITH starts AS (
  SELECT time, gateway, text, reason FROM gateway_events WHERE $__timeFilter(time) AND event = 'started'
)
SELECT coalesce(h.time, s.time) AS time, s.time AS timeend, concat(s.gateway, ': ', s.text) AS text, concat('gateway,started,', s.reason) AS tags
FROM starts s ASOF JOIN gateway_health h ON (gateway)
UNION ALL
SELECT time, coalesce(until, time) AS timeend, concat(gateway, ': ', text) AS text, concat('gateway,', event, ',', reason) AS tags
FROM gateway_events WHERE $__timeFilter(time) AND event != 'started'
ORDER BY time`),
};

/**
 * The dashboard around its panels: time, refresh, annotations, links, variables.
 * @param {{ uid: string, title: string, description: string, tags: string[], links: object[], templating: object[], panels: object[] }} parts
 */
export function dashboard({ uid, title, description, tags, links, templating, panels }) {
  return {
    uid,
    title,
    description,
    tags,
    timezone: 'browser',
    editable: true,
    graphTooltip: 1,
    fiscalYearStartMonth: 0,
    liveNow: false,
    refresh: '30s',
    schemaVersion: 41,
    version: 1,
    time: { from: 'now-6h', to: 'now' },
    timepicker: { refresh_intervals: ['10s', '30s', '1m', '5m', '15m', '1h'] },
    links,
    annotations: {
      list: [
        {
          builtIn: 1,
          datasource: { type: 'grafana', uid: '-- Grafana --' },
          enable: true,
          hide: true,
          iconColor: 'rgba(0, 211, 255, 1)',
          name: 'Annotations & Alerts',
          type: 'dashboard',
        },
        GATEWAY_ANNOTATIONS,
      ],
    },
    templating: { list: templating },
    panels,
  };
}

/**
 * A link in the dashboard's header to another dashboard, keeping the time range.
 * @param {string} title @param {string} uid @param {string} tooltip
 */
export const dashboardLink = (title, uid, tooltip) => ({
  type: 'link',
  title,
  tooltip,
  url: `/d/${uid}`,
  icon: 'dashboard',
  keepTime: true,
  includeVars: false,
  targetBlank: false,
  asDropdown: false,
  tags: [],
});
