// Expands the SQL of the provisioned dashboard the way Grafana's PostgreSQL data source does before
// it reaches QuestDB, so tests and the query benchmark run exactly what a browser would send:
// dashboard variables first (in the browser), then the data source's macros (in Grafana's server).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { projectRoot } from './paths.mjs';

const PROVISIONING = join(projectRoot, 'grafana', 'provisioning');
/** The site manager's dashboard, "Comprehensive Telemetry Dashboard". */
export const DASHBOARD_PATH = join(PROVISIONING, 'dashboards', 'harbor', 'comprehensive-telemetry.json');
/** The operator's dashboard, "Harbor Gateway". */
export const GATEWAY_DASHBOARD_PATH = join(PROVISIONING, 'dashboards', 'harbor', 'gateway.json');
export const ALERT_RULES_PATH = join(PROVISIONING, 'alerting', 'harbor-rules.yaml');

/**
 * @typedef {{ from: number, to: number }} TimeRange  epoch milliseconds
 * @typedef {{ multi?: boolean, includeAll?: boolean, allValue?: string | null }} VariableModel
 * @typedef {VariableModel & { name: string, type: string, refresh?: number }} DashboardVariable  one of the dashboard's templating.list
 * @typedef {{ model: VariableModel, value: string | string[], options?: string[] }} VariableValue
 *   value `$__all` is the All choice; `options` are the values the variable's query returned
 * @typedef {object} ExpandOptions
 * @property {TimeRange} range
 * @property {Record<string, VariableValue>} [variables]
 * @property {number} [maxDataPoints]  panel width in pixels, Grafana's default for the bucket count
 * @property {number} [minIntervalMs]   the data source's or panel's "Min interval"
 */

/** @returns {any} the dashboard JSON, the site manager's unless another path is given */
export function loadDashboard(path = DASHBOARD_PATH) {
  return JSON.parse(readFileSync(path, 'utf8'));
}

/** Grafana quotes each value of a multi-value or include-all variable for SQL data sources. */
const quoteLiteral = (/** @type {string} */ value) => `'${value.replace(/'/g, "''")}'`;

export const ALL = '$__all';

/**
 * One variable's text in SQL, as the SQL data sources' interpolateVariable formats it: values of
 * multi-value or include-all variables quoted and comma-separated, other values with quotes doubled.
 * All is the custom all value as written, unformatted, or else every option the query returned.
 * @param {VariableValue} variable
 */
export function formatVariable({ model, value, options = [] }) {
  if (value === ALL || (Array.isArray(value) && value.includes(ALL))) {
    if (typeof model.allValue === 'string' && model.allValue !== '') return model.allValue;
    return formatVariable({ model, value: options });
  }
  if (Array.isArray(value)) return value.map(quoteLiteral).join(',');
  if (model.multi || model.includeAll) return quoteLiteral(value);
  return value.replace(/'/g, "''");
}

// Grafana's rounding of a raw interval to a "nice" one (rangeutil's roundInterval), in milliseconds.
const NICE_INTERVALS = [
  [15, 10],
  [35, 20],
  [75, 50],
  [150, 100],
  [350, 200],
  [750, 500],
  [1500, 1000],
  [3500, 2000],
  [7500, 5000],
  [12500, 10000],
  [17500, 15000],
  [25000, 20000],
  [45000, 30000],
  [90000, 60000],
  [210000, 120000],
  [450000, 300000],
  [750000, 600000],
  [1050000, 900000],
  [1500000, 1200000],
  [2700000, 1800000],
  [5400000, 3600000],
  [9000000, 7200000],
  [16200000, 10800000],
  [32400000, 21600000],
  [86400000, 43200000],
  [604800000, 86400000],
  [1814400000, 604800000],
  [3628800000, 2592000000],
];

/** The interval Grafana gives a panel: range over data points, rounded, at least the minimum. */
export function intervalFor(/** @type {TimeRange} */ range, maxDataPoints = 1000, minIntervalMs = 1) {
  const raw = (range.to - range.from) / maxDataPoints;
  const nice = NICE_INTERVALS.find(([below]) => raw < /** @type {number} */ (below))?.[1] ?? 31536000000;
  return Math.max(nice, minIntervalMs);
}

/** $__interval's text, as Grafana's secondsToHms writes it: the largest unit that is not zero (20ms, 30s, 1h, 7d). */
export function intervalText(/** @type {number} */ ms) {
  const units = /** @type {const} */ ([
    ['y', 31536000000],
    ['d', 86400000],
    ['h', 3600000],
    ['m', 60000],
    ['s', 1000],
  ]);
  for (const [unit, size] of units) if (ms >= size) return `${Math.floor(ms / size)}${unit}`;
  return `${ms}ms`;
}

/** Go's RFC3339Nano in UTC, as the PostgreSQL data source writes times into $__timeFilter. */
const rfc3339 = (/** @type {number} */ ms) =>
  new Date(ms)
    .toISOString()
    .replace(/\.000Z$/, 'Z')
    .replace(/(\.\d*?)0+Z$/, '$1Z');

/**
 * The SQL Grafana sends for `rawSql`.
 * @param {string} rawSql
 * @param {ExpandOptions} options
 */
export function expandSql(rawSql, options) {
  const { range, variables = {}, maxDataPoints = 1000, minIntervalMs = 1 } = options;
  const intervalMs = intervalFor(range, maxDataPoints, minIntervalMs);
  /** @type {Record<string, string>} */
  const builtIns = { __interval_ms: String(intervalMs), __interval: intervalText(intervalMs) };
  // The browser's template service: $name, ${name} and ${name:format}; unknown names stay as written.
  const withVariables = rawSql.replace(/\$(\w+)|\$\{(\w+)(?::(\w+))?\}/g, (whole, plain, braced, format) => {
    const name = plain ?? braced;
    if (name in builtIns) return /** @type {string} */ (builtIns[name]);
    const variable = variables[name];
    if (variable === undefined) return whole;
    if (format !== undefined && format !== 'sqlstring') throw new Error(`variable format ${format} is not expanded by this test helper`);
    return formatVariable(variable);
  });
  // The data source's macros, expanded by Grafana's server.
  const from = rfc3339(range.from);
  const to = rfc3339(range.to);
  return withVariables
    .replace(/\$__timeFilter\(([^)]+)\)/g, (_, column) => `${column.trim()} BETWEEN '${from}' AND '${to}'`)
    .replace(/\$__timeFrom\(\)/g, `'${from}'`)
    .replace(/\$__timeTo\(\)/g, `'${to}'`)
    .replace(/\$__unixEpochFrom\(\)/g, String(Math.floor(range.from / 1000)))
    .replace(/\$__unixEpochTo\(\)/g, String(Math.floor(range.to / 1000)));
}

/**
 * @typedef {{ kind: 'variable' | 'panel', title: string, refId: string, format: string, rawSql: string, maxDataPoints?: number, panel?: any }} DashboardQuery
 */

/**
 * Every SQL query of the dashboard: its variables' and its panels' targets (rows' panels included),
 * with the panel's own number of data points where it sets one.
 * @param {any} dashboard
 * @returns {DashboardQuery[]}
 */
export function dashboardQueries(dashboard) {
  /** @type {DashboardQuery[]} */
  const queries = [];
  for (const variable of dashboard.templating?.list ?? []) {
    if (variable.type !== 'query') continue;
    const rawSql = typeof variable.query === 'string' ? variable.query : variable.query?.rawSql;
    queries.push({ kind: 'variable', title: variable.name, refId: 'variable', format: 'table', rawSql });
  }
  const panels = (dashboard.panels ?? []).flatMap((/** @type {any} */ p) => (p.type === 'row' ? [p, ...(p.panels ?? [])] : [p]));
  for (const panel of panels) {
    for (const target of panel.targets ?? []) {
      queries.push({
        kind: 'panel',
        title: panel.title,
        refId: target.refId,
        format: target.format,
        rawSql: target.rawSql,
        maxDataPoints: panel.maxDataPoints,
        panel,
      });
    }
  }
  return queries;
}
