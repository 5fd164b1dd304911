// Every panel, variable, annotation and alert rule of the dashboards (the site's, the gateway's and
// the fleet's) in the states a site goes through: QuestDB before any gateway started, a gateway
// starting, a start that failed, a site without readings, readings flowing (with the site's
// catalogue), a spike that came back within the range, two sites with the same ship id, the
// gateway stopped for 11 minutes (a clean stop for an upgrade) and for 25 hours (a crash). Rows are
// written by the gateway's own reporter, lifecycle and catalogue writer, with chosen times, into
// the suite's QuestDB; the built gateway itself, failing to start and starting, against a QuestDB
// of its own. Every query runs as Grafana sends it; the alerts' summaries are read as it writes them.
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { ALL, DASHBOARD_PATH, GATEWAY_DASHBOARD_PATH, dashboardQueries, expandSql, loadDashboard } from '../scripts/lib/grafana-expand.mjs';
import { DASHBOARD_TABLES } from '../scripts/lib/grafana-rules.mjs';
import { startQuestDb, type QuestDbServer } from '../scripts/lib/questdb.mjs';
import { CatalogueStore } from '../src/catalogue/catalogue-store.js';
import { HealthLifecycle } from '../src/health/health-lifecycle.js';
import { HealthReporter } from '../src/health/health-reporter.js';
import { startEvents } from '../src/health/run-record.js';
import { createLogger } from '../src/log/logger.js';
import { QuestDbHttp } from '../src/questdb/questdb-http.js';
import { SAMPLE_CATALOGUE } from './support/catalogue-sample.js';
import { TEST_KEY } from './support/gateway.js';
import { evaluateRule, loadAlertRules, renderTemplate, type AlertInstance } from './support/grafana-alerting.js';
import { createDashboardTables, dashboardTableNames, renameTables, waitForTables, type DashboardTables } from './support/grafana-tables.js';
import { healthSnapshot } from './support/health-snapshot.js';
import { spawnGateway } from './support/process.js';
import { sql, waitForWalApplied } from './support/questdb-sql.js';
import { tempDir } from './support/temp-dir.js';

pg.types.setTypeParser(1114, (text: string) => new Date(`${text.replace(' ', 'T')}Z`));

const MINUTE = 60_000;
// biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's own ${name:format} syntax, not a template literal
const OVER_TIME = 'Values over time: ${cargo:text}';
const HOUR = 60 * MINUTE;
const site = loadDashboard(DASHBOARD_PATH);
const gatewayBoard = loadDashboard(GATEWAY_DASHBOARD_PATH);
const fleetBoard = loadDashboard(join(DASHBOARD_PATH, '..', 'fleet.json'));
const rules = [...loadAlertRules().groups, ...loadAlertRules('fleet-rules.yaml').groups].flatMap((g) => g.rules);
const fleetRules = loadAlertRules('fleet-rules.yaml').groups.flatMap((g) => g.rules);
const log = createLogger('silent');
/** The site of the gateway whose rows these states are. */
const SITE = 'harbor-a';

/** Every SQL query of a dashboard with its key: panel title and refId, or variable. */
const queriesOf = (dashboard: ReturnType<typeof loadDashboard>) =>
  dashboardQueries(dashboard).map((q) => ({ ...q, key: q.kind === 'variable' ? `${q.title} variable` : `${q.title} ${q.refId}` }));

interface Outcome {
  rows?: Record<string, unknown>[];
  error?: string;
}

let client: pg.Client;
const questdb = new QuestDbHttp({ url: inject('questdbUrl'), timeoutMs: 10_000, username: undefined, password: undefined });

beforeAll(async () => {
  client = new pg.Client({ host: '127.0.0.1', port: inject('questdbPgPort'), user: 'admin', password: 'quest', database: 'qdb' });
  await client.connect();
});
afterAll(async () => {
  await client?.end();
  await questdb.close();
});

/** How a state's SQL reaches its tables: the test's own names in the suite's QuestDB, or the provisioned ones in a QuestDB of its own. */
type Rename = (text: string) => string;
const to =
  (tables: DashboardTables): Rename =>
  (text) =>
    renameTables(text, tables);

/** Runs every query of the dashboards as Grafana would over the last 6 hours, All selected, each repeated panel once per cargo id. */
async function runDashboards(rename: Rename, on = client): Promise<Record<string, Outcome>> {
  const outcomes: Record<string, Outcome> = {};
  const range = { from: Date.now() - 6 * HOUR, to: Date.now() };
  for (const dashboard of [site, gatewayBoard, fleetBoard]) {
    const model = (name: string) => dashboard.templating.list.find((v: { name: string }) => v.name === name) ?? {};
    const variables = {
      site: { model: model('site'), value: ALL },
      ship: { model: model('ship'), value: ALL },
      cargo: { model: model('cargo'), value: ALL },
    };
    const run = async (rawSql: string, extra: Record<string, unknown> = {}, maxDataPoints?: number): Promise<Outcome> => {
      try {
        const text = expandSql(rename(rawSql), { range, variables: { ...variables, ...extra }, maxDataPoints });
        return { rows: (await on.query(text)).rows };
      } catch (error) {
        return { error: (error as Error).message };
      }
    };
    const cargoIds = ((await run(model('cargo').query ?? 'SELECT 1')).rows ?? []).map((r) => String(r.__value));
    for (const q of queriesOf(dashboard)) {
      if (q.panel?.repeat === 'cargo') {
        for (const id of cargoIds.length === 0 ? [''] : cargoIds) {
          outcomes[`${q.key} [${id}]`] = await run(q.rawSql, { cargo: { model: model('cargo'), value: [id] } }, q.maxDataPoints);
        }
      } else {
        outcomes[q.key] = await run(q.rawSql, {}, q.maxDataPoints);
      }
    }
    for (const annotation of dashboard.annotations?.list ?? []) {
      if (annotation.target?.rawSql !== undefined) outcomes[`${annotation.name} annotation`] = await run(annotation.target.rawSql);
    }
  }
  return outcomes;
}

async function evaluateRules(rename: Rename, on = client): Promise<Record<string, AlertInstance[] | string>> {
  const result: Record<string, AlertInstance[] | string> = {};
  for (const rule of rules) {
    try {
      result[rule.uid] = await evaluateRule(on, rule, rename);
    } catch (error) {
      result[rule.uid] = (error as Error).message;
    }
  }
  return result;
}

/** The summary Grafana writes for each firing instance of a rule. */
const summaries = (uid: string, instances: AlertInstance[] | string | undefined) => {
  const rule = rules.find((r) => r.uid === uid)!;
  return firing(instances).map((i) => renderTemplate(rule.annotations.summary!, i));
};

const firing = (instances: AlertInstance[] | string | undefined) => {
  if (!Array.isArray(instances)) throw new Error(`rule failed: ${instances}`);
  return instances.filter((i) => i.firing);
};
const errors = (outcomes: Record<string, Outcome>) =>
  Object.entries(outcomes)
    .filter(([, o]) => o.error !== undefined)
    .map(([key, o]) => `${key}: ${o.error}`);
const rows = (outcomes: Record<string, Outcome>, key: string) => {
  const outcome = outcomes[key];
  if (outcome?.rows === undefined) throw new Error(`${key}: ${outcome?.error ?? 'not run'}`);
  return outcome.rows;
};

/** The gateway's writers on a state's tables. */
function writers(tables: DashboardTables, gateway = 'gw-site', siteId = SITE) {
  const reporter = new HealthReporter(questdb, gateway, log, tables.health, tables.events);
  const catalogue = (path: string | undefined) =>
    new CatalogueStore({
      path,
      pollMs: 60_000,
      gateway,
      site: siteId,
      questdb,
      logger: log,
      tables: { cargo: tables.cargoCatalogue, ships: tables.shipCatalogue },
    });
  return { reporter, catalogue };
}

/** A catalogue file of the test's own. */
function catalogueFile(text = SAMPLE_CATALOGUE): string {
  const file = `${tempDir('catalogue')}/catalogue.yaml`;
  writeFileSync(file, text);
  return file;
}

/** A gateway started at `at`: its tables, its `started` event, its catalogue (empty without a file). */
async function startedGateway(tables: DashboardTables, at: number, catalogue?: string) {
  const { reporter, catalogue: store } = writers(tables);
  await createDashboardTables(tables);
  reporter.event(...startEvents(undefined, { gateway: 'gw-site', version: '0.5.0', at }));
  expect(await reporter.prepare()).toBe(true);
  expect(await store(catalogue).publish(at)).toBe(true);
  return reporter;
}

/** Rows of readings: [time, site, ship, cargo id, value]. */
async function insertReadings(tables: DashboardTables, rows: [number, string, string, string, number][]): Promise<void> {
  const values = rows.map(
    ([t, siteId, ship, cargo, value]) => `('${new Date(t).toISOString()}', '${siteId}', '${ship}', '${cargo}', ${value})`,
  );
  await sql(`INSERT INTO ${tables.readings} (time, site, ship_id, cargo_id, value) VALUES ${values.join(', ')}`);
}

/** Readings of ships a and b: a temperature every minute from `from` to `to`, a fix, a reefer above its range, an unknown id. */
async function writeReadings(tables: DashboardTables, from: number, to: number): Promise<void> {
  const rows: [number, string, string, string, number][] = [];
  for (let t = from; t <= to; t += MINUTE) {
    rows.push([t, SITE, 'ship-a', 'temp_hold', 4.25], [t, SITE, 'ship-b', 'temp_hold', 5.5], [t, SITE, 'ship-a', 'reefer4_temp', 9.34]);
  }
  rows.push(
    [to, SITE, 'ship-a', 'latitude', 53.5461],
    [to, SITE, 'ship-a', 'longitude', 9.9661],
    [to, SITE, 'ship-b', 'draught', 7.2],
    [to, SITE, 'ship-b', 'rssi', -97],
    [to, SITE, 'ship-b', 'snr', 7.5],
  );
  await insertReadings(tables, rows);
}

/** Health rows every 10 s from `from` to `to`, delivering. */
async function writeReports(reporter: HealthReporter, from: number, to: number): Promise<void> {
  for (let t = from; t <= to; t += 10_000) expect(await reporter.report(healthSnapshot(), t)).toBe(true);
}

interface State {
  tables: DashboardTables;
  outcomes: Record<string, Outcome>;
  alerts: Record<string, AlertInstance[] | string>;
}

/**
 * The dashboards' answers and the rules' alerts once `setUp` has written a state into tables of
 * its own (read in the tests, after the describe's beforeAll).
 */
function inState(setUp: (tables: DashboardTables) => Promise<void>): State {
  const state: State = { tables: dashboardTableNames(), outcomes: {}, alerts: {} };
  beforeAll(async () => {
    await setUp(state.tables);
    await waitForTables(state.tables);
    [state.outcomes, state.alerts] = [await runDashboards(to(state.tables)), await evaluateRules(to(state.tables))];
  });
  return state;
}

const answersWithoutError = (state: State) =>
  it('answers every panel, variable, annotation and rule of the three dashboards without an error', () => {
    expect(errors(state.outcomes)).toEqual([]);
    expect(Object.entries(state.alerts).filter(([, a]) => typeof a === 'string')).toEqual([]);
  });

const alertsForNothing = (state: State) =>
  it('alerts for nothing', () => {
    for (const rule of rules) expect(firing(state.alerts[rule.uid]), rule.uid).toEqual([]);
  });

describe('QuestDB before any gateway started', () => {
  const tables = dashboardTableNames();

  it('says so in words from the tables rule, while every other query fails and its rule keeps its last state', async () => {
    const rulesNow = await evaluateRules(to(tables));
    expect(firing(rulesNow['harbor-tables-missing']).map((i) => i.value)).toEqual([0]);
    // The fleet's rules too: one alert, not one per rule, and none in Error.
    for (const rule of rules.filter((r) => r.uid !== 'harbor-tables-missing')) {
      expect(rulesNow[rule.uid], rule.uid).toMatch(/does not exist/);
      expect(rule.execErrState, rule.uid).toBe('KeepLast');
    }
    const outcomes = await runDashboards(to(tables));
    expect(Object.values(outcomes).every((o) => o.error?.includes('does not exist'))).toBe(true);
  });
});

describe('the built gateway against a QuestDB of its own', () => {
  let server: QuestDbServer;
  let own: pg.Client;
  const provisioned: Rename = (text) => text;
  const tablesNow = async () =>
    (await sql<[string]>('SELECT table_name FROM tables()', server.httpUrl)).dataset
      .map(([name]) => name)
      .filter((n) => DASHBOARD_TABLES.includes(n));
  const env = (name: string) => ({
    API_KEY: TEST_KEY,
    DATA_DIR: tempDir('states-gw'),
    QUESTDB_URL: server.httpUrl,
    GATEWAY_NAME: name,
    SITE_ID: SITE,
  });

  beforeAll(async () => {
    server = await startQuestDb({ dataDir: tempDir('states-qdb') });
    own = new pg.Client({ host: '127.0.0.1', port: server.pgPort, user: 'admin', password: 'quest', database: 'qdb' });
    await own.connect();
  });
  afterAll(async () => {
    await own?.end();
    await server?.stop();
  });

  it('leaves every table the dashboards read after a start that failed (a port in use), and says why it stopped', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const port = String((taken.address() as { port: number }).port);
    try {
      await expect(spawnGateway({ ...env('gw-failed'), PORT: port })).rejects.toThrow(/did not start/);
    } finally {
      taken.close();
    }
    expect((await tablesNow()).sort()).toEqual([...DASHBOARD_TABLES].sort());
    for (const table of DASHBOARD_TABLES) await waitForWalApplied(table, 20_000, server.httpUrl);
    const outcomes = await runDashboards(provisioned, own);
    expect(errors(outcomes)).toEqual([]);
    const alerts = await evaluateRules(provisioned, own);
    expect(Object.entries(alerts).filter(([, a]) => typeof a === 'string')).toEqual([]);
    // Red at once, never "starting" for ever; the stopped-gateway rule carries the reason.
    expect(rows(outcomes, 'Gateway state A').map((r) => r.state)).toEqual([
      expect.stringMatching(/^failed to start — .*EADDRINUSE.* \(\d+ s ago\)$/),
    ]);
    expect((alerts['harbor-gateway-stopped'] as AlertInstance[]).map((i) => i.labels.last_word)).toEqual([
      expect.stringMatching(/^failed to start — .*EADDRINUSE/),
    ]);
  });

  it('has created every table the dashboards read by the time it answers', async () => {
    await sql('DROP ALL TABLES', server.httpUrl);
    expect(await tablesNow()).toEqual([]);
    const gw = await spawnGateway(env('gw-starting'));
    try {
      expect((await tablesNow()).sort()).toEqual([...DASHBOARD_TABLES].sort());
      expect((await fetch(`${gw.url}/healthz`)).status).toBe(200);
    } finally {
      gw.child.kill('SIGTERM');
      await gw.exited;
    }
  });
});

describe('a gateway starting: its tables and its start, no health row yet, no readings', () => {
  const state = inState(async (tables) => {
    await startedGateway(tables, Date.now());
  });

  answersWithoutError(state);

  it('shows the gateway as starting, with what came before, and counts no readings', () => {
    expect(rows(state.outcomes, 'Gateway state A')).toEqual([
      { gateway: 'gw-site', state: 'starting: started 0.5.0 (no earlier run on this data directory)', last_report: expect.any(Date) },
    ]);
    expect(rows(state.outcomes, 'Ships reporting now A')).toEqual([{ reporting: '0', silent: '0', seen: '0' }]);
    expect(rows(state.outcomes, 'Cargo outside the normal range A')).toEqual([{ outside: '0', left_last_hour: '0' }]);
    expect(rows(state.outcomes, 'Readings A')).toEqual([{ readings: '0' }]);
    expect(rows(state.outcomes, 'Ships at a glance A')).toEqual([]);
    expect(rows(state.outcomes, 'Gateway events annotation').map((r) => r.text)).toEqual([
      'gw-site: started 0.5.0 (no earlier run on this data directory)',
    ]);
  });

  alertsForNothing(state);
});

describe('starts that failed 11 minutes ago: one said why, one never reported', () => {
  const state = inState(async (tables) => {
    const at = Date.now() - 11 * MINUTE;
    await startedGateway(tables, at - 2 * HOUR);
    // The gateway's own lifecycle, as a start whose port was taken runs it.
    const reporter = new HealthReporter(questdb, 'gw-failed', log, tables.health, tables.events);
    const lifecycle = new HealthLifecycle({
      dataDir: tempDir('failed-start'),
      gateway: 'gw-failed',
      version: '0.5.0',
      reporter,
      logger: log,
      startedAt: at - 1000,
    });
    expect(await lifecycle.prepared).toBe(true);
    expect(await lifecycle.failedStart('listen EADDRINUSE: address already in use 0.0.0.0:8080', at)).toBe(true);
    // A start cut short before it could say anything (a power cut, kill -9).
    const { reporter: hung } = writers(tables, 'gw-hung');
    hung.event(...startEvents(undefined, { gateway: 'gw-hung', version: '0.5.0', at }));
    expect(await hung.prepare()).toBe(true);
  });

  answersWithoutError(state);

  it('shows each as stopped or silent since its start, in red, never as starting', () => {
    const states = rows(state.outcomes, 'Gateway state A').filter((r) => r.gateway !== 'gw-site');
    expect(states.map((r) => [r.gateway, r.state])).toEqual([
      ['gw-failed', 'failed to start — listen EADDRINUSE: address already in use 0.0.0.0:8080 (11 min ago)'],
      ['gw-hung', 'no report since its start 11 min ago — it failed to start, or cannot reach QuestDB'],
    ]);
    const colours = gatewayBoard.panels
      .find((p: { title: string }) => p.title === 'Gateway state')
      .fieldConfig.overrides.find((o: { matcher: { options: string } }) => o.matcher.options === 'state')
      .properties.find((p: { id: string }) => p.id === 'mappings').value;
    const colourOf = (text: string) =>
      colours.find((m: { options: { pattern: string } }) => new RegExp(m.options.pattern).test(text))?.options.result.color;
    expect(states.map((r) => colourOf(String(r.state)))).toEqual(['red', 'red']);
  });

  it('alerts for both with their last word', () => {
    expect(
      firing(state.alerts['harbor-gateway-stopped'])
        .filter((i) => i.labels.gateway !== 'gw-site')
        .map((i) => [i.labels.gateway, i.labels.last_word])
        .sort(),
    ).toEqual([
      ['gw-failed', 'failed to start — listen EADDRINUSE: address already in use 0.0.0.0:8080'],
      ['gw-hung', 'started, and wrote no report since'],
    ]);
  });
});

describe('a site without readings: the gateway reports, no ship has sent anything', () => {
  const state = inState(async (tables) => {
    const now = Date.now();
    const reporter = await startedGateway(tables, now - 2 * MINUTE);
    await writeReports(reporter, now - 110_000, now);
  });

  it('answers every query with no rows or zero counts, never an error, the fleet panels too', () => {
    expect(errors(state.outcomes)).toEqual([]);
    // What the gateway wrote about itself; everything about ships and cargo is empty.
    const ofTheGateway = ['Gateway A', 'Gateway state A', 'Gateway events A', 'Gateway events annotation', 'Gateways A'];
    const series = ['Queue depth A', 'Oldest queued reading A', 'Flush errors A'];
    const counts = ['Ships reporting now A', 'Cargo outside the normal range A', 'Readings A'];
    const fleetCounts = ['Sites reporting A', 'Sites silent A', 'Sites refusing readings A', 'Sites with a clock off A'];
    for (const [key, outcome] of Object.entries(state.outcomes)) {
      if (![...ofTheGateway, ...series, ...counts, ...fleetCounts].includes(key)) expect(outcome.rows, key).toEqual([]);
    }
    expect(counts.map((key) => Object.values(rows(state.outcomes, key)[0]!))).toEqual([['0', '0', '0'], ['0', '0'], ['0']]);
    expect(fleetCounts.map((key) => rows(state.outcomes, key))).toEqual(fleetCounts.map(() => [{ sites: '0' }]));
    expect(rows(state.outcomes, 'Gateway state A').map((r) => r.state)).toEqual(['delivering']);
    expect(rows(state.outcomes, 'Gateway A').map((r) => r.state)).toEqual(['delivering']);
  });

  it('leaves no fleet rule in error on a site no report reaches', () => {
    for (const rule of fleetRules) expect(state.alerts[rule.uid], rule.uid).toEqual([]);
  });

  alertsForNothing(state);
});

describe('readings flowing, with the site catalogue', () => {
  const state = inState(async (tables) => {
    const now = Date.now();
    const reporter = await startedGateway(tables, now - 70 * MINUTE, catalogueFile());
    await writeReports(reporter, now - 10 * MINUTE, now);
    await writeReadings(tables, now - 50 * MINUTE, now - 20_000);
  });

  answersWithoutError(state);

  it('names ships and cargo from the catalogue and leaves the ids it does not know as they are', () => {
    expect(rows(state.outcomes, 'ship variable')).toEqual([
      { __value: 'ship-a', __text: 'MV Alpha' },
      { __value: 'ship-b', __text: 'ship-b' },
    ]);
    // Positions and radio fields are not cargo.
    expect(rows(state.outcomes, 'cargo variable')).toEqual([
      { __value: 'reefer4_temp', __text: 'Reefer 4 temperature' },
      { __value: 'temp_hold', __text: 'Temperature (temp_hold)' },
      { __value: 'draught', __text: 'draught' },
    ]);
  });

  it('shows each ship at a glance: last seen, readings in the last hour, position, worst cargo state', () => {
    const glance = rows(state.outcomes, 'Ships at a glance A');
    expect(glance.map((r) => [r.site, r.ship, r.readings_last_hour, r.latitude, r.longitude, r.cargo, r.ship_id])).toEqual([
      [SITE, 'MV Alpha', '102', 53.5461, 9.9661, '1 of 2 outside the normal range', 'ship-a'],
      [SITE, 'ship-b', '53', null, null, 'no normal range set', 'ship-b'],
    ]);
    for (const r of glance) expect(Number(r.last_seen)).toBeLessThan(120);
    expect(rows(state.outcomes, 'Ships reporting now A')).toEqual([{ reporting: '2', silent: '0', seen: '2' }]);
    expect(rows(state.outcomes, 'Cargo outside the normal range A')).toEqual([{ outside: '1', left_last_hour: '1' }]);
  });

  it('shows the latest cargo with unit, normal range and state, and configures the panels of each cargo id from the catalogue', () => {
    expect(rows(state.outcomes, 'Cargo now A').map((r) => [r.ship, r.cargo, r.value, r.unit, r.normal_range, r.state])).toEqual([
      ['MV Alpha', 'Reefer 4 temperature', 9.3, '°C', '2 to 8 °C', 'above'],
      ['MV Alpha', 'Temperature (temp_hold)', 4.25, '°C', '', 'no range'],
      ['ship-b', 'Temperature (temp_hold)', 5.5, '°C', '', 'no range'],
      ['ship-b', 'draught', 7.2, '', '', 'no range'],
    ]);
    expect(rows(state.outcomes, `${OVER_TIME} B [reefer4_temp]`)).toEqual([{ unit: 'suffix:°C', decimals: 1, low: 2, high: 8 }]);
    expect(rows(state.outcomes, `${OVER_TIME} B [temp_hold]`)).toEqual([{ unit: 'suffix:°C', decimals: null, low: null, high: null }]);
    expect(rows(state.outcomes, `${OVER_TIME} B [draught]`)).toEqual([]);
    // One site: the lines are the ships' names alone.
    expect(new Set(rows(state.outcomes, `${OVER_TIME} A [temp_hold]`).map((r) => r.metric))).toEqual(new Set(['MV Alpha', 'ship-b']));
  });

  it('shows positions and radio link quality apart from the cargo', () => {
    expect(rows(state.outcomes, 'Position details A').map((r) => [r.ship, r.latitude, r.longitude])).toEqual([
      ['MV Alpha', 53.5461, 9.9661],
    ]);
    expect(rows(state.outcomes, 'Radio link now A').map((r) => [r.ship, r.rssi, r.snr])).toEqual([['ship-b', -97, 7.5]]);
    expect(
      rows(state.outcomes, 'Radio link quality A')
        .map((r) => r.metric)
        .sort(),
    ).toEqual(['ship-b rssi', 'ship-b snr']);
    expect(rows(state.outcomes, 'Cargo summary A').map((r) => r.cargo)).not.toContain('latitude');
  });

  it('alerts for the reefer above its range, in plain numbers, and for no gateway and no ship', () => {
    expect(firing(state.alerts['harbor-cargo-outside']).map((i) => [i.labels.ship, i.labels.cargo, i.labels.crossed, i.value])).toEqual([
      ['MV Alpha', 'Reefer 4 temperature', 'above 8 °C', expect.closeTo(1.34, 5)],
    ]);
    expect(summaries('harbor-cargo-outside', state.alerts['harbor-cargo-outside'])).toEqual([
      `MV Alpha at ${SITE}: Reefer 4 temperature above 8 °C for 10 min (by 1.34 °C)`,
    ]);
    expect(firing(state.alerts['harbor-gateway-stopped'])).toEqual([]);
    expect(firing(state.alerts['harbor-ship-silent'])).toEqual([]);
    expect(rules.find((r) => r.uid === 'harbor-cargo-outside')?.for).toBe('10m');
  });
});

describe('a spike above the range four minutes ago, back within it since', () => {
  const SPIKE_CATALOGUE = `ships:\n  ship-a: MV Alpha\ncargo:\n  - match: hold_pressure\n    name: Hold pressure\n    unit: kPa\n    min: 100\n    max: 200\n`;
  const state = inState(async (tables) => {
    const now = Date.now();
    const reporter = await startedGateway(tables, now - 70 * MINUTE, catalogueFile(SPIKE_CATALOGUE));
    await writeReports(reporter, now - MINUTE, now);
    const readings: [number, string, string, string, number][] = [];
    for (let m = 30; m >= 1; m--) readings.push([now - m * MINUTE, SITE, 'ship-a', 'hold_pressure', m === 4 ? 250 : 150]);
    await insertReadings(tables, readings);
  });

  answersWithoutError(state);

  it('shows the spike on the first screen and in the summary, though the latest reading is normal', () => {
    expect(rows(state.outcomes, 'Cargo now A').map((r) => [r.cargo, r.value, r.state])).toEqual([['Hold pressure', 150, 'normal']]);
    expect(rows(state.outcomes, 'Cargo outside the normal range A')).toEqual([{ outside: '0', left_last_hour: '1' }]);
    expect(rows(state.outcomes, 'Ships at a glance A').map((r) => r.cargo)).toEqual([
      'within the normal range now; 1 left it in the last hour',
    ]);
    expect(rows(state.outcomes, 'Cargo summary A').map((r) => [r.cargo, r.min, r.max, r.range_state])).toEqual([
      ['Hold pressure', 150, 250, 'above'],
    ]);
    expect(firing(state.alerts['harbor-cargo-outside'])).toEqual([]);
  });
});

describe('two sites with a ship-1 each: one reporting, one silent for 62 minutes below its range', () => {
  const CATALOGUE = `ships:\n  ship-1: MV One\ncargo:\n  - match: reefer4_temp\n    name: Reefer 4 temperature\n    unit: °C\n    min: 2\n    max: 8\n    decimals: 1\n`;
  const state = inState(async (tables) => {
    const now = Date.now();
    // The centre's gateway is site-a's; site-b's readings reach its QuestDB under their own site.
    const reporter = await startedGateway(tables, now - 3 * HOUR, catalogueFile(CATALOGUE));
    await writeReports(reporter, now - MINUTE, now);
    const readings: [number, string, string, string, number][] = [];
    for (let m = 120; m >= 1; m--) {
      readings.push([now - m * MINUTE, SITE, 'ship-1', 'reefer4_temp', 5]);
      if (m >= 62) readings.push([now - m * MINUTE, 'harbor-b', 'ship-1', 'reefer4_temp', 1.7]);
    }
    await insertReadings(tables, readings);
  });

  answersWithoutError(state);

  it('keeps the two ships apart under All, each named by its own site', () => {
    expect(rows(state.outcomes, 'ship variable')).toEqual([{ __value: 'ship-1', __text: 'ship-1' }]);
    const glance = rows(state.outcomes, 'Ships at a glance A');
    expect(glance.map((r) => [r.site, r.ship, Math.floor(Number(r.last_seen) / 60), r.cargo])).toEqual([
      [SITE, 'MV One', 1, 'all within the normal range'],
      ['harbor-b', 'ship-1', 62, '1 of 1 outside the normal range'],
    ]);
    expect(rows(state.outcomes, 'Ships reporting now A')).toEqual([{ reporting: '1', silent: '1', seen: '2' }]);
    expect(rows(state.outcomes, 'Cargo outside the normal range A')).toEqual([{ outside: '1', left_last_hour: '0' }]);
    expect(rows(state.outcomes, 'Cargo now A').map((r) => [r.site, r.ship, r.value, r.state])).toEqual([
      [SITE, 'MV One', 5, 'normal'],
      ['harbor-b', 'ship-1', expect.closeTo(1.7, 9), 'below'],
    ]);
    expect(rows(state.outcomes, 'Cargo summary A').map((r) => [r.site, r.ship, r.min, r.max, r.range_state])).toEqual([
      [SITE, 'MV One', 5, 5, 'normal'],
      ['harbor-b', 'ship-1', expect.closeTo(1.7, 9), expect.closeTo(1.7, 9), 'below'],
    ]);
    expect(new Set(rows(state.outcomes, `${OVER_TIME} A [reefer4_temp]`).map((r) => r.metric))).toEqual(
      new Set([`MV One (${SITE})`, 'ship-1 (harbor-b)']),
    );
  });

  it('alerts for the silent ship and its cold cargo with their site, in plain numbers', () => {
    expect(summaries('harbor-ship-silent', state.alerts['harbor-ship-silent'])).toEqual([
      'Ship ship-1 at harbor-b has sent no reading for 62 min',
    ]);
    expect(summaries('harbor-cargo-outside', state.alerts['harbor-cargo-outside'])).toEqual([
      'ship-1 at harbor-b: Reefer 4 temperature below 2 °C for 10 min (by 0.3 °C)',
    ]);
    // The silent ship is one alert: its series are its own rule's while it reports.
    expect(firing(state.alerts['harbor-series-silent'])).toEqual([]);
  });
});

describe('the gateway stopped for an upgrade 11 minutes ago', () => {
  const state = inState(async (tables) => {
    const stopped = Date.now() - 11 * MINUTE;
    const reporter = await startedGateway(tables, stopped - 2 * HOUR);
    await writeReports(reporter, stopped - 5 * MINUTE, stopped - 1000);
    await writeReadings(tables, stopped - HOUR, stopped - 1000);
    expect(
      await reporter.reportStopped(healthSnapshot({ ready: false, queued: 12 }), { code: 'upgrade', text: 'for an upgrade' }, stopped),
    ).toBe(true);
  });

  answersWithoutError(state);

  it('shows the gateway stopped and why, never delivering, and no ship reporting', () => {
    expect(rows(state.outcomes, 'Gateway state A').map((r) => r.state)).toEqual([
      'stopped — for an upgrade, 12 readings queued for the next start (11 min ago)',
    ]);
    expect(rows(state.outcomes, 'Ships reporting now A')).toEqual([{ reporting: '0', silent: '2', seen: '2' }]);
    for (const r of rows(state.outcomes, 'Ships at a glance A')) expect(Number(r.last_seen)).toBeGreaterThanOrEqual(11 * 60);
    expect(rows(state.outcomes, 'Gateway events annotation').map((r) => r.text)).toContain(
      'gw-site: stopped — for an upgrade, 12 readings queued for the next start',
    );
  });

  it('alerts for the stopped gateway with its reason, and once for each silent ship, not for each of its sensors', () => {
    expect(firing(state.alerts['harbor-gateway-stopped']).map((i) => [i.labels.gateway, i.labels.last_word, Math.floor(i.value!)])).toEqual(
      [['gw-site', 'stopped — for an upgrade, 12 readings queued for the next start', 11]],
    );
    expect(summaries('harbor-ship-silent', state.alerts['harbor-ship-silent']).sort()).toEqual([
      `Ship ship-a at ${SITE} has sent no reading for 11 min`,
      `Ship ship-b at ${SITE} has sent no reading for 11 min`,
    ]);
    expect(state.alerts['harbor-series-silent']).toEqual([]);
    // The rules of a reporting gateway have no row of it now: the stopped-gateway rule speaks for it.
    for (const uid of ['harbor-oldest-queued', 'harbor-flush-failures', 'harbor-clock-unsynchronised'])
      expect(state.alerts[uid], uid).toEqual([]);
  });
});

describe('the gateway gone for 25 hours without a word (a crash)', () => {
  const state = inState(async (tables) => {
    const gone = Date.now() - 25 * HOUR;
    const reporter = await startedGateway(tables, gone - HOUR, catalogueFile());
    await writeReports(reporter, gone - 3 * MINUTE, gone);
    await writeReadings(tables, gone - HOUR, gone);
  });

  answersWithoutError(state);

  it('shows how long the gateway has been silent and the ships it last saw, where it last saw them', () => {
    expect(rows(state.outcomes, 'Gateway state A').map((r) => r.state)).toEqual([
      'no report for 25 h — stopped without a word (crash or power cut), or cut off from QuestDB',
    ]);
    expect(rows(state.outcomes, 'Ships at a glance A').map((r) => [r.ship, r.readings_last_hour, r.latitude, r.longitude])).toEqual([
      ['MV Alpha', '0', 53.5461, 9.9661],
      ['ship-b', '0', null, null],
    ]);
    expect(rows(state.outcomes, 'Ships reporting now A')).toEqual([{ reporting: '0', silent: '2', seen: '2' }]);
  });

  it('still alerts for the stopped gateway, once for each silent ship and for the cargo last seen outside its range, in plain numbers', () => {
    expect(
      firing(state.alerts['harbor-gateway-stopped']).map((i) => [i.labels.gateway, i.labels.last_word, Math.round(i.value! / 60)]),
    ).toEqual([['gw-site', 'no stop reported: it crashed, lost power, or lost its way to QuestDB', 25]]);
    expect(summaries('harbor-ship-silent', state.alerts['harbor-ship-silent']).sort()).toEqual([
      `Ship MV Alpha at ${SITE} has sent no reading for 1500 min`,
      `Ship ship-b at ${SITE} has sent no reading for 1500 min`,
    ]);
    expect(state.alerts['harbor-series-silent']).toEqual([]);
    expect(summaries('harbor-cargo-outside', state.alerts['harbor-cargo-outside'])).toEqual([
      `MV Alpha at ${SITE}: Reefer 4 temperature above 8 °C for 10 min (by 1.34 °C)`,
    ]);
  });
});
