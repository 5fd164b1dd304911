// Times the queries of both dashboards and of the alert rules on a large table, the way Grafana
// sends them (over the PostgreSQL wire protocol, macros and variables expanded), next to the
// alternatives considered for the ship and cargo variables. Not part of `npm test`: seeding takes
// minutes and gigabytes.
//
//   npm run build && node bench/grafana-queries.mjs [--rows 300000000] [--days 60] [--data-dir DIR] [--runs 3]
//     [--baseline OLD.json]
//
// --baseline times the site dashboard's panels next to those of an earlier one (the JSON of
// `git show v0.4.0:grafana/provisioning/dashboards/harbor/comprehensive-telemetry.json`) instead:
// each query and its successor in turn, run after run, so both see the same load on a shared machine.
//
// The data directory is kept, so a second run skips seeding. The readings table has the gateway's
// columns and partitioning; it is seeded without WAL (INSERT ... SELECT is much faster that way),
// which does not change how queries read the partitions. The gateway's own tables are made by the
// built gateway itself, started once against this QuestDB with a catalogue of the seeded ids, then
// filled with 30 days of one gateway's health rows (one every 10 s) and events.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { parse } from 'yaml';
import { startGatewayProcess } from '../scripts/lib/gateway-process.mjs';
import { projectRoot } from '../scripts/lib/paths.mjs';
import { startQuestDb } from '../scripts/lib/questdb.mjs';
import {
  ALERT_RULES_PATH,
  ALL,
  DASHBOARD_PATH,
  GATEWAY_DASHBOARD_PATH,
  dashboardQueries,
  expandSql,
  loadDashboard,
} from '../scripts/lib/grafana-expand.mjs';

const { values: args } = parseArgs({
  options: {
    rows: { type: 'string', default: '300000000' },
    days: { type: 'string', default: '60' },
    ships: { type: 'string', default: '200' },
    'data-dir': { type: 'string', default: '/tmp/harbor-bench-questdb' },
    runs: { type: 'string', default: '3' },
    reseed: { type: 'boolean', default: false },
    baseline: { type: 'string' },
  },
});
const rows = Number(args.rows);
const days = Number(args.days);
const ships = Number(args.ships);
const runs = Number(args.runs);

// Readings come in pairs of the same ship and time: 2 of every 25 pairs are GPS fixes (latitude and
// longitude, or gps_lat and gps_lon), the others two readings of other sensors.
const SENSORS = [
  'temperature',
  'humidity',
  'pressure',
  'voltage',
  'current',
  'rpm',
  'fuel_level',
  'oil_temp',
  'speed',
  'heading',
  'co2',
  'door_open',
  'vibration',
  'load',
  'battery',
  'rssi',
  'snr',
  'water_temp',
  'wind_speed',
  'wind_dir',
  'depth',
];

/** The panels of the 0.4.0 dashboard by the title of their successor. */
const SUCCESSORS = {
  ship: 'ship',
  cargo: 'cargo',
  Readings: 'Readings',
  'Ships reporting': 'Ships reporting now',
  // biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's own ${name:format} syntax, not a template literal
  'Values over time: $cargo': 'Values over time: ${cargo:text}',
  'Latest value per series': 'Cargo now',
  Summary: 'Cargo summary',
  'Positions and tracks': 'Positions and tracks',
};

const questdb = await startQuestDb({ dataDir: args['data-dir'], heap: '4g' });
const client = new pg.Client({ host: '127.0.0.1', port: questdb.pgPort, user: 'admin', password: 'quest', database: 'qdb' });
await client.connect();

/** @param {string} sql */
const query = (sql) => client.query(sql);

try {
  const existing = await query(`SELECT count() AS n FROM tables() WHERE table_name = 'cargo_data'`);
  const seeded = Number(existing.rows[0].n) > 0 ? Number((await query('SELECT count() AS n FROM cargo_data')).rows[0].n) : 0;
  const now = Date.now();
  const start = now - days * 86_400_000;
  if (seeded < rows || args.reseed) {
    await query('DROP TABLE IF EXISTS cargo_data');
    await query(
      'CREATE TABLE cargo_data (time TIMESTAMP_NS, ship_id SYMBOL CAPACITY 1024, cargo_id SYMBOL, value DOUBLE) ' +
        'TIMESTAMP(time) PARTITION BY DAY BYPASS WAL',
    );
    const stepMicros = Math.floor((days * 86_400_000_000) / rows) * 2;
    const sensors = SENSORS.map((c) => `'${c}'`).join(',');
    const began = performance.now();
    // pair = (x - 1) / 2 numbers the pairs; one ship stops reporting after the first week, which shows
    // what a recent-window variable leaves out.
    const pair = '((x - 1) / 2)';
    await query(
      `INSERT INTO cargo_data SELECT cast(${start * 1000} + ${pair} * ${stepMicros} AS timestamp), ` +
        `CASE WHEN x < ${Math.floor(rows / days) * 7} AND ${pair} % 500 = 0 THEN 'ship-retired' ` +
        `ELSE concat('ship-', lpad(cast((${pair} / 25 * 7919 + ${pair} % 25) % ${ships} AS string), 3, '0')) END, ` +
        `CASE WHEN ${pair} % 25 = 0 THEN (CASE WHEN x % 2 = 1 THEN 'latitude' ELSE 'longitude' END) ` +
        `WHEN ${pair} % 25 = 1 THEN (CASE WHEN x % 2 = 1 THEN 'gps_lat' ELSE 'gps_lon' END) ` +
        `ELSE rnd_symbol(${sensors}) END, ` +
        `CASE WHEN ${pair} % 25 < 2 THEN (CASE WHEN x % 2 = 1 THEN 50 + ${pair} % 1000 / 1000.0 ELSE 8 + ${pair} % 997 / 1000.0 END) ELSE rnd_double() * 100 END ` +
        `FROM long_sequence(${rows})`,
    );
    process.stdout.write(`seeded ${rows} rows over ${days} days in ${((performance.now() - began) / 1000).toFixed(0)} s\n`);
  }
  // The site column as the gateway adds it to a table of before sites: every reading without one,
  // the case where the site variable's list is empty and All must still show everything.
  await query('ALTER TABLE cargo_data ADD COLUMN IF NOT EXISTS site SYMBOL');

  /** Median wall time of `runs` runs, after one warm-up run. */
  const time = async (/** @type {string} */ sql) => {
    const first = await query(sql);
    const samples = [];
    for (let i = 0; i < runs; i++) {
      const began = performance.now();
      await query(sql);
      samples.push(performance.now() - began);
    }
    samples.sort((a, b) => a - b);
    return { ms: samples[Math.floor(samples.length / 2)] ?? 0, rowCount: first.rowCount ?? 0 };
  };

  await setUpGatewayTables(ships, now);

  const allShips = (await query('SELECT DISTINCT ship_id FROM cargo_data ORDER BY ship_id')).rows.map((r) => String(r.ship_id));
  const allCargo = (await query('SELECT DISTINCT cargo_id FROM cargo_data ORDER BY cargo_id')).rows.map((r) => String(r.cargo_id));
  const end = Date.parse((await query('SELECT max(time) AS t FROM cargo_data')).rows[0].t);
  // The alternatives filter by the list of every ship; the dashboard's queries get its All ('').
  const variables = {
    ship: { model: { multi: true, includeAll: true }, value: allShips },
    cargo: { model: { multi: true, includeAll: true }, value: allCargo },
  };
  const site = loadDashboard(DASHBOARD_PATH);
  const model = (/** @type {string} */ name) => site.templating.list.find((/** @type {any} */ v) => v.name === name);
  const selectAll = {
    site: { model: model('site'), value: ALL, options: [] },
    ship: { model: model('ship'), value: ALL, options: allShips },
    cargo: { model: model('cargo'), value: ALL, options: allCargo },
  };

  const alternatives = {
    'ship: DISTINCT over the whole table': 'SELECT DISTINCT ship_id FROM cargo_data',
    'ship: DISTINCT over the last 30 days': "SELECT DISTINCT ship_id FROM cargo_data WHERE time > dateadd('d', -30, now())",
    'ship: LATEST ON ship, whole table': 'SELECT ship_id FROM cargo_data LATEST ON time PARTITION BY ship_id',
    'ship: LATEST ON ship, last 30 days':
      "SELECT ship_id FROM cargo_data WHERE time > dateadd('d', -30, now()) LATEST ON time PARTITION BY ship_id",
    'cargo: DISTINCT for the selected ships, whole table': 'SELECT DISTINCT cargo_id FROM cargo_data WHERE ship_id IN ($ship)',
    'cargo: DISTINCT for the selected ships, last 30 days':
      "SELECT DISTINCT cargo_id FROM cargo_data WHERE time > dateadd('d', -30, now()) AND ship_id IN ($ship)",
    'cargo: LATEST ON ship and cargo, last 30 days':
      "SELECT DISTINCT cargo_id FROM (SELECT ship_id, cargo_id FROM cargo_data WHERE time > dateadd('d', -30, now()) AND ship_id IN ($ship) LATEST ON time PARTITION BY ship_id, cargo_id)",
    'cargo: LATEST ON cargo, last 30 days, all ships selected':
      "SELECT cargo_id FROM cargo_data WHERE time > dateadd('d', -30, now()) AND ship_id IN ($ship) LATEST ON time PARTITION BY cargo_id",
    'cargo: LATEST ON cargo, last 30 days, one ship selected':
      "SELECT cargo_id FROM cargo_data WHERE time > dateadd('d', -30, now()) AND ship_id IN ('ship-007') LATEST ON time PARTITION BY cargo_id",
    'cargo: LATEST ON cargo, last 30 days, a ship without recent readings':
      "SELECT cargo_id FROM cargo_data WHERE time > dateadd('d', -30, now()) AND ship_id IN ('ship-retired') LATEST ON time PARTITION BY cargo_id",
  };

  if (args.baseline !== undefined) {
    await compareWithBaseline(JSON.parse(readFileSync(args.baseline, 'utf8')), site, selectAll, end);
    process.exit(0);
  }

  const table = (await query('SELECT count() AS n FROM cargo_data')).rows[0].n;
  process.stdout.write(
    `\ncargo_data: ${table} rows, ${allShips.length} ships, ${allCargo.length} cargo ids; median of ${runs} runs after a warm-up\n\n`,
  );
  process.stdout.write('| query | range | rows | ms |\n|---|---|---|---|\n');
  const range30 = { from: end - 30 * 86_400_000, to: end };
  for (const [name, sql] of Object.entries(alternatives)) {
    const { ms, rowCount } = await time(expandSql(sql, { range: range30, variables }));
    process.stdout.write(`| ${name} | | ${rowCount} | ${ms.toFixed(0)} |\n`);
  }
  const ranges = { '6 h': 6 * 3_600_000, '7 d': 7 * 86_400_000, '30 d': 30 * 86_400_000 };
  for (const dashboard of [site, loadDashboard(GATEWAY_DASHBOARD_PATH)]) {
    process.stdout.write(`| **${dashboard.title}** | | | |\n`);
    const annotations = dashboard.annotations.list
      .filter((/** @type {any} */ a) => a.target?.rawSql !== undefined)
      .map((/** @type {any} */ a) => ({ kind: 'annotation', title: a.name, refId: '', rawSql: a.target.rawSql }));
    for (const q of [...dashboardQueries(dashboard), ...annotations]) {
      const spans = q.kind === 'variable' ? { '': 0 } : ranges;
      // A repeated panel runs once per value of its variable, with that value alone.
      const repeat = q.panel?.repeat;
      const panelVariables = repeat ? { ...selectAll, [repeat]: { ...selectAll.cargo, value: ['temperature'] } } : selectAll;
      for (const [label, span] of Object.entries(spans)) {
        const range = { from: end - (span || 30 * 86_400_000), to: end };
        const { ms, rowCount } = await time(expandSql(q.rawSql, { range, variables: panelVariables, maxDataPoints: q.maxDataPoints }));
        process.stdout.write(`| ${q.kind} ${q.title} ${q.kind === 'panel' ? q.refId : ''} | ${label} | ${rowCount} | ${ms.toFixed(0)} |\n`);
      }
    }
  }
  // Each rule over its own time range, as Grafana's alerting runs it every minute.
  process.stdout.write('| **Alert rules** | | | |\n');
  for (const group of /** @type {any} */ (parse(readFileSync(ALERT_RULES_PATH, 'utf8'))).groups) {
    for (const rule of group.rules) {
      const [data] = rule.data;
      const range = { from: end - data.relativeTimeRange.from * 1000, to: end };
      const { ms, rowCount } = await time(expandSql(data.model.rawSql, { range }));
      process.stdout.write(`| rule ${rule.uid} | | ${rowCount} | ${ms.toFixed(0)} |\n`);
    }
  }
} finally {
  await client.end();
  await questdb.stop();
}

/**
 * Each query of the earlier dashboard and its successor's, in turn: a warm-up of each, then `runs`
 * rounds of one run each, medians.
 * @param {any} baseline
 * @param {any} current
 * @param {Record<string, any>} selectAll
 * @param {number} end
 */
async function compareWithBaseline(baseline, current, selectAll, end) {
  const ranges = { '6 h': 6 * 3_600_000, '7 d': 7 * 86_400_000, '30 d': 30 * 86_400_000 };
  const now = dashboardQueries(current);
  const model = (/** @type {any} */ d, /** @type {string} */ name) => d.templating.list.find((/** @type {any} */ v) => v.name === name);
  process.stdout.write(
    `\nmedian of ${runs} interleaved runs after a warm-up\n\n| query (0.4.0 → now) | range | 0.4.0 ms | now ms |\n|---|---|---|---|\n`,
  );
  for (const before of dashboardQueries(baseline)) {
    const title = /** @type {Record<string, string>} */ (SUCCESSORS)[before.title];
    const after = now.find((q) => q.title === title && q.refId === before.refId && q.kind === before.kind);
    if (after === undefined) continue;
    for (const [label, span] of Object.entries(before.kind === 'variable' ? { '': 0 } : ranges)) {
      const range = { from: end - (span || 30 * 86_400_000), to: end };
      /** @param {any} dashboard @param {any} q */
      const text = (dashboard, q) => {
        const variables = {
          site: selectAll.site,
          ship: { ...selectAll.ship, model: model(dashboard, 'ship') },
          cargo: { ...selectAll.cargo, model: model(dashboard, 'cargo'), ...(q.panel?.repeat ? { value: ['temperature'] } : {}) },
        };
        return expandSql(q.rawSql, { range, variables, maxDataPoints: q.maxDataPoints });
      };
      const pair = [text(baseline, before), text(current, after)];
      for (const sql of pair) await query(sql);
      /** @type {[number[], number[]]} */
      const samples = [[], []];
      for (let i = 0; i < runs; i++) {
        for (const [j, sql] of pair.entries()) {
          const began = performance.now();
          await query(sql);
          samples[j]?.push(performance.now() - began);
        }
      }
      const [old, current_] = samples.map((s) => s.sort((a, b) => a - b)[Math.floor(s.length / 2)] ?? 0);
      process.stdout.write(
        `| ${before.title} ${before.refId} → ${after.title} | ${label} | ${old?.toFixed(0)} | ${current_?.toFixed(0)} |\n`,
      );
    }
  }
}

/**
 * The gateway's tables as the built gateway makes them at its start, with a catalogue naming the
 * seeded ids (an entry per sensor, some patterns, every ship named), a last row at its stop, then
 * 30 days of health rows every 10 s, key and sink rows, and a start and a stop every day.
 * @param {number} shipCount
 * @param {number} now
 */
async function setUpGatewayTables(shipCount, now) {
  const exists = await query(`SELECT count() AS n FROM tables() WHERE table_name = 'gateway_health'`);
  if (Number(exists.rows[0].n) > 0 && Number((await query('SELECT count() AS n FROM gateway_health')).rows[0].n) > 1000) return;
  const work = mkdtempSync(join(tmpdir(), 'harbor-bench-grafana-'));
  const catalogue = join(work, 'catalogue.yaml');
  const ships = Array.from({ length: shipCount }, (_, i) => `  ship-${String(i).padStart(3, '0')}: MV Number ${i}`);
  const cargo = SENSORS.map(
    (c, i) =>
      `  - match: ${i % 3 === 0 ? `${c.slice(0, 3)}*` : c}\n    name: ${c.replace(/_/g, ' ')}\n    unit: u\n    min: 10\n    max: 90\n    decimals: 1`,
  );
  writeFileSync(catalogue, `ships:\n${ships.join('\n')}\ncargo:\n${cargo.join('\n')}\n`);
  const gateway = await startGatewayProcess({
    bundle: join(projectRoot, 'dist', 'gateway.mjs'),
    env: {
      API_KEY: 'bench-key-0123456789',
      DATA_DIR: join(work, 'data'),
      QUESTDB_URL: questdb.httpUrl,
      QUESTDB_TABLE: 'cargo_data_of_the_gateway',
      GATEWAY_NAME: 'bench-site',
      CATALOGUE_FILE: catalogue,
      LOG_LEVEL: 'info',
    },
  });
  for (let i = 0; i < 600; i++) {
    const published = await query(`SELECT count() AS n FROM tables() WHERE table_name = 'cargo_catalogue'`);
    if (Number(published.rows[0].n) > 0 && Number((await query('SELECT count() AS n FROM cargo_catalogue')).rows[0].n) > 0) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  gateway.child.kill('SIGTERM');
  await gateway.exited;
  rmSync(work, { recursive: true, force: true });
  const from = (now - 30 * 86_400_000) * 1000;
  const reports = 30 * 8640;
  await query(
    `INSERT INTO gateway_health (time, gateway, ready, queue_readings, queue_bytes, queue_max_bytes, oldest_age_s, dead_letters, flush_failures,
      consecutive_flush_failures, accepted_readings, flushed_readings, refused_requests, clock_synced, clock, state, state_text)
     SELECT cast(${from} + x * 10000000 AS timestamp), 'bench-site', true, x % 50, (x % 50) * 100, 1073741824, 2.5, 0, 0, 0, x * 58, x * 58, 0,
       true, 'synchronised', 'delivering', 'delivering' FROM long_sequence(${reports})`,
  );
  await query(
    `INSERT INTO gateway_key_health SELECT cast(${from} + (x / 3) * 10000000 AS timestamp), 'bench-site', rnd_symbol('default', 'crane', 'buoy'),
       null, x, x * 10, 0, cast(${from} + (x / 3) * 10000000 AS timestamp) FROM long_sequence(${reports * 3})`,
  );
  await query(
    `INSERT INTO gateway_sink_health SELECT cast(${from} + (x / 2) * 10000000 AS timestamp), 'bench-site', rnd_symbol('questdb', 'upstream'),
       'up to date', 0, null, x * 58, 0, 0, 0 FROM long_sequence(${reports * 2})`,
  );
  await query(
    `INSERT INTO gateway_events SELECT cast(${from} + x * 86400000000 + (x % 2) * 60000000 AS timestamp), 'bench-site',
       CASE WHEN x % 2 = 0 THEN 'stopped' ELSE 'started' END, 'restart', '0.5.0', 'a restart', null FROM long_sequence(60)`,
  );
  for (const table of [
    'gateway_health',
    'gateway_key_health',
    'gateway_sink_health',
    'gateway_events',
    'cargo_catalogue',
    'ship_catalogue',
  ]) {
    for (let i = 0; i < 600; i++) {
      const pending = await query(`SELECT writerTxn - sequencerTxn AS behind FROM wal_tables() WHERE name = '${table}'`);
      if (Number(pending.rows[0]?.behind ?? 0) === 0) break;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  process.stdout.write(`gateway tables: ${reports} health rows over 30 days, ${shipCount} ship names, ${SENSORS.length} cargo entries\n`);
}
