// The health row of the dashboard, fed by the gateway's real health reporter: the state in words
// it writes, the columns an older gateway_health table gains, and the "Gateway state" panel's answer.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { QuestDbHttp } from '../src/questdb/questdb-http.js';
import { HealthReporter } from '../src/health/health-reporter.js';
import type { GatewaySnapshot } from '../src/health/snapshot.js';
import { createLogger } from '../src/log/logger.js';
import { dashboardQueries, expandSql, loadDashboard } from '../scripts/lib/grafana-expand.mjs';
import { sql, uniqueTable, waitForWalApplied } from './support/questdb-sql.js';

const MB = 1024 * 1024;

function snapshot(failures: number, lastErrorAt?: number): GatewaySnapshot {
  return {
    version: '0.1.0',
    uptimeSeconds: 900,
    durability: 'full',
    ready: true,
    clockSynchronized: false,
    queue: { records: 40, readings: 4000, bytes: 82 * MB, maxBytes: 100 * MB, commits: 40, oldestAgeSeconds: failures > 0 ? 700 : 1 },
    deadLetters: 0,
    flush: {
      last: null,
      lastError: lastErrorAt === undefined ? null : { at: new Date(lastErrorAt).toISOString(), message: 'connect ECONNREFUSED' },
      consecutiveFailures: failures,
    },
    sinks: [],
    totals: {
      acceptedRequests: 40,
      acceptedReadings: 4000,
      refusedRequests: 0,
      flushes: 3,
      flushFailures: failures,
      flushedReadings: 100,
      deadLettered: 0,
    },
    tls: null,
    keys: [],
    auth: { wrongKeyRequests: 0, addressesTracked: 0 },
    memory: { rssBytes: 0, heapUsedBytes: 0, heapTotalBytes: 0, deliveryHeapUsedBytes: null, deliveryHeapTotalBytes: null },
  };
}

describe('the gateway state on the dashboard', () => {
  const table = uniqueTable('health');
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
    const reporter = new HealthReporter(questdb, 'gw-buffering', createLogger('silent'), table);
    const now = Date.now();
    const outageBegan = now - 12 * 60_000 - 10_000;
    expect(await reporter.report(snapshot(0), outageBegan - 10_000)).toBe(true);
    expect(await reporter.report(snapshot(70, outageBegan), outageBegan + 5_000)).toBe(true);
    expect(await reporter.report(snapshot(140, now - 1_000), now)).toBe(true);
    await waitForWalApplied(table);
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

  it('shows each gateway\'s latest state, a stale report as "no report", and older gateways without a state', async () => {
    await sql(
      `INSERT INTO ${table} (time, gateway, state, state_text) VALUES (dateadd('m', -7, now()), 'gw-gone', 'delivering', 'delivering')`,
    );
    await waitForWalApplied(table);
    const panel = dashboardQueries(loadDashboard()).find((q) => q.title === 'Gateway state')!;
    const text = expandSql(panel.rawSql.replace(/\bgateway_health\b/g, table), {
      range: { from: Date.now() - 6 * 3_600_000, to: Date.now() },
    });
    const rows = (await client.query(text)).rows.map((r) => [r.gateway, r.state]);
    expect(rows).toEqual([
      ['gw-buffering', 'buffering — QuestDB unreachable for 12 min, queue 82 % full, clock not synchronised'],
      ['gw-gone', 'no report for 7 min — gateway stopped, or cut off from QuestDB'],
      ['gw-old-version', 'reporting; this gateway version does not name its state'],
    ]);
  });
});
