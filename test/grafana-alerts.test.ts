// The provisioned alert rules: their structure, and each rule's query run against the suite's
// QuestDB with seeded situations, turned into alert instances the way Grafana's alerting does.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { evaluateRule, loadAlertRules, type AlertRule } from './support/grafana-alerting.js';
import { createDashboardTables, renameTables, waitForTables, type DashboardTables } from './support/grafana-tables.js';
import { sql } from './support/questdb-sql.js';

const file = loadAlertRules();
const rules = file.groups.flatMap((g) => g.rules);
const rule = (uid: string): AlertRule => {
  const found = rules.find((r) => r.uid === uid);
  if (found === undefined) throw new Error(`no rule ${uid}`);
  return found;
};

describe('alert rule files', () => {
  it("provisions the rules in the dashboard's folder, evaluated every minute against QuestDB", () => {
    expect(file.groups.map((g) => [g.folder, g.interval])).toEqual([
      ['Harbor', '1m'],
      ['Harbor', '1m'],
    ]);
    expect(rules.map((r) => r.uid)).toEqual([
      'harbor-ship-silent',
      'harbor-series-silent',
      'harbor-cargo-outside',
      'harbor-gateway-stopped',
      'harbor-oldest-queued',
      'harbor-flush-failures',
      'harbor-dead-letters',
      'harbor-clock-unsynchronised',
      'harbor-tables-missing',
    ]);
    for (const r of rules) {
      expect(r.uid).toMatch(/^[a-zA-Z0-9_-]{1,40}$/);
      const [query, threshold] = r.data;
      expect(query, r.uid).toMatchObject({ refId: 'A', datasourceUid: 'questdb', model: { format: 'table', rawQuery: true } });
      expect(threshold, r.uid).toMatchObject({ refId: 'C', datasourceUid: '__expr__', model: { type: 'threshold', expression: 'A' } });
      expect(r.condition).toBe('C');
      // No data is a quiet site or a fresh install. A query error (QuestDB down, or not set up yet)
      // is one alert, of the tables rule; the others keep their last state meanwhile.
      expect([r.uid, r.noDataState, r.execErrState]).toEqual([r.uid, 'OK', r.uid === 'harbor-tables-missing' ? 'Error' : 'KeepLast']);
      // A pending period rides out the first seconds of a start, when a query may still fail.
      expect(r.for, r.uid).toMatch(/^[1-9]\d*m$/);
      if (r.uid !== 'harbor-tables-missing') expect(r.annotations.summary, r.uid).toMatch(/\{\{ \$labels\.\w+ \}\}/);
    }
  });
});

describe('alert rule queries on QuestDB', () => {
  let tables: DashboardTables;
  let empty: DashboardTables;
  let client: pg.Client;
  const ago = (minutes: number) => new Date(Date.now() - minutes * 60_000).toISOString();

  beforeAll(async () => {
    [tables, empty] = await Promise.all([createDashboardTables(), createDashboardTables()]);
    const readings = [
      [ago(0), 'busy', 'temperature', 1],
      [ago(120), 'busy', 'old_sensor', 2],
      [ago(30), 'quiet', 'temperature', 3],
      [ago(40 * 24 * 60), 'gone', 'temperature', 4],
    ];
    await sql(
      `INSERT INTO ${tables.readings} (time, ship_id, cargo_id, value) VALUES ${readings.map((r) => `('${r.join("', '")}')`).join(', ')}`,
    );
    const healthTable = tables.health;
    const row = (at: string, gateway: string, oldest: number | null, failures: number, deadLetters: number, clock: string | null) =>
      `('${at}', '${gateway}', ${oldest}, ${failures}, ${deadLetters}, ${clock === null ? 'null' : `'${clock}'`})`;
    await sql(
      `INSERT INTO ${healthTable} (time, gateway, oldest_age_s, consecutive_flush_failures, dead_letters, clock) VALUES
        ${row(ago(50), 'gw-ok', null, 0, 0, 'synchronised')},
        ${row(ago(0.5), 'gw-ok', 2, 0, 0, 'synchronised')},
        ${row(ago(40), 'gw-down', 5, 0, 0, 'synchronised')},
        ${row(ago(0.3), 'gw-down', 1500, 40, 3, 'unsynchronised')},
        ${row(ago(30), 'gw-no-timesyncd', null, 0, 2, null)},
        ${row(ago(0.2), 'gw-no-timesyncd', null, 0, 2, null)},
        ${row(ago(20), 'gw-stopped', 900, 5, 0, 'unsynchronised')}`,
    );
    await waitForTables(tables);
    await waitForTables(empty);
    client = new pg.Client({ host: '127.0.0.1', port: inject('questdbPgPort'), user: 'admin', password: 'quest', database: 'qdb' });
    await client.connect();
  });

  afterAll(async () => {
    await client?.end();
  });

  const evaluate = (uid: string, on = tables) => evaluateRule(client, rule(uid), (text) => renameTables(text, on));
  const firing = async (uid: string) => (await evaluate(uid)).filter((i) => i.firing).map((i) => Object.values(i.labels).join(' / '));

  it('alerts for a ship silent for over 10 minutes, not for one reporting or one gone for longer than the window', async () => {
    const instances = await evaluate('harbor-ship-silent');
    expect(instances.map((i) => i.labels.ship_id).sort()).toEqual(['busy', 'quiet']);
    // Labels site, ship_id and ship: readings written without a site have an empty one.
    expect(await firing('harbor-ship-silent')).toEqual([' / quiet / quiet']);
  });

  it('alerts for a series silent for over an hour while its ship still reports, with its names', async () => {
    // Labels site, ship_id, ship, cargo_id, cargo; quiet (silent 30 minutes) is the ship rule's.
    expect(await firing('harbor-series-silent')).toEqual([' / busy / busy / old_sensor / old_sensor']);
    expect((await evaluate('harbor-series-silent')).map((i) => i.labels.ship_id)).not.toContain('quiet');
  });

  it('alerts for a gateway whose oldest queued reading is over 10 minutes old, from its latest report', async () => {
    const instances = await evaluate('harbor-oldest-queued');
    expect(instances.map((i) => [i.labels.gateway, i.value])).toEqual(
      expect.arrayContaining([
        ['gw-down', 25],
        ['gw-ok', 2 / 60],
      ]),
    );
    // A gateway silent for 20 minutes is out of the window: the stopped-gateway rule speaks for it.
    expect(instances.map((i) => i.labels.gateway)).not.toContain('gw-stopped');
    expect(await firing('harbor-oldest-queued')).toEqual(['gw-down']);
  });

  it('alerts for a gateway that has not reported for over 3 minutes, whatever it reported last', async () => {
    const instances = await evaluate('harbor-gateway-stopped');
    expect(instances.filter((i) => i.firing).map((i) => [i.labels.gateway, Math.round(i.value!)])).toEqual([['gw-stopped', 20]]);
    expect(instances.map((i) => i.labels.gateway).sort()).toEqual(['gw-down', 'gw-no-timesyncd', 'gw-ok', 'gw-stopped']);
  });

  it('alerts for a ship silent for 40 days no longer: the window is 30 days', async () => {
    expect((await evaluate('harbor-ship-silent')).map((i) => i.labels.ship_id)).not.toContain('gone');
  });

  it('alerts for flushes failing in a row, new dead letters and an unsynchronised clock', async () => {
    expect(await firing('harbor-flush-failures')).toEqual(['gw-down']);
    expect(rule('harbor-flush-failures').for).toBe('5m');
    // gw-no-timesyncd has had 2 dead letters all hour: nothing new.
    expect(await firing('harbor-dead-letters')).toEqual(['gw-down']);
    // A clock that cannot be known (no systemd-timesyncd, as in containers) does not alert.
    expect(await firing('harbor-clock-unsynchronised')).toEqual(['gw-down']);
  });

  it('answers every rule with no instances, not an error, on a fresh install', async () => {
    for (const r of rules.filter((r) => r.uid !== 'harbor-tables-missing')) expect(await evaluate(r.uid, empty), r.uid).toEqual([]);
    expect(await evaluate('harbor-tables-missing', empty)).toEqual([{ labels: {}, value: 9, firing: false }]);
  });
});
