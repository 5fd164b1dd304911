// The dashboard in the situations a site meets: devices without a clock, GPS halves posted one by
// one, a fresh install with no readings, a ship that starts reporting while the dashboard is open,
// and a central QuestDB holding the readings of two sites and of before sites existed.
// Every query is run as Grafana sends it (see scripts/lib/grafana-expand.mjs) against the suite's QuestDB.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  ALL,
  dashboardQueries,
  expandSql,
  loadDashboard,
  type DashboardVariable,
  type VariableValue,
} from '../scripts/lib/grafana-expand.mjs';
import { TEST_KEY, startTestGateway, type TestGateway } from './support/gateway.js';
import { createDashboardTables, dashboardTableNames, renameTables, type DashboardTables } from './support/grafana-tables.js';
import { evaluateRule, loadAlertRules, type AlertRule } from './support/grafana-alerting.js';
import { sql, waitForCount, waitForWalApplied } from './support/questdb-sql.js';

// QuestDB sends timestamps without a zone, in UTC.
pg.types.setTypeParser(1114, (text: string) => new Date(`${text.replace(' ', 'T')}Z`));

const dashboard = loadDashboard();
const queries = dashboardQueries(dashboard);
const model = (name: string) => dashboard.templating.list.find((v: DashboardVariable) => v.name === name);
const find = (title: string, refId = 'A') => {
  const found = queries.find((q) => q.title === title && (q.kind === 'variable' || q.refId === refId));
  if (found === undefined) throw new Error(`no query ${title} ${refId}`);
  return found;
};

let client: pg.Client;
beforeAll(async () => {
  client = new pg.Client({ host: '127.0.0.1', port: inject('questdbPgPort'), user: 'admin', password: 'quest', database: 'qdb' });
  await client.connect();
});
afterAll(async () => {
  await client?.end();
});

interface RunOptions {
  tables: DashboardTables;
  site?: VariableValue;
  ship?: VariableValue;
  cargo?: VariableValue;
  maxDataPoints?: number;
}

/** The last ten minutes and the next one, as a dashboard left open on "now-10m" asks. */
const recent = () => ({ from: Date.now() - 10 * 60_000, to: Date.now() + 60_000 });

const run = (rawSql: string, options: RunOptions) =>
  client.query(
    expandSql(renameTables(rawSql, options.tables), {
      range: recent(),
      maxDataPoints: options.maxDataPoints ?? 1000,
      variables: {
        site: options.site ?? { model: model('site'), value: ALL },
        ship: options.ship ?? { model: model('ship'), value: ALL },
        cargo: options.cargo ?? { model: model('cargo'), value: ALL },
      },
    }),
  );

/** The dashboards' tables beside a test gateway's readings table. */
const tablesOf = (gw: TestGateway) => createDashboardTables({ ...dashboardTableNames(), readings: gw.table });

describe('GPS from devices without a clock and from single posts', () => {
  let gw: TestGateway;
  let tables: DashboardTables;
  const single = (body: unknown) => gw.post('/api/v2/ingest/', body, { 'x-api-key': TEST_KEY });

  beforeAll(async () => {
    gw = await startTestGateway();
    tables = await tablesOf(gw);
    // A device without a clock posts [latitude, longitude]: both get its receive time, 1 ns apart.
    expect(
      (
        await gw.post('/api/v2/ingest/batch', [
          { ship_id: 'no-clock', cargo_id: 'latitude', value: 53.1 },
          { ship_id: 'no-clock', cargo_id: 'longitude', value: 9.1 },
        ])
      ).status,
    ).toBe(200);
    // Devices that post each half on its own, milliseconds apart, in either order, with a device prefix.
    expect((await single({ ship_id: 'one-by-one', cargo_id: 'lat', value: 54.2 })).status).toBe(200);
    expect((await single({ ship_id: 'one-by-one', cargo_id: 'lon', value: 10.2 })).status).toBe(200);
    expect((await single({ ship_id: 'prefixed', cargo_id: 'gps_lon', value: 11.3 })).status).toBe(200);
    expect((await single({ ship_id: 'prefixed', cargo_id: 'gps_lat', value: 55.3 })).status).toBe(200);
    // A device with a clock sends exact pairs; a lone latitude has no partner within the tolerance.
    const exact = new Date(Date.now() - 60_000).toISOString();
    const lone = new Date(Date.now() - 120_000).toISOString();
    expect(
      (
        await gw.post('/api/v2/ingest/batch', [
          { time: exact, ship_id: 'clocked', cargo_id: 'engine_latitude', value: 56.4 },
          { time: exact, ship_id: 'clocked', cargo_id: 'engine_longitude', value: 12.4 },
          { time: lone, ship_id: 'clocked', cargo_id: 'lat', value: 1 },
        ])
      ).status,
    ).toBe(200);
    expect(await waitForCount(`SELECT count() FROM "${gw.table}"`, 9)).toBe(9);
  });

  afterAll(async () => {
    await gw?.stop();
  });

  it('stores the halves of a clockless fix at one time and single posts apart', async () => {
    const times = await client.query(
      `SELECT ship_id, cast(time AS long) AS ns FROM "${gw.table}" WHERE ship_id IN ('no-clock', 'one-by-one') ORDER BY time`,
    );
    const gap = (ship: string) => {
      const [a, b] = times.rows.filter((r) => r.ship_id === ship).map((r) => BigInt(r.ns));
      return b! - a!;
    };
    expect(gap('no-clock')).toBe(0n);
    expect(gap('one-by-one')).toBeGreaterThan(0n);
  });

  it('puts every device on the map, pairing halves within 2 s and exact pairs exactly', async () => {
    const map = find('Positions and tracks');
    const options = { tables, maxDataPoints: map.maxDataPoints };
    const tracks = await run(map.rawSql, options);
    expect(tracks.rows.map((r) => [r.device, r.latitude, r.longitude])).toEqual([
      ['clocked / engine', 56.4, 12.4],
      ['no-clock', 53.1, 9.1],
      ['one-by-one', 54.2, 10.2],
      ['prefixed / gps', 55.3, 11.3],
    ]);
    const exact = tracks.rows.find((r) => r.device === 'clocked / engine');
    expect((await client.query(`SELECT time FROM "${gw.table}" WHERE cargo_id = 'engine_latitude'`)).rows[0].time).toEqual(exact.time);
    const latest = await run(find('Positions and tracks', 'B').rawSql, options);
    expect(latest.rows.map((r) => r.device)).toEqual(['clocked / engine', 'no-clock', 'one-by-one', 'prefixed / gps']);
  });

  it('pairs each latitude with its own longitude when a clockless device reports every second', async () => {
    for (let fix = 0; fix < 3; fix++) {
      // The device's pace: one fix in each wall-clock second.
      if (fix > 0) await new Promise((r) => setTimeout(r, 1000 - (Date.now() % 1000) + 5));
      const body = [
        { ship_id: 'every-second', cargo_id: 'latitude', value: 60 + fix },
        { ship_id: 'every-second', cargo_id: 'longitude', value: 20 + fix },
      ];
      expect((await gw.post('/api/v2/ingest/batch', body)).status).toBe(200);
    }
    expect(await waitForCount(`SELECT count() FROM "${gw.table}" WHERE ship_id = 'every-second'`, 6)).toBe(6);
    // Two minutes in 1000 points gives 100 ms buckets: every fix is its own position.
    const text = expandSql(find('Positions and tracks').rawSql.replace(/\bcargo_data\b/g, gw.table), {
      range: { from: Date.now() - 120_000, to: Date.now() },
      variables: { site: { model: model('site'), value: ALL }, ship: { model: model('ship'), value: ['every-second'] } },
    });
    const tracks = await client.query(text);
    expect(tracks.rows.map((r) => [r.latitude, r.longitude])).toEqual([
      [60, 20],
      [61, 21],
      [62, 22],
    ]);
  });

  it('shows a ship that starts reporting after the dashboard was opened at the next variable refresh', async () => {
    const ships = async () => (await run(find('ship').rawSql, { tables })).rows.map((r) => r.__value);
    expect(await ships()).not.toContain('late-ship');
    expect((await single({ ship_id: 'late-ship', cargo_id: 'draught', value: 7.5 })).status).toBe(200);
    expect(await waitForCount(`SELECT count() FROM "${gw.table}" WHERE ship_id = 'late-ship'`, 1)).toBe(1);
    // refresh 2: Grafana re-runs the variable queries on every time range change, auto-refresh included.
    expect(dashboard.templating.list.map((v: DashboardVariable) => v.refresh)).toEqual([2, 2, 2]);
    expect(await ships()).toContain('late-ship');
    const cargo = await run(find('cargo').rawSql, { tables, ship: { model: model('ship'), value: ['late-ship'] } });
    expect(cargo.rows.map((r) => r.__value)).toEqual(['draught']);
    const latest = await run(find('Cargo now').rawSql, { tables });
    expect(latest.rows.map((r) => r.ship_id)).toContain('late-ship');
  });
});

describe('a fresh gateway without readings', () => {
  let gw: TestGateway;
  let tables: DashboardTables;

  beforeAll(async () => {
    gw = await startTestGateway();
    tables = await tablesOf(gw);
    await waitForCount(`SELECT count() FROM "${gw.table}"`, 0);
    await waitForWalApplied(gw.table);
  });

  afterAll(async () => {
    await gw?.stop();
  });

  it('answers every variable and panel with no data, where All over no options used to be IN ()', async () => {
    const options = { tables };
    const answers: Record<string, unknown[]> = {};
    for (const q of queries) {
      const result = await run(q.rawSql, { ...options, maxDataPoints: q.maxDataPoints });
      answers[`${q.title} ${q.refId}`] = result.rows;
    }
    const counts = {
      'Readings A': [{ readings: '0' }],
      'Ships reporting now A': [{ reporting: '0', silent: '0', seen: '0' }],
      'Cargo outside the normal range A': [{ outside: '0', left_last_hour: '0' }],
    };
    for (const [key, rows] of Object.entries(answers)) expect(rows, key).toEqual(counts[key as keyof typeof counts] ?? []);

    // Without the custom all value, All over an empty option list is what broke the dashboard.
    const withoutAllValue = { model: { ...model('ship'), allValue: null }, value: ALL, options: [] };
    await expect(run(find('cargo').rawSql, { ...options, ship: withoutAllValue })).rejects.toThrow(/too few arguments for 'in'/);
  });
});

describe('a central QuestDB with readings of two sites and of before sites existed', () => {
  let gw: TestGateway;
  let tables: DashboardTables;
  let rules: AlertRule[];
  const ago = (minutes: number) => new Date(Date.now() - minutes * 60_000).toISOString();
  const sites = (value: string[]) => ({ site: { model: model('site'), value } });

  beforeAll(async () => {
    // The central gateway is site `centre`; north forwards readings under its own site, as a site gateway does.
    gw = await startTestGateway({ SITE_ID: 'centre' });
    tables = await tablesOf(gw);
    const north = [
      // Ship ids repeat from site to site: north's pump-1 went quiet 20 minutes ago.
      { time: ago(20), ship_id: 'pump-1', cargo_id: 'pressure', value: 111 },
      { time: ago(1), ship_id: 'crane-n', cargo_id: 'load', value: 5 },
    ];
    expect((await gw.post('/api/v2/ingest/batch', north, { 'x-harbor-site': 'north' })).status).toBe(200);
    const centre = [
      { time: ago(1), ship_id: 'pump-1', cargo_id: 'pressure', value: 222 },
      { time: ago(2), ship_id: 'pump-1', cargo_id: 'pressure', value: 220 },
    ];
    expect((await gw.post('/api/v2/ingest/batch', centre)).status).toBe(200);
    expect(await waitForCount(`SELECT count() FROM "${gw.table}"`, 4)).toBe(4);
    // A reading stored before the table had sites: the gateway adds the column, old rows have none.
    // And pump-1's readings of before the upgrade: the same ship as a site's pump-1 since, never a silent one of its own.
    await sql(
      `INSERT INTO "${gw.table}" (time, ship_id, cargo_id, value) VALUES ('${ago(3)}', 'old-barge', 'draught', 3.5), ('${ago(40)}', 'pump-1', 'pressure', 99)`,
    );
    expect(await waitForCount(`SELECT count() FROM "${gw.table}" WHERE site IS NULL`, 2)).toBe(2);
    rules = loadAlertRules().groups.flatMap((g) => g.rules);
  });

  afterAll(async () => {
    await gw?.stop();
  });

  it('lists each site once, never the readings without one', async () => {
    expect((await run(find('site').rawSql, { tables })).rows).toEqual([{ site: 'centre' }, { site: 'north' }]);
  });

  it('lists the ships of the selected sites, and every ship under All', async () => {
    const ships = async (site?: string[]) =>
      (await run(find('ship').rawSql, { tables, ...(site && sites(site)) })).rows.map((r) => r.__value);
    expect(await ships(['north'])).toEqual(['crane-n', 'pump-1']);
    expect(await ships(['centre'])).toEqual(['pump-1']);
    expect(await ships()).toEqual(['crane-n', 'old-barge', 'pump-1']);
    const cargo = await run(find('cargo').rawSql, { tables, ...sites(['centre']) });
    expect(cargo.rows.map((r) => r.__value)).toEqual(['pressure']);
  });

  it("shows only the picked site's rows, both sites and the readings without a site under All", async () => {
    // The last ten minutes: north's pump-1, quiet for 20, is outside them.
    const count = async (site?: string[]) =>
      Number((await run(find('Readings').rawSql, { tables, ...(site && sites(site)) })).rows[0].readings);
    expect(await count(['north'])).toBe(1);
    expect(await count(['centre'])).toBe(2);
    expect(await count(['north', 'centre'])).toBe(3);
    expect(await count()).toBe(4);
    const latest = async (site: string[]) =>
      (await run(find('Cargo now').rawSql, { tables, ...sites(site) })).rows.map((r) => [r.ship, r.value]);
    expect(await latest(['north'])).toEqual([['crane-n', 5]]);
    expect(await latest(['centre'])).toEqual([['pump-1', 222]]);
    // The same ship id at two sites: each site's own pump-1, seen 20 and 1 minutes ago.
    const glance = async (site?: string[]) =>
      (await run(find('Ships at a glance').rawSql, { tables, ...(site && sites(site)) })).rows.map((r) => [
        r.ship,
        r.readings_last_hour,
        Math.floor(Number(r.last_seen) / 60),
      ]);
    expect(await glance(['north'])).toEqual([
      ['crane-n', '1', 1],
      ['pump-1', '1', 20],
    ]);
    expect(await glance(['centre'])).toEqual([['pump-1', '2', 1]]);
    // Under All each site's pump-1 is a row of its own.
    const all = await run(find('Ships at a glance').rawSql, { tables });
    expect(all.rows.map((r) => [r.site, r.ship, Math.floor(Number(r.last_seen) / 60)])).toEqual([
      ['north', 'crane-n', 1],
      ['', 'old-barge', 3],
      ['centre', 'pump-1', 1],
      ['north', 'pump-1', 20],
    ]);
  });

  it("alerts for north's silent pump-1 with its site, though pump-1 of the centre reports", async () => {
    const silent = rules.find((r) => r.uid === 'harbor-ship-silent')!;
    const instances = await evaluateRule(client, silent, (text) => renameTables(text, tables));
    expect(
      instances.map((i) => [i.labels.site, i.labels.ship_id, i.firing]).sort((a, b) => `${a[0]}/${a[1]}`.localeCompare(`${b[0]}/${b[1]}`)),
    ).toEqual([
      ['', 'old-barge', false],
      ['centre', 'pump-1', false],
      ['north', 'crane-n', false],
      ['north', 'pump-1', true],
    ]);
  });
});
