// The provisioned Grafana files: their structure, and every query of the dashboard run against the
// suite's QuestDB over the PostgreSQL wire protocol, expanded the way Grafana expands it.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { parse } from 'yaml';
import { createHealthTable } from '../../src/health/health-reporter.js';
import { createSinkHealthTable, encodeSinkHealth } from '../../src/health/sink-health.js';
import { QuestDbHttp } from '../../src/questdb/questdb-http.js';
import { TEST_KEY, startTestGateway, type TestGateway } from '../support/gateway.js';
import { sql, uniqueTable, waitForCount, waitForWalApplied } from '../support/questdb-sql.js';
import {
  ALL,
  DASHBOARD_PATH,
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
interface Panel {
  id: number;
  type: string;
  title: string;
  gridPos: { x: number; w: number; h: number };
  datasource: DataSourceRef;
  targets: Target[];
  repeat?: string;
  options: { layers: { filterData: { options: string }; location: unknown }[] };
}
interface Dashboard {
  title: string;
  uid: string;
  id?: number | null;
  panels: Panel[];
  templating: { list: { name: string; datasource: DataSourceRef }[] };
}

/** Grafana's provisioning replaces $NAME and ${NAME} with the environment's values. */
const withEnv = (text: string, env: Record<string, string>): string =>
  text.replace(/\$\{(\w+)\}|\$(\w+)/g, (whole, braced, plain) => env[braced ?? plain] ?? whole);

describe('Grafana provisioning files', () => {
  const datasources = readYaml(join(provisioning, 'datasources', 'questdb.yaml')) as DataSourcesFile;
  const providers = readYaml(join(provisioning, 'dashboards', 'harbor.yaml')) as ProvidersFile;
  const dashboard: Dashboard = loadDashboard();
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

  it('loads the dashboard folder from the provisioning directory', () => {
    expect(providers.apiVersion).toBe(1);
    const [provider] = providers.providers;
    expect(provider).toMatchObject({ type: 'file', orgId: 1, disableDeletion: true, allowUiUpdates: false });
    const path = withEnv(provider!.options.path, { GF_PATHS_PROVISIONING: provisioning });
    expect(existsSync(join(path, 'comprehensive-telemetry.json'))).toBe(true);
    expect(join(path, 'comprehensive-telemetry.json')).toBe(DASHBOARD_PATH);
  });

  it('names the dashboard, gives it a stable uid and a ship and a cargo multi-select variable', () => {
    expect(dashboard.title).toBe('Comprehensive Telemetry Dashboard');
    expect(dashboard.uid).toMatch(/^[a-zA-Z0-9_-]{1,40}$/);
    expect(dashboard.id ?? null).toBeNull();
    const variables = dashboard.templating.list;
    expect(variables.map((v) => v.name)).toEqual(['ship', 'cargo']);
    for (const v of variables) {
      // All is '' rather than the list of options, which is empty on an empty gateway (`IN ()` is an error);
      // refresh 2: re-run on every time range change and auto-refresh, so new ships appear on a wall screen.
      expect(v).toMatchObject({ type: 'query', multi: true, includeAll: true, allValue: "''", refresh: 2 });
      expect(datasourceUids.has(v.datasource.uid)).toBe(true);
      expect(v.datasource.type).toBe('grafana-postgresql-datasource');
    }
  });

  it('has panels with unique ids inside the 24-column grid, each bound to a provisioned data source', () => {
    const { panels } = dashboard;
    const ids = panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    const variableNames = new Set(dashboard.templating.list.map((v) => v.name));
    for (const panel of panels) {
      expect(panel.gridPos.x + panel.gridPos.w).toBeLessThanOrEqual(24);
      expect(panel.gridPos.h).toBeGreaterThan(0);
      if (panel.type === 'row') continue;
      expect(datasourceUids.has(panel.datasource.uid), panel.title).toBe(true);
      expect(panel.targets.length, panel.title).toBeGreaterThan(0);
      for (const target of panel.targets) {
        expect(datasourceUids.has(target.datasource.uid), panel.title).toBe(true);
        expect(target).toMatchObject({ rawQuery: true, editorMode: 'code' });
        expect(['time_series', 'table']).toContain(target.format);
        // Every $name in the SQL is a dashboard variable, one of Grafana's, or a regex group ($1).
        for (const [, name] of (target.rawSql as string).matchAll(/\$\{?(\w+)/g)) {
          expect(variableNames.has(name!) || name!.startsWith('__') || /^\d+$/.test(name!), `${panel.title}: $${name}`).toBe(true);
        }
      }
      if (panel.repeat !== undefined) expect(variableNames.has(panel.repeat)).toBe(true);
    }
    expect(new Set(panels.map((p) => p.type))).toEqual(new Set(['row', 'stat', 'timeseries', 'table', 'geomap']));
  });

  it("filters by ship and cargo only in the form that All ('') passes: no bare IN ($ship)", () => {
    for (const q of dashboardQueries(dashboard)) {
      const sqlText = q.rawSql.replace(/\('' IN \(\$(ship|cargo)\) OR (ship|cargo)_id IN \(\$(ship|cargo)\)\)/g, '');
      expect(sqlText, `${q.title} ${q.refId}`).not.toMatch(/\$(ship|cargo)\b/);
    }
  });

  it('draws the Geomap layers from latitude and longitude fields of queries that exist', () => {
    const geomap = dashboard.panels.find((p) => p.type === 'geomap')!;
    const refIds = new Set(geomap.targets.map((t) => t.refId));
    expect(geomap.options.layers.length).toBeGreaterThanOrEqual(2);
    for (const layer of geomap.options.layers) {
      expect(refIds.has(layer.filterData.options)).toBe(true);
      expect(layer.location).toEqual({ mode: 'coords', latitude: 'latitude', longitude: 'longitude' });
    }
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

/** The columns each query must return, by panel title (variables by name) and refId. */
const EXPECTED: Record<string, [string, Kind][]> = {
  'ship variable': [['ship_id', 'string']],
  'cargo variable': [['cargo_id', 'string']],
  'Readings A': [['readings', 'number']],
  'Ships reporting A': [
    ['ships', 'number'],
    ['cargo', 'number'],
  ],
  'Latest reading A': [['latest', 'time']],
  'Values over time: $cargo A': [
    ['time', 'time'],
    ['metric', 'string'],
    ['value', 'number'],
  ],
  'Latest value per series A': [
    ['ship_id', 'string'],
    ['cargo_id', 'string'],
    ['value', 'number'],
    ['time', 'time'],
  ],
  'Summary A': [
    ['ship_id', 'string'],
    ['cargo_id', 'string'],
    ['min', 'number'],
    ['avg', 'number'],
    ['max', 'number'],
    ['count', 'number'],
  ],
  'Positions and tracks A': [
    ['time', 'time'],
    ['ship_id', 'string'],
    ['device', 'string'],
    ['latitude', 'number'],
    ['longitude', 'number'],
  ],
  'Positions and tracks B': [
    ['time', 'time'],
    ['ship_id', 'string'],
    ['device', 'string'],
    ['latitude', 'number'],
    ['longitude', 'number'],
  ],
  'Queue depth A': [
    ['time', 'time'],
    ['metric', 'string'],
    ['queue_readings', 'number'],
  ],
  'Oldest queued reading A': [
    ['time', 'time'],
    ['metric', 'string'],
    ['oldest_age', 'number'],
  ],
  'Flush errors A': [
    ['time', 'time'],
    ['metric', 'string'],
    ['consecutive_failures', 'number'],
    ['failures_since_start', 'number'],
  ],
  'Gateway state A': [
    ['gateway', 'string'],
    ['state', 'string'],
    ['last_report', 'time'],
  ],
  'Gateways A': [
    ['gateway', 'string'],
    ['last_report', 'time'],
    ['ready', 'boolean'],
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
  ],
  'Device keys A': [
    ['gateway', 'string'],
    ['key', 'string'],
    ['ship_prefix', 'string'],
    ['last_seen', 'time'],
    ['refused_requests', 'number'],
    ['accepted_requests', 'number'],
    ['accepted_readings', 'number'],
  ],
  'Sink backlog A': [
    ['time', 'time'],
    ['metric', 'string'],
    ['backlog_readings', 'number'],
  ],
  'Oldest undelivered reading per sink A': [
    ['time', 'time'],
    ['metric', 'string'],
    ['oldest_age', 'number'],
  ],
  'Sinks A': [
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
  ],
};

describe('dashboard queries on QuestDB', () => {
  const minute = 60_000;
  // A whole hour, so the readings share time buckets up to an hour; inside the variables' window.
  const base = Math.floor(Date.now() / (60 * minute)) * 60 * minute - 2 * 60 * minute;
  const at = (minutes: number) => new Date(base + minutes * minute).toISOString();
  const range = { from: base - 10 * minute, to: base + 60 * minute };
  const healthTable = uniqueTable('health');
  const keyHealthTable = uniqueTable('key_health');
  const sinkHealthTable = uniqueTable('sink_health');
  let gw: TestGateway;
  let client: pg.Client;

  // GPS pairs in every naming the dashboard pairs, and readings it must not pair.
  const readings = [
    ...[0, 1, 2].flatMap((m) => [
      { time: at(m), ship_id: 'ship-a', cargo_id: 'latitude', value: 53.5 + m / 100 },
      { time: at(m), ship_id: 'ship-a', cargo_id: 'longitude', value: 9.9 + m / 100 },
      { time: at(m), ship_id: 'ship-a', cargo_id: 'temperature', value: 20 + m },
    ]),
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
    { time: at(0), ship_id: "o'brien", cargo_id: 'Latitude', value: 1.5 },
    { time: at(0), ship_id: "o'brien", cargo_id: 'Longitude', value: 2.5 },
    { time: at(0), ship_id: "o'brien", cargo_id: 'humidity', value: 40 },
    { time: at(0), ship_id: 'ship-d', cargo_id: 'latitude', value: 10 },
    { time: at(1), ship_id: 'ship-d', cargo_id: 'longitude', value: 11 },
    { time: at(0), ship_id: 'ship-d', cargo_id: 'flat', value: 1 },
    { time: at(0), ship_id: 'ship-d', cargo_id: 'long', value: 12 },
  ];
  const allShips = ['ship-a', 'ship-b', 'ship-c', 'ship-d', "o'brien"];
  const allCargo = [...new Set(readings.map((r) => r.cargo_id))].sort();

  const model = (name: string) => loadDashboard().templating.list.find((v: DashboardVariable) => v.name === name);
  const run = async (
    rawSql: string,
    options: { ship?: string[]; cargo?: string[]; range?: { from: number; to: number }; maxDataPoints?: number } = {},
  ) => {
    const text = expandSql(
      rawSql
        .replace(/\bcargo_data\b/g, gw.table)
        .replace(/\bgateway_health\b/g, healthTable)
        .replace(/\bgateway_key_health\b/g, keyHealthTable)
        .replace(/\bgateway_sink_health\b/g, sinkHealthTable),
      {
        range: options.range ?? range,
        maxDataPoints: options.maxDataPoints ?? 1000,
        variables: {
          ship: { model: model('ship'), value: options.ship ?? ALL },
          cargo: { model: model('cargo'), value: options.cargo ?? ALL },
        },
      },
    );
    return client.query(text);
  };
  const queries = dashboardQueries(loadDashboard());
  const find = (title: string, refId = 'A') => {
    const found = queries.find((q) => q.title === title && (q.kind === 'variable' || q.refId === refId));
    if (found === undefined) throw new Error(`no query ${title} ${refId}`);
    return found;
  };
  const query = (title: string, refId = 'A') => find(title, refId).rawSql;

  beforeAll(async () => {
    gw = await startTestGateway();
    const response = await gw.post('/api/v2/ingest/batch', readings, { 'x-api-key': TEST_KEY });
    expect(response.status).toBe(200);
    expect(await waitForCount(`SELECT count() FROM "${gw.table}"`, readings.length)).toBe(readings.length);
    await sql(createHealthTable(healthTable));
    await sql(
      `INSERT INTO ${healthTable} (time, gateway, ready, queue_readings, queue_bytes, queue_max_bytes, oldest_age_s, dead_letters,
        flush_failures, consecutive_flush_failures, accepted_readings, flushed_readings, refused_requests, state, state_text) VALUES
        ('${at(0)}', 'gw-1', true, 10, 2048, 1048576, 4.5, 0, 0, 0, 100, 90, 0, 'delivering', 'delivering'),
        ('${at(1)}', 'gw-1', true, 0, 0, 1048576, null, 0, 2, 1, 110, 110, 0, 'delivering', 'delivering'),
        ('${at(0)}', 'gw-2', false, 500, 65536, 65536, 60, 1, 7, 7, 500, 0, 3, 'refusing', 'refusing readings — queue full')`,
    );
    await waitForWalApplied(healthTable);
    await sql(
      `CREATE TABLE ${keyHealthTable} (time TIMESTAMP, gateway SYMBOL, key SYMBOL, ship_prefix VARCHAR, accepted_requests LONG,
        accepted_readings LONG, refused_requests LONG, last_seen TIMESTAMP) TIMESTAMP(time) PARTITION BY DAY TTL 30 DAYS WAL`,
    );
    await sql(
      `INSERT INTO ${keyHealthTable} VALUES
        ('${at(0)}', 'gw-1', 'default', null, 5, 5, 0, '${at(0)}'),
        ('${at(1)}', 'gw-1', 'default', null, 9, 12, 0, '${at(1)}'),
        ('${at(1)}', 'gw-1', 'crane', 'crane-', 1, 1, 4, '${at(1)}'),
        ('${at(0)}', 'gw-2', 'buoy', null, 0, 0, 0, null)`,
    );
    await waitForWalApplied(keyHealthTable);
    // The sink rows as the health reporter writes them: one gateway with a local sink up to date
    // and a remote one behind and failing, in two reports.
    await sql(createSinkHealthTable(sinkHealthTable));
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
      expect(await questdb.write(encodeSinkHealth('gw-1', rows, base + minutes * minute, sinkHealthTable))).toEqual({ ok: true });
    }
    await questdb.close();
    await waitForWalApplied(sinkHealthTable);
    client = new pg.Client({ host: '127.0.0.1', port: inject('questdbPgPort'), user: 'admin', password: 'quest', database: 'qdb' });
    await client.connect();
  });

  afterAll(async () => {
    await client?.end();
    await gw?.stop();
  });

  it('runs every variable and panel query and returns the columns and types its panel needs', async () => {
    expect(Object.keys(EXPECTED).sort()).toEqual(queries.map((q) => `${q.title} ${q.refId === 'variable' ? 'variable' : q.refId}`).sort());
    for (const q of queries) {
      const key = `${q.title} ${q.refId === 'variable' ? 'variable' : q.refId}`;
      const result = await run(q.rawSql, { maxDataPoints: q.maxDataPoints });
      const columns = result.fields.map((f) => [f.name, f.dataTypeID]);
      expect(
        columns.map(([name]) => name),
        key,
      ).toEqual(EXPECTED[key]!.map(([name]) => name));
      for (const [i, [name, kind]] of EXPECTED[key]!.entries()) {
        expect(KINDS[kind], `${key}: ${name} has type ${columns[i]![1]}`).toContain(columns[i]![1]);
      }
      expect(result.rowCount, key).toBeGreaterThan(0);
      if (q.format === 'time_series') {
        const times = result.rows.map((row) => (row.time as Date).getTime());
        expect(times, `${key} is sorted by time`).toEqual([...times].sort((a, b) => a - b));
      }
    }
  });

  it('lists the ships, and the cargo of the selected ships only', async () => {
    expect((await run(query('ship'))).rows.map((r) => r.ship_id)).toEqual([...allShips].sort());
    expect((await run(query('cargo'))).rows.map((r) => r.cargo_id)).toEqual(allCargo);
    expect((await run(query('cargo'), { ship: ['ship-a'] })).rows.map((r) => r.cargo_id)).toEqual(['latitude', 'longitude', 'temperature']);
    expect((await run(query('cargo'), { ship: ["o'brien", 'ship-c'] })).rows.map((r) => r.cargo_id)).toEqual([
      'Latitude',
      'Longitude',
      'humidity',
      'lat',
      'long',
    ]);
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
    const values = await run(query('Values over time: $cargo'), { range: week, ship: ['ship-a'], cargo: ['temperature'] });
    expect(values.rows.map((r) => [r.metric, r.value])).toEqual([['ship-a / temperature', 21]]);
    // A 20-second range gives 20 ms buckets, which QuestDB's SAMPLE BY takes as 20T.
    const short = { from: base - 10_000, to: base + 10_000 };
    expect(intervalText(intervalFor(short))).toBe('20ms');
    expect((await run(query('Values over time: $cargo'), { range: short, cargo: ['temperature'] })).rows).toHaveLength(1);
  });

  it('summarises, counts and shows the latest value of the selected series', async () => {
    const selection = { ship: ['ship-a'], cargo: ['temperature'] };
    expect((await run(query('Summary'), selection)).rows).toEqual([
      { ship_id: 'ship-a', cargo_id: 'temperature', min: 20, avg: 21, max: 22, count: '3' },
    ]);
    expect((await run(query('Readings'), selection)).rows).toEqual([{ readings: '3' }]);
    expect((await run(query('Readings'))).rows).toEqual([{ readings: String(readings.length) }]);
    const latest = await run(query('Latest value per series'), selection);
    expect(latest.rows.map((r) => [r.value, (r.time as Date).toISOString()])).toEqual([[22, at(2)]]);
  });

  it("shows each gateway's queue depth, oldest queued age and flush errors", async () => {
    const gateways = await run(query('Gateways'));
    expect(gateways.rows.map((r) => [r.gateway, r.queue_readings, r.oldest_age_s, r.consecutive_flush_failures])).toEqual([
      ['gw-1', '0', null, '1'],
      ['gw-2', '500', 60, '7'],
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
