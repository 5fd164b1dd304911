// Every panel, variable, annotation and alert rule of both dashboards in the states a site goes
// through: QuestDB before any gateway started, a gateway starting, a site without readings,
// readings flowing (with the site's catalogue), the gateway stopped for 11 minutes (a clean stop
// for an upgrade) and for 25 hours (a crash). Rows are written by the gateway's own reporter and
// catalogue writer, with chosen times, into the suite's QuestDB; every query runs as Grafana sends it.
import { writeFileSync } from 'node:fs';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { ALL, DASHBOARD_PATH, GATEWAY_DASHBOARD_PATH, dashboardQueries, expandSql, loadDashboard } from '../scripts/lib/grafana-expand.mjs';
import { CatalogueStore } from '../src/catalogue/catalogue-store.js';
import { HealthReporter } from '../src/health/health-reporter.js';
import { startEvents } from '../src/health/run-record.js';
import { createLogger } from '../src/log/logger.js';
import { QuestDbHttp } from '../src/questdb/questdb-http.js';
import { SAMPLE_CATALOGUE } from './support/catalogue-sample.js';
import { evaluateRule, loadAlertRules, type AlertInstance } from './support/grafana-alerting.js';
import { createDashboardTables, dashboardTableNames, renameTables, waitForTables, type DashboardTables } from './support/grafana-tables.js';
import { healthSnapshot } from './support/health-snapshot.js';
import { sql } from './support/questdb-sql.js';
import { tempDir } from './support/temp-dir.js';

pg.types.setTypeParser(1114, (text: string) => new Date(`${text.replace(' ', 'T')}Z`));

const MINUTE = 60_000;
// biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's own ${name:format} syntax, not a template literal
const OVER_TIME = 'Values over time: ${cargo:text}';
const HOUR = 60 * MINUTE;
const site = loadDashboard(DASHBOARD_PATH);
const gatewayBoard = loadDashboard(GATEWAY_DASHBOARD_PATH);
const rules = loadAlertRules().groups.flatMap((g) => g.rules);
const log = createLogger('silent');

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

/** Runs every query of both dashboards as Grafana would over the last 6 hours, All selected, each repeated panel once per cargo id. */
async function runDashboards(tables: DashboardTables): Promise<Record<string, Outcome>> {
  const outcomes: Record<string, Outcome> = {};
  const range = { from: Date.now() - 6 * HOUR, to: Date.now() };
  for (const dashboard of [site, gatewayBoard]) {
    const model = (name: string) => dashboard.templating.list.find((v: { name: string }) => v.name === name) ?? {};
    const variables = {
      site: { model: model('site'), value: ALL },
      ship: { model: model('ship'), value: ALL },
      cargo: { model: model('cargo'), value: ALL },
    };
    const run = async (rawSql: string, extra: Record<string, unknown> = {}, maxDataPoints?: number): Promise<Outcome> => {
      try {
        const text = expandSql(renameTables(rawSql, tables), { range, variables: { ...variables, ...extra }, maxDataPoints });
        return { rows: (await client.query(text)).rows };
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
    for (const annotation of dashboard.annotations.list) {
      if (annotation.target?.rawSql !== undefined) outcomes[`${annotation.name} annotation`] = await run(annotation.target.rawSql);
    }
  }
  return outcomes;
}

async function evaluateRules(tables: DashboardTables): Promise<Record<string, AlertInstance[] | string>> {
  const result: Record<string, AlertInstance[] | string> = {};
  for (const rule of rules) {
    try {
      result[rule.uid] = await evaluateRule(client, rule, (text) => renameTables(text, tables));
    } catch (error) {
      result[rule.uid] = (error as Error).message;
    }
  }
  return result;
}

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
function writers(tables: DashboardTables, gateway = 'gw-site') {
  const reporter = new HealthReporter(questdb, gateway, log, tables.health, tables.events);
  const catalogue = (path: string | undefined) =>
    new CatalogueStore({
      path,
      pollMs: 60_000,
      gateway,
      questdb,
      logger: log,
      tables: { cargo: tables.cargoCatalogue, ships: tables.shipCatalogue },
    });
  return { reporter, catalogue };
}

/** A gateway started at `at`: its tables, its `started` event, its catalogue (empty without a file). */
async function startedGateway(tables: DashboardTables, at: number, catalogueFile?: string) {
  const { reporter, catalogue } = writers(tables);
  await createDashboardTables(tables);
  reporter.event(...startEvents(undefined, { gateway: 'gw-site', version: '0.5.0', at }));
  expect(await reporter.prepare()).toBe(true);
  expect(await catalogue(catalogueFile).publish(at)).toBe(true);
  return reporter;
}

/** Readings of ships a and b: a temperature every minute from `from` to `to`, a fix, a reefer above its range, an unknown id. */
async function writeReadings(tables: DashboardTables, from: number, to: number): Promise<void> {
  const values: string[] = [];
  for (let t = from; t <= to; t += MINUTE) {
    const at = new Date(t).toISOString();
    values.push(
      `('${at}', 'ship-a', 'temp_hold', 4.25)`,
      `('${at}', 'ship-b', 'temp_hold', 5.5)`,
      `('${at}', 'ship-a', 'reefer4_temp', 9.34)`,
    );
  }
  const last = new Date(to).toISOString();
  values.push(
    `('${last}', 'ship-a', 'latitude', 53.5461)`,
    `('${last}', 'ship-a', 'longitude', 9.9661)`,
    `('${last}', 'ship-b', 'draught', 7.2)`,
    `('${last}', 'ship-b', 'rssi', -97)`,
    `('${last}', 'ship-b', 'snr', 7.5)`,
  );
  await sql(`INSERT INTO ${tables.readings} (time, ship_id, cargo_id, value) VALUES ${values.join(', ')}`);
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
    [state.outcomes, state.alerts] = [await runDashboards(state.tables), await evaluateRules(state.tables)];
  });
  return state;
}

const alertsForNothing = (state: State) =>
  it('alerts for nothing', () => {
    for (const rule of rules) expect(firing(state.alerts[rule.uid]), rule.uid).toEqual([]);
  });

describe('QuestDB before any gateway started', () => {
  const tables = dashboardTableNames();

  it('says so in words from the tables rule, while every other query fails and its rule keeps its last state', async () => {
    const rulesNow = await evaluateRules(tables);
    expect(firing(rulesNow['harbor-tables-missing']).map((i) => i.value)).toEqual([0]);
    for (const rule of rules.filter((r) => r.uid !== 'harbor-tables-missing')) {
      expect(rulesNow[rule.uid], rule.uid).toMatch(/does not exist/);
      expect(rule.execErrState, rule.uid).toBe('KeepLast');
    }
    const outcomes = await runDashboards(tables);
    expect(Object.values(outcomes).every((o) => o.error?.includes('does not exist'))).toBe(true);
  });
});

describe('a gateway starting: its tables and its start, no health row yet, no readings', () => {
  const state = inState(async (tables) => {
    await startedGateway(tables, Date.now());
  });

  it('answers every panel, variable, annotation and rule without an error', () => {
    expect(errors(state.outcomes)).toEqual([]);
    expect(Object.values(state.alerts).filter((a) => typeof a === 'string')).toEqual([]);
  });

  it('shows the gateway as starting, with what came before, and counts no readings', () => {
    expect(rows(state.outcomes, 'Gateway state A')).toEqual([
      { gateway: 'gw-site', state: 'starting: started 0.5.0 (no earlier run on this data directory)', last_report: expect.any(Date) },
    ]);
    expect(rows(state.outcomes, 'Ships reporting now A')).toEqual([{ reporting: '0', seen: '0' }]);
    expect(rows(state.outcomes, 'Cargo outside the normal range A')).toEqual([{ outside: '0' }]);
    expect(rows(state.outcomes, 'Readings A')).toEqual([{ readings: '0' }]);
    expect(rows(state.outcomes, 'Ships at a glance A')).toEqual([]);
    expect(rows(state.outcomes, 'Gateway events annotation').map((r) => r.text)).toEqual([
      'gw-site: started 0.5.0 (no earlier run on this data directory)',
    ]);
  });

  alertsForNothing(state);
});

describe('a site without readings: the gateway reports, no ship has sent anything', () => {
  const state = inState(async (tables) => {
    const now = Date.now();
    const reporter = await startedGateway(tables, now - 2 * MINUTE);
    await writeReports(reporter, now - 110_000, now);
  });

  it('answers every query with no rows or zero counts, never an error', () => {
    expect(errors(state.outcomes)).toEqual([]);
    // What the gateway wrote about itself; everything about ships and cargo is empty.
    const ofTheGateway = ['Gateway A', 'Gateway state A', 'Gateway events A', 'Gateway events annotation', 'Gateways A'];
    const series = ['Queue depth A', 'Oldest queued reading A', 'Flush errors A'];
    const counts = ['Ships reporting now A', 'Cargo outside the normal range A', 'Readings A'];
    for (const [key, outcome] of Object.entries(state.outcomes)) {
      if (![...ofTheGateway, ...series, ...counts].includes(key)) expect(outcome.rows, key).toEqual([]);
    }
    expect(counts.map((key) => Object.values(rows(state.outcomes, key)[0]!))).toEqual([['0', '0'], ['0'], ['0']]);
    expect(rows(state.outcomes, 'Gateway state A').map((r) => r.state)).toEqual(['delivering']);
    expect(rows(state.outcomes, 'Gateway A').map((r) => r.state)).toEqual(['delivering']);
  });

  alertsForNothing(state);
});

describe('readings flowing, with the site catalogue', () => {
  const state = inState(async (tables) => {
    const now = Date.now();
    const file = `${tempDir('catalogue')}/catalogue.yaml`;
    writeFileSync(file, SAMPLE_CATALOGUE);
    const reporter = await startedGateway(tables, now - 70 * MINUTE, file);
    await writeReports(reporter, now - 10 * MINUTE, now);
    await writeReadings(tables, now - 50 * MINUTE, now - 20_000);
  });

  it('answers every panel, variable, annotation and rule without an error', () => {
    expect(errors(state.outcomes)).toEqual([]);
    expect(Object.values(state.alerts).filter((a) => typeof a === 'string')).toEqual([]);
  });

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
    expect(glance.map((r) => [r.ship, r.readings_last_hour, r.latitude, r.longitude, r.cargo, r.ship_id])).toEqual([
      ['MV Alpha', '102', 53.5461, 9.9661, '1 of 2 outside the normal range', 'ship-a'],
      ['ship-b', '53', null, null, 'no normal range set', 'ship-b'],
    ]);
    for (const r of glance) expect(Number(r.last_seen)).toBeLessThan(120);
    expect(rows(state.outcomes, 'Ships reporting now A')).toEqual([{ reporting: '2', seen: '2' }]);
    expect(rows(state.outcomes, 'Cargo outside the normal range A')).toEqual([{ outside: '1' }]);
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

  it('state.alerts for the reefer above its range, and for no gateway and no ship', () => {
    expect(firing(state.alerts['harbor-cargo-outside']).map((i) => [i.labels.ship, i.labels.cargo, i.labels.crossed, i.value])).toEqual([
      ['MV Alpha', 'Reefer 4 temperature', 'above 8 °C', expect.closeTo(1.34, 5)],
    ]);
    expect(firing(state.alerts['harbor-gateway-stopped'])).toEqual([]);
    expect(firing(state.alerts['harbor-ship-silent'])).toEqual([]);
    expect(rules.find((r) => r.uid === 'harbor-cargo-outside')?.for).toBe('10m');
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

  it('answers every panel, variable, annotation and rule without an error', () => {
    expect(errors(state.outcomes)).toEqual([]);
    expect(Object.values(state.alerts).filter((a) => typeof a === 'string')).toEqual([]);
  });

  it('shows the gateway stopped and why, never delivering, and no ship reporting', () => {
    expect(rows(state.outcomes, 'Gateway state A').map((r) => r.state)).toEqual([
      'stopped — for an upgrade, 12 readings queued for the next start (11 min ago)',
    ]);
    expect(rows(state.outcomes, 'Ships reporting now A')).toEqual([{ reporting: '0', seen: '2' }]);
    for (const r of rows(state.outcomes, 'Ships at a glance A')) expect(Number(r.last_seen)).toBeGreaterThanOrEqual(11 * 60);
    expect(rows(state.outcomes, 'Gateway events annotation').map((r) => r.text)).toContain(
      'gw-site: stopped — for an upgrade, 12 readings queued for the next start',
    );
  });

  it('state.alerts for the stopped gateway with its reason, and for each silent ship', () => {
    expect(firing(state.alerts['harbor-gateway-stopped']).map((i) => [i.labels.gateway, i.labels.last_word, Math.floor(i.value!)])).toEqual(
      [['gw-site', 'stopped — for an upgrade, 12 readings queued for the next start', 11]],
    );
    expect(
      firing(state.alerts['harbor-ship-silent'])
        .map((i) => i.labels.ship)
        .sort(),
    ).toEqual(['ship-a', 'ship-b']);
    // The rules of a reporting gateway have no row of it now: the stopped-gateway rule speaks for it.
    for (const uid of ['harbor-oldest-queued', 'harbor-flush-failures', 'harbor-clock-unsynchronised'])
      expect(state.alerts[uid], uid).toEqual([]);
  });
});

describe('the gateway gone for 25 hours without a word (a crash)', () => {
  const state = inState(async (tables) => {
    const gone = Date.now() - 25 * HOUR;
    const reporter = await startedGateway(tables, gone - HOUR);
    await writeReports(reporter, gone - 3 * MINUTE, gone);
    await writeReadings(tables, gone - HOUR, gone);
  });

  it('answers every panel, variable, annotation and rule without an error', () => {
    expect(errors(state.outcomes)).toEqual([]);
    expect(Object.values(state.alerts).filter((a) => typeof a === 'string')).toEqual([]);
  });

  it('shows how long the gateway has been silent and the ships it last saw', () => {
    expect(rows(state.outcomes, 'Gateway state A').map((r) => r.state)).toEqual([
      'no report for 25 h — stopped without a word (crash or power cut), or cut off from QuestDB',
    ]);
    expect(rows(state.outcomes, 'Ships at a glance A').map((r) => [r.ship, r.readings_last_hour])).toEqual([
      ['ship-a', '0'],
      ['ship-b', '0'],
    ]);
    expect(rows(state.outcomes, 'Ships reporting now A')).toEqual([{ reporting: '0', seen: '2' }]);
  });

  it('still state.alerts for the stopped gateway and for each silent ship', () => {
    expect(
      firing(state.alerts['harbor-gateway-stopped']).map((i) => [i.labels.gateway, i.labels.last_word, Math.round(i.value! / 60)]),
    ).toEqual([['gw-site', 'no stop reported: it crashed, lost power, or lost its way to QuestDB', 25]]);
    expect(
      firing(state.alerts['harbor-ship-silent'])
        .map((i) => [i.labels.ship, Math.round(i.value! / 60)])
        .sort(),
    ).toEqual([
      ['ship-a', 25],
      ['ship-b', 25],
    ]);
  });
});
