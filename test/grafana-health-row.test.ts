// The health row of the dashboard, fed by the gateway's real health reporter: the state in words
// it writes, the columns an older gateway_health table gains, its events (a QuestDB outage, the
// last row at a stop) and the "Gateway state" panel's answer.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { QuestDbHttp } from '../src/questdb/questdb-http.js';
import { HealthReporter } from '../src/health/health-reporter.js';
import { healthSnapshot } from './support/health-snapshot.js';
import { createLogger } from '../src/log/logger.js';
import { dashboardQueries, expandSql, GATEWAY_DASHBOARD_PATH, loadDashboard } from '../scripts/lib/grafana-expand.mjs';
import { sql, uniqueTable, waitForWalApplied } from './support/questdb-sql.js';

const MB = 1024 * 1024;

/** A gateway 82 % full, its clock not synchronised, with `failures` flushes failed in a row. */
const snapshot = (failures: number, lastErrorAt?: number) =>
  healthSnapshot({ failures, lastErrorAt, queued: 4000, queueBytes: 82 * MB, clockSynchronized: false });

describe('the gateway state on the dashboard', () => {
  const table = uniqueTable('health');
  const events = uniqueTable('events');
  const questdb = new QuestDbHttp({ url: inject('questdbUrl'), timeoutMs: 10_000, username: undefined, password: undefined });
  let client: pg.Client;

  beforeAll(async () => {
    // The table as the first release created it, with a report of that release.
    await sql(
      `CREATE TABLE ${table} (time TIMESTAMP, gateway SYMBOL, ready BOOLEAN, queue_readings LONG, queue_bytes LONG, oldest_age_s DOUBLE,
        dead_letters LONG, flush_failures LONG, consecutive_flush_failures LONG, accepted_readings LONG,
        flushed_readings LONG, refused_requests LONG) TIMESTAMP(time) PARTITION BY DAY TTL 30 DAYS WAL`,
    );
    await sql(`INSERT INTO ${table} (time, gateway, ready, queue_readings) VALUES (now(), 'gw-old-version', true, 0)`);
    client = new pg.Client({ host: '127.0.0.1', port: inject('questdbPgPort'), user: 'admin', password: 'quest', database: 'qdb' });
    await client.connect();
  });

  afterAll(async () => {
    await client?.end();
    await questdb.close();
  });

  it('adds the new columns to an existing table and writes the state in words', async () => {
    const reporter = new HealthReporter(questdb, 'gw-buffering', createLogger('silent'), table, events);
    const now = Date.now();
    const outageBegan = now - 12 * 60_000 - 10_000;
    expect(await reporter.report(snapshot(0), outageBegan - 10_000)).toBe(true);
    expect(await reporter.report(snapshot(70, outageBegan), outageBegan + 5_000)).toBe(true);
    expect(await reporter.report(snapshot(140, now - 1_000), now)).toBe(true);
    await waitForWalApplied(table);
    await waitForWalApplied(events);
    const columns = (await sql<[string, string]>(`SELECT "column", type FROM table_columns('${table}')`)).dataset.map(
      ([name, type]) => `${name} ${type}`,
    );
    expect(columns).toEqual(
      expect.arrayContaining([
        'state SYMBOL',
        'state_text VARCHAR',
        'queue_max_bytes LONG',
        'outage_s DOUBLE',
        'clock SYMBOL',
        'clock_synced BOOLEAN',
      ]),
    );
    const [latest] = (
      await sql<[string, string, number, number, string]>(
        `SELECT state, state_text, outage_s, queue_max_bytes, clock FROM ${table} WHERE gateway = 'gw-buffering' LATEST ON time PARTITION BY gateway`,
      )
    ).dataset;
    expect(latest).toEqual([
      'buffering',
      'buffering — QuestDB unreachable for 12 min, queue 82 % full, clock not synchronised',
      730,
      100 * MB,
      'unsynchronised',
    ]);
  });

  it('records a QuestDB outage from its start to its end once the flushes succeed again', async () => {
    const reporter = new HealthReporter(questdb, 'gw-outage', createLogger('silent'), table, events);
    const began = Date.now() - 20 * 60_000;
    expect(await reporter.report(snapshot(3, began), began + 10_000)).toBe(true);
    // Reports during the outage are not written (QuestDB away); the outage is timed from its start all the same.
    expect(await reporter.report(snapshot(0), began + 5 * 60_000)).toBe(true);
    await waitForWalApplied(events);
    const rows = await sql<[string, string, string, number]>(
      `SELECT event, reason, text, until - time FROM ${events} WHERE gateway = 'gw-outage'`,
    );
    expect(rows.dataset).toEqual([['outage', 'questdb', 'QuestDB unreachable for 5 min', 5 * 60_000_000]]);
  });

  it('writes a last row at a stop that says so and why, the queue it leaves, and the stop event', async () => {
    const reporter = new HealthReporter(questdb, 'gw-stopping', createLogger('silent'), table, events);
    const now = Date.now();
    expect(await reporter.report(snapshot(0), now - 10_000)).toBe(true);
    const stopping = healthSnapshot({ ready: false, queued: 1 });
    expect(await reporter.reportStopped(stopping, { code: 'restart', text: 'for a restart' }, now)).toBe(true);
    await waitForWalApplied(table);
    await waitForWalApplied(events);
    const [last] = (
      await sql<[string, string, boolean]>(
        `SELECT state, state_text, ready FROM ${table} WHERE gateway = 'gw-stopping' LATEST ON time PARTITION BY gateway`,
      )
    ).dataset;
    expect(last).toEqual(['stopped', 'stopped — for a restart, 1 reading queued for the next start', false]);
    const stop = await sql<[string, string, string]>(`SELECT event, reason, text FROM ${events} WHERE gateway = 'gw-stopping'`);
    expect(stop.dataset).toEqual([['stopped', 'restart', 'stopped — for a restart, 1 reading queued for the next start']]);
  });

  it('shows each gateway\'s latest state, a stopped one and why, a stale report as "no report", and older gateways without a state', async () => {
    await sql(
      `INSERT INTO ${table} (time, gateway, state, state_text) VALUES (dateadd('m', -7, now()), 'gw-gone', 'delivering', 'delivering')`,
    );
    await waitForWalApplied(table);
    const panel = dashboardQueries(loadDashboard(GATEWAY_DASHBOARD_PATH)).find((q) => q.title === 'Gateway state')!;
    const text = expandSql(panel.rawSql.replace(/\bgateway_health\b/g, table).replace(/\bgateway_events\b/g, events), {
      range: { from: Date.now() - 6 * 3_600_000, to: Date.now() },
    });
    const rows = (await client.query(text)).rows.map((r) => [r.gateway, r.state]);
    expect(rows).toEqual([
      ['gw-buffering', 'buffering — QuestDB unreachable for 12 min, queue 82 % full, clock not synchronised'],
      ['gw-gone', 'no report for 7 min — stopped without a word (crash or power cut), or cut off from QuestDB'],
      ['gw-old-version', 'reporting; this gateway version does not name its state'],
      ['gw-outage', 'no report for 15 min — stopped without a word (crash or power cut), or cut off from QuestDB'],
      ['gw-stopping', expect.stringMatching(/^stopped — for a restart, 1 reading queued for the next start \(\d+ s ago\)$/)],
    ]);
  });
});
