// The provisioned Grafana files for the pinned Grafana (compose.yaml; the appliance's
// GRAFANA_VERSION): their structure as Grafana's dashboard schema (schemaVersion 41), its panel
// plugins, transformations, field options and units define it, both dashboards linked both ways,
// and every query of both dashboards run against the suite's QuestDB over the PostgreSQL wire
// protocol, expanded the way Grafana expands it, answering the columns and types each panel reads.
// Screenshots need a Grafana binary, which this machine does not have; these checks stand in.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { parse } from 'yaml';
import { CatalogueStore } from '../../src/catalogue/catalogue-store.js';
import { HealthReporter } from '../../src/health/health-reporter.js';
import { encodeSinkHealth } from '../../src/health/sink-health.js';
import { createLogger } from '../../src/log/logger.js';
import { QuestDbHttp } from '../../src/questdb/questdb-http.js';
import { alertRules } from '../../scripts/lib/grafana-rules.mjs';
import { gatewayDashboard } from '../../scripts/lib/grafana-gateway.mjs';
import { siteDashboard } from '../../scripts/lib/grafana-site.mjs';
import { TEST_KEY, startTestGateway, type TestGateway } from '../support/gateway.js';
import {
  createDashboardTables,
  dashboardTableNames,
  renameTables,
  waitForTables,
  type DashboardTables,
} from '../support/grafana-tables.js';
import { sql, waitForCount } from '../support/questdb-sql.js';
import { tempDir } from '../support/temp-dir.js';
import {
  ALERT_RULES_PATH,
  ALL,
  DASHBOARD_PATH,
  GATEWAY_DASHBOARD_PATH,
  dashboardQueries,
  expandSql,
  formatVariable,
  intervalFor,
  intervalText,
  loadDashboard,
  type DashboardVariable,
} from '../../scripts/lib/grafana-expand.mjs';

// QuestDB sends timestamps without a zone, in UTC; pg would read them in the machine's zone.
pg.types.setTypeParser(1114, (text: string) => new Date(`${text.replace(' ', 'T')}Z`));

const root = join(import.meta.dirname, '..', '..');
const provisioning = join(root, 'grafana', 'provisioning');
const readYaml = (path: string): unknown => parse(readFileSync(path, 'utf8'));

/** The parts of the provisioning files and the dashboard JSON these tests read. */
interface DataSourceRef {
  uid: string;
  type: string;
}
interface DataSourcesFile {
  apiVersion: number;
  datasources: (DataSourceRef & { password?: string })[];
}
interface ProvidersFile {
  apiVersion: number;
  providers: { options: { path: string } }[];
}
interface Target {
  datasource: DataSourceRef;
  refId: string;
  format: string;
  rawSql: string;
}
interface Override {
  matcher: { id: string; options: string };
  properties: { id: string; value: unknown }[];
}
interface Panel {
  id: number;
  type: string;
  title: string;
  gridPos: { x: number; y: number; w: number; h: number };
  datasource: DataSourceRef;
  targets: Target[];
  repeat?: string;
  transformations?: { id: string; options: { configRefId?: string; mappings?: { fieldName: string; handlerKey: string }[] } }[];
  fieldConfig?: { defaults: Record<string, unknown>; overrides: Override[] };
  options: { layers?: { filterData: { options: string }; location: unknown }[] } & Record<string, unknown>;
}
interface Dashboard {
  title: string;
  uid: string;
  id?: number | null;
  schemaVersion: number;
  panels: Panel[];
  links: { type: string; url: string; keepTime: boolean }[];
  annotations: { list: { name: string; builtIn?: number; datasource: DataSourceRef; target?: Target }[] };
  templating: { list: (DashboardVariable & { datasource: DataSourceRef; query: string })[] };
}

/** Grafana's provisioning replaces $NAME and ${NAME} with the environment's values. */
const withEnv = (text: string, env: Record<string, string>): string =>
  text.replace(/\$\{(\w+)\}|\$(\w+)/g, (whole, braced, plain) => env[braced ?? plain] ?? whole);

/**
 * What Grafana 13 knows and these dashboards use: panel plugins, transformations, field config
 * properties (standard options and the table's and time series' custom ones) and unit ids of its
 * value format catalogue. A name outside these is a typo Grafana would ignore without a word.
 */
const PANEL_TYPES = new Set(['row', 'stat', 'timeseries', 'table', 'geomap', 'alertlist']);
const TRANSFORMATIONS = new Set(['configFromData']);
const CONFIG_HANDLERS = new Set(['unit', 'decimals', 'min', 'max', 'displayName', 'color', 'threshold1', '__ignore']);
const FIELD_PROPERTIES = new Set([
  'unit',
  'decimals',
  'displayName',
  'mappings',
  'thresholds',
  'links',
  'color',
  'custom.cellOptions',
  'custom.width',
]);
const UNITS = new Set(['short', 'dateTimeAsIso', 'dateTimeFromNow', 'dtdurations', 's', 'bytes', 'dBm', 'dB', 'hertz', 'lengthm']);
const CELL_TYPES = new Set(['color-text', 'color-background']);

// biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's own ${name:format} syntax, not a template literal
const OVER_TIME = 'Values over time: ${cargo:text}';
const site: Dashboard = loadDashboard(DASHBOARD_PATH);
const gateway: Dashboard = loadDashboard(GATEWAY_DASHBOARD_PATH);
const dashboards = { site, gateway };

describe('Grafana provisioning files', () => {
  const datasources = readYaml(join(provisioning, 'datasources', 'questdb.yaml')) as DataSourcesFile;
  const providers = readYaml(join(provisioning, 'dashboards', 'harbor.yaml')) as ProvidersFile;
  const datasourceUids = new Set<string>(datasources.datasources.map((d) => d.uid));

  it('provisions QuestDB through the built-in PostgreSQL data source, read-only, password from the environment', () => {
    expect(datasources.apiVersion).toBe(1);
    expect(datasources.datasources).toHaveLength(1);
    const [questdb] = datasources.datasources;
    expect(questdb).toMatchObject({
      name: 'QuestDB',
      uid: 'questdb',
      type: 'grafana-postgresql-datasource',
      access: 'proxy',
      // biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's own ${NAME} syntax, not a template literal
      url: '${QUESTDB_PG_ADDRESS}',
      user: 'grafana',
      isDefault: true,
      jsonData: { database: 'qdb', sslmode: 'disable', timescaledb: false },
      // biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's own ${NAME} syntax, not a template literal
      secureJsonData: { password: '${QUESTDB_PASSWORD}' },
    });
    expect(questdb!.password).toBeUndefined();
  });

  it('loads both dashboards from the provisioning directory', () => {
    expect(providers.apiVersion).toBe(1);
    const [provider] = providers.providers;
    expect(provider).toMatchObject({ type: 'file', orgId: 1, disableDeletion: true, allowUiUpdates: false });
    const path = withEnv(provider!.options.path, { GF_PATHS_PROVISIONING: provisioning });
    expect(join(path, 'comprehensive-telemetry.json')).toBe(DASHBOARD_PATH);
    expect(join(path, 'gateway.json')).toBe(GATEWAY_DASHBOARD_PATH);
    for (const file of [DASHBOARD_PATH, GATEWAY_DASHBOARD_PATH]) expect(existsSync(file)).toBe(true);
  });

  it('holds what scripts/grafana-provisioning.mjs writes: the dashboards and the rules from one source', () => {
    expect(readFileSync(DASHBOARD_PATH, 'utf8')).toBe(`${JSON.stringify(siteDashboard(), null, 2)}\n`);
    expect(readFileSync(GATEWAY_DASHBOARD_PATH, 'utf8')).toBe(`${JSON.stringify(gatewayDashboard(), null, 2)}\n`);
    expect(readFileSync(ALERT_RULES_PATH, 'utf8')).toBe(alertRules());
  });

  it("names the site manager's dashboard as the spec asks and the operator's for the gateway, linked both ways", () => {
    expect(site.title).toBe('Comprehensive Telemetry Dashboard');
    expect(gateway.title).toBe('Harbor Gateway');
    for (const d of [site, gateway]) {
      expect(d.uid).toMatch(/^[a-zA-Z0-9_-]{1,40}$/);
      expect(d.id ?? null).toBeNull();
      expect(d.schemaVersion).toBe(41);
    }
    expect(site.links).toEqual([expect.objectContaining({ type: 'link', url: `/d/${gateway.uid}`, keepTime: true })]);
    expect(gateway.links).toEqual([expect.objectContaining({ type: 'link', url: `/d/${site.uid}`, keepTime: true })]);
  });

  it('gives the site dashboard a site, a ship and a cargo multi-select variable, ships named from the catalogue', () => {
    const variables = site.templating.list;
    expect(variables.map((v) => v.name)).toEqual(['site', 'ship', 'cargo']);
    for (const v of variables) {
      // All is '' rather than the list of options, which is empty on an empty gateway (`IN ()` is an error);
      // refresh 2: re-run on every time range change and auto-refresh, so new ships appear on a wall screen.
      expect(v).toMatchObject({ type: 'query', multi: true, includeAll: true, allValue: "''", refresh: 2 });
      expect(datasourceUids.has(v.datasource.uid)).toBe(true);
    }
    // Grafana shows __text and filters by __value; a site is shown as it is.
    for (const v of variables.slice(1)) expect(v.query).toMatch(/AS __value, .* AS __text/);
    expect(gateway.templating.list).toEqual([]);
  });

  it('marks the time series of both dashboards with the gateway events', () => {
    for (const d of [site, gateway]) {
      const [builtIn, events] = d.annotations.list;
      expect(builtIn).toMatchObject({ builtIn: 1 });
      expect(events).toMatchObject({ name: 'Gateway events', datasource: { uid: 'questdb' }, target: { format: 'table', rawQuery: true } });
    }
  });

  for (const [name, dashboard] of Object.entries(dashboards)) {
    it(`lays out the ${name} dashboard's panels on the 24-column grid without overlap, each a Grafana panel bound to the data source`, () => {
      const { panels } = dashboard;
      const ids = panels.map((p) => p.id);
      expect(new Set(ids).size).toBe(ids.length);
      const variableNames = new Set(dashboard.templating.list.map((v) => v.name));
      for (const [i, a] of panels.entries()) {
        expect(a.gridPos.x + a.gridPos.w, a.title).toBeLessThanOrEqual(24);
        expect(a.gridPos.h).toBeGreaterThan(0);
        for (const b of panels.slice(i + 1)) {
          const apart =
            a.gridPos.x + a.gridPos.w <= b.gridPos.x ||
            b.gridPos.x + b.gridPos.w <= a.gridPos.x ||
            a.gridPos.y + a.gridPos.h <= b.gridPos.y ||
            b.gridPos.y + b.gridPos.h <= a.gridPos.y;
          expect(apart, `${a.title} overlaps ${b.title}`).toBe(true);
        }
        expect(PANEL_TYPES.has(a.type), a.type).toBe(true);
        if (a.type === 'row') continue;
        if (a.type === 'alertlist') {
          // The alerts of the Harbor folder, from Grafana's own alerting: no query.
          expect(a.options).toMatchObject({ viewMode: 'list', folder: { uid: 'harbor' }, stateFilter: { firing: true } });
          continue;
        }
        expect(datasourceUids.has(a.datasource.uid), a.title).toBe(true);
        expect(a.targets.length, a.title).toBeGreaterThan(0);
        for (const target of a.targets) {
          expect(datasourceUids.has(target.datasource.uid), a.title).toBe(true);
          expect(target).toMatchObject({ rawQuery: true, editorMode: 'code' });
          expect(['time_series', 'table']).toContain(target.format);
          // Every $name in the SQL is a dashboard variable, one of Grafana's, or a regex group ($1).
          for (const [, variable] of target.rawSql.matchAll(/\$\{?(\w+)/g)) {
            expect(variableNames.has(variable!) || variable!.startsWith('__') || /^\d+$/.test(variable!), `${a.title}: $${variable}`).toBe(
              true,
            );
          }
        }
        if (a.repeat !== undefined) expect(variableNames.has(a.repeat)).toBe(true);
      }
    });

    it(`sets only field options, units, transformations and cell types Grafana knows on the ${name} dashboard`, () => {
      for (const panel of dashboard.panels) {
        const defaults = panel.fieldConfig?.defaults ?? {};
        const properties = [
          ...Object.entries(defaults).map(([id, value]) => ({ id, value })),
          ...(panel.fieldConfig?.overrides ?? []).flatMap((o) => o.properties),
        ];
        for (const { id, value } of properties) {
          if (id === 'unit') expect(UNITS.has(String(value)), `${panel.title}: unit ${value}`).toBe(true);
          if (id === 'custom.cellOptions') expect(CELL_TYPES.has((value as { type: string }).type), panel.title).toBe(true);
          if (id === 'mappings') {
            for (const m of value as { type: string; options: Record<string, unknown> }[]) {
              expect(['value', 'regex'], panel.title).toContain(m.type);
              if (m.type === 'regex') expect(() => new RegExp(String(m.options.pattern))).not.toThrow();
            }
          }
        }
        for (const o of panel.fieldConfig?.overrides ?? []) {
          expect(['byName', 'byRegexp'], panel.title).toContain(o.matcher.id);
          for (const p of o.properties) expect(FIELD_PROPERTIES.has(p.id), `${panel.title}: ${p.id}`).toBe(true);
        }
        for (const t of panel.transformations ?? []) {
          expect(TRANSFORMATIONS.has(t.id), t.id).toBe(true);
          expect(
            panel.targets.map((q) => q.refId),
            panel.title,
          ).toContain(t.options.configRefId);
          for (const m of t.options.mappings ?? []) expect(CONFIG_HANDLERS.has(m.handlerKey), m.handlerKey).toBe(true);
        }
      }
    });
  }

  it("filters by site, ship and cargo only in the form that All ('') passes: no bare IN ($ship)", () => {
    for (const q of dashboardQueries(site)) {
      const sqlText = q.rawSql
        .replace(/\('' IN \(\$site\) OR site IN \(\$site\)\)/g, '')
        .replace(/\('' IN \(\$(ship|cargo)\) OR (ship|cargo)_id IN \(\$(ship|cargo)\)\)/g, '')
        // The configuration query of a repeated panel names its one cargo id, never All's ''.
        .replace(/\$cargo\b/g, q.panel?.repeat === 'cargo' ? '' : '$cargo');
      expect(sqlText, `${q.title} ${q.refId}`).not.toMatch(/\$(site|ship|cargo)\b/);
    }
  });

  it('draws the Geomap layers from latitude and longitude fields of queries that exist', () => {
    const geomap = site.panels.find((p) => p.type === 'geomap')!;
    const refIds = new Set(geomap.targets.map((t) => t.refId));
    expect(geomap.options.layers!.length).toBeGreaterThanOrEqual(2);
    for (const layer of geomap.options.layers!) {
      expect(refIds.has(layer.filterData.options)).toBe(true);
      expect(layer.location).toEqual({ mode: 'coords', latitude: 'latitude', longitude: 'longitude' });
    }
  });

  it('links each ship at a glance to the site dashboard showing only that ship, at its site', () => {
    const glance = site.panels.find((p) => p.title === 'Ships at a glance')!;
    const ship = glance.fieldConfig!.overrides.find((o) => o.matcher.options === 'ship')!;
    const [link] = ship.properties.find((p) => p.id === 'links')!.value as { url: string }[];
    expect(link!.url).toBe(
      `/d/${site.uid}?var-ship=\${__data.fields.ship_id:percentencode}&var-site=\${__data.fields.site:percentencode}&\${__url_time_range}`,
    );
  });
});

describe('the Grafana macro expander of these tests', () => {
  const range = { from: Date.parse('2026-11-21T10:00:00.000Z'), to: Date.parse('2026-11-21T16:00:00.250Z') };

  it('quotes and joins multi-value variables like the PostgreSQL data source', () => {
    expect(formatVariable({ model: { multi: true }, value: ['a', "o'b"] })).toBe("'a','o''b'");
    expect(formatVariable({ model: { multi: true, includeAll: true, allValue: "''" }, value: ALL, options: ['a'] })).toBe("''");
    expect(formatVariable({ model: { multi: true, includeAll: true }, value: [ALL], options: ['a', 'b'] })).toBe("'a','b'");
    expect(formatVariable({ model: { multi: true, includeAll: true }, value: ALL, options: [] })).toBe('');
    expect(formatVariable({ model: { includeAll: true }, value: 'a' })).toBe("'a'");
    expect(formatVariable({ model: {}, value: "o'b" })).toBe("o''b");
  });

  it('expands the time macros and both interval forms', () => {
    const variables = { ship: { model: { multi: true }, value: ['s1', 's2'] } };
    // biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's own ${NAME} syntax, not a template literal
    expect(expandSql('WHERE $__timeFilter(time) AND ship_id IN ($ship) AND x = ${ship}', { range, variables })).toBe(
      "WHERE time BETWEEN '2026-11-21T10:00:00Z' AND '2026-11-21T16:00:00.25Z' AND ship_id IN ('s1','s2') AND x = 's1','s2'",
    );
    // biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's own ${NAME} syntax, not a template literal
    expect(expandSql('$__timeFrom() $__timeTo() ${__interval_ms}T $__interval $1', { range })).toBe(
      "'2026-11-21T10:00:00Z' '2026-11-21T16:00:00.25Z' 20000T 20s $1",
    );
  });

  it('rounds intervals the way Grafana does, from milliseconds to days', () => {
    expect(intervalText(intervalFor({ from: 0, to: 20_000 }))).toBe('20ms');
    expect(intervalText(intervalFor({ from: 0, to: 3_600_000 }))).toBe('5s');
    expect(intervalText(intervalFor({ from: 0, to: 30 * 86_400_000 }))).toBe('30m');
    expect(intervalText(intervalFor({ from: 0, to: 45 * 86_400_000 }))).toBe('1h');
    expect(intervalText(intervalFor({ from: 0, to: 365 * 86_400_000 }))).toBe('6h');
    expect(intervalText(intervalFor({ from: 0, to: 5 * 365 * 86_400_000 }))).toBe('1d');
    expect(intervalFor({ from: 0, to: 20_000 }, 1000, 1000)).toBe(1000);
  });
});

/** PostgreSQL type ids QuestDB answers with, by the kind of field Grafana makes of them. */
const KINDS: Record<string, number[]> = {
  time: [1114, 1184],
  number: [20, 21, 23, 700, 701, 1700],
  string: [25, 1043],
  boolean: [16],
};
type Kind = keyof typeof KINDS;
const columns = (...pairs: [string, Kind][]) => pairs;
const timeSeries = (value: string) => columns(['time', 'time'], ['metric', 'string'], [value, 'number']);
const positions = columns(
  ['time', 'time'],
  ['site', 'string'],
  ['ship_id', 'string'],
  ['device', 'string'],
  ['latitude', 'number'],
  ['longitude', 'number'],
);
const gatewayState = columns(['gateway', 'string'], ['state', 'string'], ['last_report', 'time']);

/** The columns each query must return, by panel title (variables by name, annotations by name) and refId. */
const EXPECTED: Record<string, [string, Kind][]> = {
  'site variable': columns(['site', 'string']),
  'ship variable': columns(['__value', 'string'], ['__text', 'string']),
  'cargo variable': columns(['__value', 'string'], ['__text', 'string']),
  'Ships reporting now A': columns(['reporting', 'number'], ['silent', 'number'], ['seen', 'number']),
  'Cargo outside the normal range A': columns(['outside', 'number'], ['left_last_hour', 'number']),
  'Readings A': columns(['readings', 'number']),
  'Gateway A': gatewayState,
  'Ships at a glance A': columns(
    ['site', 'string'],
    ['ship', 'string'],
    ['last_seen', 'number'],
    ['readings_last_hour', 'number'],
    ['latitude', 'number'],
    ['longitude', 'number'],
    ['cargo', 'string'],
    ['ship_id', 'string'],
  ),
  'Cargo now A': columns(
    ['site', 'string'],
    ['ship', 'string'],
    ['cargo', 'string'],
    ['value', 'number'],
    ['unit', 'string'],
    ['normal_range', 'string'],
    ['state', 'string'],
    ['time', 'time'],
    ['ship_id', 'string'],
    ['cargo_id', 'string'],
  ),
  [`${OVER_TIME} A`]: timeSeries('value'),
  [`${OVER_TIME} B`]: columns(['unit', 'string'], ['decimals', 'number'], ['low', 'number'], ['high', 'number']),
  'Cargo summary A': columns(
    ['site', 'string'],
    ['ship', 'string'],
    ['cargo', 'string'],
    ['min', 'number'],
    ['avg', 'number'],
    ['max', 'number'],
    ['unit', 'string'],
    ['range_state', 'string'],
    ['readings', 'number'],
  ),
  'Positions and tracks A': positions,
  'Positions and tracks B': positions,
  'Position details A': columns(
    ['site', 'string'],
    ['ship', 'string'],
    ['latitude', 'number'],
    ['longitude', 'number'],
    ['altitude', 'number'],
    ['satellites', 'number'],
    ['fix_time', 'time'],
    ['ship_id', 'string'],
  ),
  'Radio link quality A': timeSeries('value'),
  'Radio link now A': columns(
    ['site', 'string'],
    ['ship', 'string'],
    ['rssi', 'number'],
    ['channel_rssi', 'number'],
    ['snr', 'number'],
    ['spreading_factor', 'number'],
    ['bandwidth', 'number'],
    ['frequency', 'number'],
    ['last_uplink', 'time'],
    ['ship_id', 'string'],
  ),
  'Gateway state A': gatewayState,
  'Gateway events A': columns(
    ['time', 'time'],
    ['gateway', 'string'],
    ['event', 'string'],
    ['reason', 'string'],
    ['text', 'string'],
    ['until', 'time'],
  ),
  'Queue depth A': timeSeries('queue_readings'),
  'Oldest queued reading A': timeSeries('oldest_age'),
  'Flush errors A': columns(['time', 'time'], ['metric', 'string'], ['consecutive_failures', 'number'], ['failures_since_start', 'number']),
  'Gateways A': columns(
    ['gateway', 'string'],
    ['last_report', 'time'],
    ['ready', 'boolean'],
    ['clock', 'string'],
    ['queue_readings', 'number'],
    ['queue_bytes', 'number'],
    ['queue_max_bytes', 'number'],
    ['oldest_age_s', 'number'],
    ['dead_letters', 'number'],
    ['flush_failures', 'number'],
    ['consecutive_flush_failures', 'number'],
    ['accepted_readings', 'number'],
    ['flushed_readings', 'number'],
    ['refused_requests', 'number'],
  ),
  'Device keys A': columns(
    ['gateway', 'string'],
    ['key', 'string'],
    ['ship_prefix', 'string'],
    ['last_seen', 'time'],
    ['refused_requests', 'number'],
    ['accepted_requests', 'number'],
    ['accepted_readings', 'number'],
  ),
  'Sink backlog A': timeSeries('backlog_readings'),
  'Oldest undelivered reading per sink A': timeSeries('oldest_age'),
  'Sinks A': columns(
    ['gateway', 'string'],
    ['sink', 'string'],
    ['state', 'string'],
    ['last_report', 'time'],
    ['backlog_readings', 'number'],
    ['oldest_age_s', 'number'],
    ['delivered_readings', 'number'],
    ['failed_deliveries', 'number'],
    ['dead_lettered', 'number'],
    ['dropped_readings', 'number'],
  ),
  'Gateway events annotation': columns(['time', 'time'], ['timeend', 'time'], ['text', 'string'], ['tags', 'string']),
};

const CATALOGUE = `ships:
  ship-a: MV Alpha
cargo:
  - match: temp*
    name: Temperature
    unit: °C
    min: 0
    max: 21.5
    decimals: 1
  - match: "*idity"
    name: Humidity
    unit: '%'
`;

describe('dashboard queries on QuestDB', () => {
  const minute = 60_000;
  // A whole hour, so the readings share time buckets up to an hour; inside the variables' window.
  const base = Math.floor(Date.now() / (60 * minute)) * 60 * minute - 2 * 60 * minute;
  const at = (minutes: number) => new Date(base + minutes * minute).toISOString();
  const range = { from: base - 10 * minute, to: base + 60 * minute };
  let tables: DashboardTables;
  let gw: TestGateway;
  let client: pg.Client;

  // GPS pairs in every naming the dashboard pairs, readings it must not pair, and radio fields.
  const readings = [
    ...[0, 1, 2].flatMap((m) => [
      { time: at(m), ship_id: 'ship-a', cargo_id: 'latitude', value: 53.5 + m / 100 },
      { time: at(m), ship_id: 'ship-a', cargo_id: 'longitude', value: 9.9 + m / 100 },
      { time: at(m), ship_id: 'ship-a', cargo_id: 'temperature', value: 20 + m },
    ]),
    { time: at(2), ship_id: 'ship-a', cargo_id: 'altitude', value: 12.5 },
    { time: at(2), ship_id: 'ship-a', cargo_id: 'satellites', value: 9 },
    { time: at(0), ship_id: 'ship-b', cargo_id: 'lat', value: 50.1 },
    { time: at(0), ship_id: 'ship-b', cargo_id: 'lon', value: 8.1 },
    { time: at(1), ship_id: 'ship-b', cargo_id: 'gps_lat', value: 50.2 },
    { time: at(1), ship_id: 'ship-b', cargo_id: 'gps_lon', value: 8.2 },
    { time: at(2), ship_id: 'ship-b', cargo_id: 'engine_latitude', value: 50.3 },
    { time: at(2), ship_id: 'ship-b', cargo_id: 'engine_longitude', value: 8.3 },
    { time: at(3), ship_id: 'ship-b', cargo_id: 'gps_lat', value: 50.4 },
    { time: at(3), ship_id: 'ship-b', cargo_id: 'aux_lon', value: 8.4 },
    { time: at(0), ship_id: 'ship-c', cargo_id: 'lat', value: -33.9 },
    { time: at(0), ship_id: 'ship-c', cargo_id: 'long', value: 151.2 },
    { time: at(0), ship_id: 'ship-c', cargo_id: 'rssi', value: -97 },
    { time: at(0), ship_id: 'ship-c', cargo_id: 'snr', value: 7.5 },
    { time: at(0), ship_id: 'ship-c', cargo_id: 'spreading_factor', value: 7 },
    { time: at(0), ship_id: 'ship-c', cargo_id: 'frequency', value: 868_100_000 },
    { time: at(0), ship_id: "o'brien", cargo_id: 'Latitude', value: 1.5 },
    { time: at(0), ship_id: "o'brien", cargo_id: 'Longitude', value: 2.5 },
    { time: at(0), ship_id: "o'brien", cargo_id: 'humidity', value: 40 },
    { time: at(0), ship_id: 'ship-d', cargo_id: 'latitude', value: 10 },
    { time: at(1), ship_id: 'ship-d', cargo_id: 'longitude', value: 11 },
    { time: at(0), ship_id: 'ship-d', cargo_id: 'flat', value: 1 },
    { time: at(0), ship_id: 'ship-d', cargo_id: 'long', value: 12 },
  ];
  const allShips = ['ship-a', 'ship-b', 'ship-c', 'ship-d', "o'brien"];

  const model = (name: string) => site.templating.list.find((v) => v.name === name) as DashboardVariable;
  const run = async (
    rawSql: string,
    options: { site?: string[]; ship?: string[]; cargo?: string[]; range?: { from: number; to: number }; maxDataPoints?: number } = {},
  ) => {
    const text = expandSql(renameTables(rawSql, tables), {
      range: options.range ?? range,
      maxDataPoints: options.maxDataPoints ?? 1000,
      variables: {
        site: { model: model('site'), value: options.site ?? ALL },
        ship: { model: model('ship'), value: options.ship ?? ALL },
        cargo: { model: model('cargo'), value: options.cargo ?? ALL },
      },
    });
    return client.query(text);
  };
  const queries = [...dashboardQueries(site), ...dashboardQueries(gateway)];
  const keyOf = (q: (typeof queries)[number]) => `${q.title} ${q.refId === 'variable' ? 'variable' : q.refId}`;
  const find = (title: string, refId = 'A') => {
    const found = queries.find((q) => q.title === title && (q.kind === 'variable' || q.refId === refId));
    if (found === undefined) throw new Error(`no query ${title} ${refId}`);
    return found;
  };
  const query = (title: string, refId = 'A') => find(title, refId).rawSql;

  beforeAll(async () => {
    // The catalogue's ship names are its site's: the readings are this site's own.
    gw = await startTestGateway({ SITE_ID: 'site-1' });
    const response = await gw.post('/api/v2/ingest/batch', readings, { 'x-api-key': TEST_KEY });
    expect(response.status).toBe(200);
    expect(await waitForCount(`SELECT count() FROM "${gw.table}"`, readings.length)).toBe(readings.length);
    tables = await createDashboardTables({ ...dashboardTableNames(), readings: gw.table });
    await sql(
      `INSERT INTO ${tables.health} (time, gateway, ready, queue_readings, queue_bytes, queue_max_bytes, oldest_age_s, dead_letters,
        flush_failures, consecutive_flush_failures, accepted_readings, flushed_readings, refused_requests, state, state_text, clock) VALUES
        ('${at(0)}', 'gw-1', true, 10, 2048, 1048576, 4.5, 0, 0, 0, 100, 90, 0, 'delivering', 'delivering', 'synchronised'),
        ('${at(1)}', 'gw-1', true, 0, 0, 1048576, null, 0, 2, 1, 110, 110, 0, 'delivering', 'delivering', 'synchronised'),
        ('${at(0)}', 'gw-2', false, 500, 65536, 65536, 60, 1, 7, 7, 500, 0, 3, 'refusing', 'refusing readings — queue full', null)`,
    );
    await sql(
      `INSERT INTO ${tables.keys} VALUES
        ('${at(0)}', 'gw-1', 'default', null, 5, 5, 0, '${at(0)}'),
        ('${at(1)}', 'gw-1', 'default', null, 9, 12, 0, '${at(1)}'),
        ('${at(1)}', 'gw-1', 'crane', 'crane-', 1, 1, 4, '${at(1)}'),
        ('${at(0)}', 'gw-2', 'buoy', null, 0, 0, 0, null)`,
    );
    // The sink rows, events and catalogue as the gateway writes them: one gateway with a local sink
    // up to date and a remote one behind and failing, in two reports; its start; the site's catalogue.
    const questdb = new QuestDbHttp({ url: inject('questdbUrl'), timeoutMs: 10_000, username: undefined, password: undefined });
    const sink = (name: string, backlog: number, oldest: number | null, state: string) => ({
      sink: name,
      backlogReadings: backlog,
      oldestAgeSeconds: oldest,
      deliveredReadings: 100,
      failedDeliveries: name === 'questdb' ? 0 : 4,
      deadLettered: 0,
      droppedReadings: 0,
      state,
    });
    for (const [minutes, backlog] of [
      [0, 10],
      [1, 250],
    ] as const) {
      const rows = [sink('questdb', 0, null, 'up to date'), sink('remote-questdb', backlog, 60 * (minutes + 1), 'failing')];
      expect(await questdb.write(encodeSinkHealth('gw-1', rows, base + minutes * minute, tables.sinks))).toEqual({ ok: true });
    }
    const log = createLogger('silent');
    const reporter = new HealthReporter(questdb, 'gw-1', log, tables.health, tables.events);
    reporter.event({
      time: base - minute,
      event: 'started',
      reason: 'upgrade',
      text: 'started 0.5.0 after an upgrade from 0.4.0',
      version: '0.5.0',
    });
    expect(await reporter.prepare()).toBe(true);
    const file = join(tempDir('catalogue'), 'catalogue.yaml');
    writeFileSync(file, CATALOGUE);
    const catalogue = new CatalogueStore({
      path: file,
      pollMs: 60_000,
      gateway: 'gw-1',
      site: 'site-1',
      questdb,
      logger: log,
      tables: { cargo: tables.cargoCatalogue, ships: tables.shipCatalogue },
    });
    expect(await catalogue.publish()).toBe(true);
    await questdb.close();
    await waitForTables(tables);
    client = new pg.Client({ host: '127.0.0.1', port: inject('questdbPgPort'), user: 'admin', password: 'quest', database: 'qdb' });
    await client.connect();
  });

  afterAll(async () => {
    await client?.end();
    await gw?.stop();
  });

  it('runs every variable, panel and annotation query and returns the columns and types its panel needs', async () => {
    const annotations = [site, gateway].flatMap((d) =>
      d.annotations.list.flatMap((a) =>
        a.target === undefined
          ? []
          : [{ key: `${a.name} annotation`, rawSql: a.target.rawSql, format: 'table', panel: undefined, maxDataPoints: undefined }],
      ),
    );
    const all = [...queries.map((q) => ({ ...q, key: keyOf(q) })), ...annotations];
    expect(Object.keys(EXPECTED).sort()).toEqual([...new Set(all.map((q) => q.key))].sort());
    for (const q of all) {
      // A repeated panel runs once per value of its variable, with that value alone.
      const cargo = q.panel?.repeat === 'cargo' ? ['temperature'] : undefined;
      const result = await run(q.rawSql, { maxDataPoints: q.maxDataPoints, cargo });
      const answered = result.fields.map((f) => [f.name, f.dataTypeID]);
      expect(
        answered.map(([name]) => name),
        q.key,
      ).toEqual(EXPECTED[q.key]!.map(([name]) => name));
      for (const [i, [name, kind]] of EXPECTED[q.key]!.entries()) {
        expect(KINDS[kind], `${q.key}: ${name} has type ${answered[i]![1]}`).toContain(answered[i]![1]);
      }
      expect(result.rowCount, q.key).toBeGreaterThan(0);
      if (q.format === 'time_series') {
        const times = result.rows.map((row) => (row.time as Date).getTime());
        expect(times, `${q.key} is sorted by time`).toEqual([...times].sort((a, b) => a - b));
      }
    }
  });

  it("sets field options only on columns its panel's queries answer", async () => {
    for (const panel of [...site.panels, ...gateway.panels]) {
      const names = new Set((panel.targets ?? []).flatMap((t) => EXPECTED[`${panel.title} ${t.refId}`]?.map(([name]) => name) ?? []));
      for (const o of panel.fieldConfig?.overrides ?? []) {
        if (o.matcher.id === 'byName') expect(names.has(o.matcher.options), `${panel.title}: ${o.matcher.options}`).toBe(true);
      }
      for (const t of panel.transformations ?? []) {
        for (const m of t.options.mappings ?? []) expect(names.has(m.fieldName), `${panel.title}: ${m.fieldName}`).toBe(true);
      }
    }
  });

  it('lists the ships by name, and the cargo of the selected ships only, without positions or radio fields', async () => {
    const ships = (await run(query('ship'))).rows;
    expect(ships.map((r) => r.__value).sort()).toEqual([...allShips].sort());
    expect(ships.find((r) => r.__value === 'ship-a')?.__text).toBe('MV Alpha');
    const cargo = async (ship?: string[]) => (await run(query('cargo'), { ship })).rows.map((r) => [r.__value, r.__text]);
    expect(await cargo()).toEqual([
      ['humidity', 'Humidity (humidity)'],
      ['temperature', 'Temperature (temperature)'],
      ['flat', 'flat'],
    ]);
    expect(await cargo(['ship-a'])).toEqual([['temperature', 'Temperature (temperature)']]);
    expect(await cargo(["o'brien", 'ship-c'])).toEqual([['humidity', 'Humidity (humidity)']]);
  });

  it('pairs latitude and longitude of the same ship, time and device prefix into positions', async () => {
    const map = find('Positions and tracks');
    expect(map.maxDataPoints).toBe(200);
    const tracks = await run(map.rawSql, { range: { from: base, to: base + 5 * minute }, maxDataPoints: map.maxDataPoints });
    const points = tracks.rows.map((r) => [r.device, (r.time as Date).toISOString(), r.latitude, r.longitude]);
    expect(points).toEqual([
      ["o'brien", at(0), 1.5, 2.5],
      ['ship-a', at(0), 53.5, 9.9],
      ['ship-a', at(1), 53.51, 9.91],
      ['ship-a', at(2), 53.52, 9.92],
      ['ship-b', at(0), 50.1, 8.1],
      ['ship-b / engine', at(2), 50.3, 8.3],
      ['ship-b / gps', at(1), 50.2, 8.2],
      ['ship-c', at(0), -33.9, 151.2],
      ['ship-d', at(0), 10, 12],
    ]);
    const latest = await run(query('Positions and tracks', 'B'), { maxDataPoints: map.maxDataPoints });
    expect(latest.rows.map((r) => [r.device, (r.time as Date).toISOString(), r.latitude])).toEqual([
      ["o'brien", at(0), 1.5],
      ['ship-a', at(2), 53.52],
      ['ship-b', at(0), 50.1],
      ['ship-b / engine', at(2), 50.3],
      ['ship-b / gps', at(1), 50.2],
      ['ship-c', at(0), -33.9],
      ['ship-d', at(0), 10],
    ]);
    const details = await run(query('Position details'), { ship: ['ship-a'] });
    expect(details.rows.map((r) => [r.ship, r.latitude, r.longitude, r.altitude, r.satellites])).toEqual([
      ['MV Alpha', 53.52, 9.92, 12.5, 9],
    ]);
  });

  it('buckets by the range: over a week a track of 3 minutes is one point, its last fix', async () => {
    const week = { from: base - 7 * 86_400_000, to: base + 60 * minute };
    const map = find('Positions and tracks');
    expect(intervalFor(week, map.maxDataPoints)).toBe(3_600_000);
    const tracks = await run(map.rawSql, { range: week, ship: ['ship-a', 'ship-b'], maxDataPoints: map.maxDataPoints });
    expect(tracks.rows.map((r) => [r.device, (r.time as Date).toISOString(), r.latitude])).toEqual([
      ['ship-a', at(2), 53.52],
      ['ship-b', at(0), 50.1],
      ['ship-b / engine', at(2), 50.3],
      // The last gps_lat of the hour (minute 3) has no gps_lon: the hour's position is the last whole fix, never a mixed one.
      ['ship-b / gps', at(1), 50.2],
    ]);
    expect(intervalFor(week)).toBe(600_000);
    const values = await run(query(OVER_TIME), { range: week, ship: ['ship-a'], cargo: ['temperature'] });
    expect(values.rows.map((r) => [r.metric, r.value])).toEqual([['MV Alpha', 21]]);
    // A 20-second range gives 20 ms buckets, which QuestDB's SAMPLE BY takes as 20T.
    const short = { from: base - 10_000, to: base + 10_000 };
    expect(intervalText(intervalFor(short))).toBe('20ms');
    expect((await run(query(OVER_TIME), { range: short, cargo: ['temperature'] })).rows).toHaveLength(1);
  });

  it('summarises, counts and shows the latest value of the selected series, named and measured by the catalogue', async () => {
    const selection = { ship: ['ship-a'], cargo: ['temperature'] };
    expect((await run(query('Cargo summary'), selection)).rows).toEqual([
      {
        site: 'site-1',
        ship: 'MV Alpha',
        cargo: 'Temperature (temperature)',
        min: 20,
        avg: 21,
        max: 22,
        unit: '°C',
        range_state: 'above',
        readings: '3',
      },
    ]);
    expect((await run(query('Readings'), selection)).rows).toEqual([{ readings: '3' }]);
    expect((await run(query('Readings'))).rows).toEqual([{ readings: String(readings.length) }]);
    const latest = await run(query('Cargo now'), selection);
    expect(latest.rows.map((r) => [r.value, r.unit, r.normal_range, r.state, (r.time as Date).toISOString()])).toEqual([
      [22, '°C', '0 to 21.5 °C', 'above', at(2)],
    ]);
    expect((await run(query(OVER_TIME, 'B'), { cargo: ['temperature'] })).rows).toEqual([
      { unit: 'suffix:°C', decimals: 1, low: 0, high: 21.5 },
    ]);
    const link = await run(query('Radio link now'));
    expect(link.rows.map((r) => [r.ship, r.rssi, r.snr, r.spreading_factor, r.frequency, r.bandwidth])).toEqual([
      ['ship-c', -97, 7.5, 7, 868_100_000, null],
    ]);
  });

  it("shows each gateway's state, queue depth, oldest queued age, flush errors and clock", async () => {
    const gateways = await run(query('Gateways'));
    expect(gateways.rows.map((r) => [r.gateway, r.queue_readings, r.oldest_age_s, r.consecutive_flush_failures, r.clock])).toEqual([
      ['gw-1', '0', null, '1', 'synchronised'],
      ['gw-2', '500', 60, '7', null],
    ]);
    const age = await run(query('Oldest queued reading'));
    const byTimeAndGateway = age.rows
      .map((r) => [(r.time as Date).toISOString(), r.metric, r.oldest_age])
      .sort((a, b) => `${a[0]}${a[1]}`.localeCompare(`${b[0]}${b[1]}`));
    expect(byTimeAndGateway).toEqual([
      [at(0), 'gw-1', 4.5],
      [at(0), 'gw-2', 60],
      [at(1), 'gw-1', 0],
    ]);
    const events = await run(query('Gateway events'));
    expect(events.rows.map((r) => [r.gateway, r.event, r.reason, r.text])).toEqual([
      ['gw-1', 'started', 'upgrade', 'started 0.5.0 after an upgrade from 0.4.0'],
    ]);
    // The start is a region from the gateway's last report before it: the time it was down.
    const marks = await run(site.annotations.list[1]!.target!.rawSql);
    expect(marks.rows.map((r) => [r.text, r.tags, (r.timeend as Date).getTime() - (r.time as Date).getTime()])).toEqual([
      ['gw-1: started 0.5.0 after an upgrade from 0.4.0', 'gateway,started,upgrade', 0],
    ]);
  });

  it("shows each device key's latest counters, the keys with refusals first", async () => {
    const keys = await run(query('Device keys'));
    expect(keys.rows.map((r) => [r.gateway, r.key, r.ship_prefix, r.refused_requests, r.accepted_readings])).toEqual([
      ['gw-1', 'crane', 'crane-', '4', '1'],
      ['gw-1', 'default', null, '0', '12'],
      ['gw-2', 'buoy', null, '0', '0'],
    ]);
  });

  it("shows each sink's backlog and oldest undelivered reading over time, and its latest report", async () => {
    const backlog = await run(query('Sink backlog'));
    const byTimeAndSink = backlog.rows
      .map((r) => [(r.time as Date).toISOString(), r.metric, r.backlog_readings])
      .sort((a, b) => `${a[0]}${a[1]}`.localeCompare(`${b[0]}${b[1]}`));
    expect(byTimeAndSink).toEqual([
      [at(0), 'gw-1 / questdb', '0'],
      [at(0), 'gw-1 / remote-questdb', '10'],
      [at(1), 'gw-1 / questdb', '0'],
      [at(1), 'gw-1 / remote-questdb', '250'],
    ]);
    const oldest = await run(query('Oldest undelivered reading per sink'));
    expect(oldest.rows.filter((r) => r.metric === 'gw-1 / remote-questdb').map((r) => r.oldest_age)).toEqual([60, 120]);
    expect(oldest.rows.filter((r) => r.metric === 'gw-1 / questdb').map((r) => r.oldest_age)).toEqual([0, 0]);
    const sinks = await run(query('Sinks'));
    expect(sinks.rows.map((r) => [r.gateway, r.sink, r.state, r.backlog_readings, r.oldest_age_s, r.failed_deliveries])).toEqual([
      ['gw-1', 'questdb', 'up to date', '0', null, '0'],
      ['gw-1', 'remote-questdb', 'failing', '250', 120, '4'],
    ]);
  });
});
