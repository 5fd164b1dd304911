// The provisioned alert rules: their structure, and each rule's query run against the suite's
// QuestDB with seeded situations, turned into alert instances the way Grafana's alerting does.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createHealthTable } from '../src/health/health-reporter.js';
import { evaluateRule, loadAlertRules, type AlertRule } from './support/grafana-alerting.js';
import { startTestGateway, type TestGateway } from './support/gateway.js';
import { sql, uniqueTable, waitForCount, waitForWalApplied } from './support/questdb-sql.js';

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
      'harbor-oldest-queued',
      'harbor-flush-failures',
      'harbor-dead-letters',
      'harbor-clock-unsynchronised',
    ]);
    for (const r of rules) {
      expect(r.uid).toMatch(/^[a-zA-Z0-9_-]{1,40}$/);
      const [query, threshold] = r.data;
      expect(query, r.uid).toMatchObject({ refId: 'A', datasourceUid: 'questdb', model: { format: 'table', rawQuery: true } });
      expect(threshold, r.uid).toMatchObject({ refId: 'C', datasourceUid: '__expr__', model: { type: 'threshold', expression: 'A' } });
      expect(r.condition).toBe('C');
      // No data is a quiet site or a fresh install; a query error (QuestDB down) is an alert of its own.
      expect([r.noDataState, r.execErrState]).toEqual(['OK', 'Error']);
      expect(r.annotations.summary, r.uid).toMatch(/\{\{ \$labels\.\w+ \}\}/);
    }
  });
});

describe('alert rule queries on QuestDB', () => {
  let gw: TestGateway;
  let empty: TestGateway;
  let client: pg.Client;
  const healthTable = uniqueTable('health');
  const emptyHealthTable = uniqueTable('health');
  const ago = (minutes: number) => new Date(Date.now() - minutes * 60_000).toISOString();

  beforeAll(async () => {
    [gw, empty] = await Promise.all([startTestGateway(), startTestGateway()]);
    const readings = [
      { ship_id: 'busy', cargo_id: 'temperature', value: 1 },
      { time: ago(120), ship_id: 'busy', cargo_id: 'old_sensor', value: 2 },
      { time: ago(30), ship_id: 'quiet', cargo_id: 'temperature', value: 3 },
      { time: ago(2 * 24 * 60), ship_id: 'gone', cargo_id: 'temperature', value: 4 },
    ];
    expect((await gw.post('/api/v2/ingest/batch', readings)).status).toBe(200);
    expect(await waitForCount(`SELECT count() FROM "${gw.table}"`, readings.length)).toBe(readings.length);
    await sql(createHealthTable(healthTable));
    await sql(createHealthTable(emptyHealthTable));
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
    await waitForWalApplied(healthTable);
    await waitForWalApplied(emptyHealthTable);
    await waitForCount(`SELECT count() FROM "${empty.table}"`, 0);
    client = new pg.Client({ host: '127.0.0.1', port: inject('questdbPgPort'), user: 'admin', password: 'quest', database: 'qdb' });
    await client.connect();
  });

  afterAll(async () => {
    await client?.end();
    await Promise.all([gw?.stop(), empty?.stop()]);
  });

  const evaluate = (uid: string, table = gw.table, health = healthTable) =>
    evaluateRule(client, rule(uid), (text) => text.replace(/\bcargo_data\b/g, table).replace(/\bgateway_health\b/g, health));
  const firing = async (uid: string) => (await evaluate(uid)).filter((i) => i.firing).map((i) => Object.values(i.labels).join(' / '));

  it('alerts for a ship silent for over 15 minutes, not for one reporting or one gone for days', async () => {
    const instances = await evaluate('harbor-ship-silent');
    expect(instances.map((i) => i.labels.ship_id).sort()).toEqual(['busy', 'quiet']);
    expect(await firing('harbor-ship-silent')).toEqual(['quiet']);
  });

  it('alerts for a series silent for over an hour while its ship still reports', async () => {
    expect(await firing('harbor-series-silent')).toEqual(['busy / old_sensor']);
  });

  it('alerts for a gateway whose oldest queued reading is over 10 minutes old, from its latest report', async () => {
    const instances = await evaluate('harbor-oldest-queued');
    expect(instances.map((i) => [i.labels.gateway, i.value])).toEqual(
      expect.arrayContaining([
        ['gw-down', 25],
        ['gw-ok', 2 / 60],
      ]),
    );
    // A gateway silent for 20 minutes is out of the window: its alerts resolve, its state panel says "no report".
    expect(instances.map((i) => i.labels.gateway)).not.toContain('gw-stopped');
    expect(await firing('harbor-oldest-queued')).toEqual(['gw-down']);
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
    for (const r of rules) expect(await evaluate(r.uid, empty.table, emptyHealthTable), r.uid).toEqual([]);
  });
});
