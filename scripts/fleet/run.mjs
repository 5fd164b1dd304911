// The fleet run: site gateways (their own processes and queues, flush intervals staggered), each
// forwarding to one central gateway in front of QuestDB and to a Kafka topic, with device load on
// every site; the uplink is cut (the central gateway killed, -9, and the broker stopped) for a while
// and both started again. Checks at the end that every reading a site answered is in the central
// table exactly once and in the topic at least once (duplicates counted), and that the Fleet
// dashboard's queries, run as Grafana sends them, list every site and its sinks from the reports
// the sites sent the central gateway; prints the figures.
//   npm run fleet -- [--sites 20] [--seconds 120] [--outage 40] [--rate 200] [--durability power-loss] [--no-kafka]
// --rate is readings per second per site; the outage starts a quarter into the load.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import pg from 'pg';
import os, { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { startDevices } from '../lib/device-load.mjs';
import { startGatewayProcess } from '../lib/gateway-process.mjs';
import { dashboardQueries, expandSql } from '../lib/grafana-expand.mjs';
import { createKafkaTopic, KAFKA_VERSION, startKafka } from '../lib/kafka.mjs';
import { readTopic } from '../lib/kafka-topic.mjs';
import { freePort } from '../lib/ports.mjs';
import { projectRoot } from '../lib/paths.mjs';
import { QUESTDB_VERSION, startQuestDb } from '../lib/questdb.mjs';
import { sql, walApplied } from '../lib/questdb-sql.mjs';

const { values: args } = parseArgs({
  options: {
    sites: { type: 'string', default: '20' },
    seconds: { type: 'string', default: '120' },
    outage: { type: 'string' },
    rate: { type: 'string', default: '200' },
    durability: { type: 'string', default: 'power-loss' },
    'no-kafka': { type: 'boolean', default: false },
  },
});
const sites = Number(args.sites);
const seconds = Number(args.seconds);
const outageSeconds = Number(args.outage ?? Math.round(seconds / 3));
const rate = Number(args.rate);
for (const [name, value] of Object.entries({ sites, seconds, outageSeconds, rate })) {
  if (!(value > 0)) throw new Error(`--${name} must be a positive number`);
}
if (seconds / 4 + outageSeconds >= seconds) throw new Error('--outage must end before the load does (it starts a quarter into --seconds)');
const durability = args.durability;
const withKafka = !args['no-kafka'];
const command = `npm run fleet -- --sites ${sites} --seconds ${seconds} --outage ${outageSeconds} --rate ${rate} --durability ${durability}${withKafka ? '' : ' --no-kafka'}`;

const BATCH = 20;
const SITE_KEY = 'fleet-site-key-0123456789';
const CENTRAL_KEY = 'fleet-central-key-0123456789';
const bundle = join(projectRoot, 'dist', 'gateway.mjs');
const sleep = (/** @type {number} */ ms) => new Promise((r) => setTimeout(r, ms));
const started = Date.now();
const log = (/** @type {string} */ line) =>
  process.stdout.write(`[fleet ${((Date.now() - started) / 1000).toFixed(1).padStart(6)} s] ${line}\n`);

// Each gateway process registers an exit handler that kills it with this one.
process.setMaxListeners(sites + 10);
const work = mkdtempSync(join(tmpdir(), 'harbor-fleet-'));
process.once('exit', () => {
  try {
    rmSync(work, { recursive: true, force: true });
  } catch {
    // QuestDB may still be writing as it dies; the directory is then left in the temporary directory.
  }
});
const questdb = await startQuestDb({ dataDir: join(work, 'questdb') });
const stamp = Date.now();
const kafka = withKafka ? await startKafka() : undefined;
process.once('exit', () => {
  if (kafka !== undefined) rmSync(kafka.dataDir, { recursive: true, force: true });
});
const kafkaTopic = `fleet_${stamp}`;
if (kafka !== undefined) {
  await createKafkaTopic(kafka.bootstrap, kafkaTopic);
  log(`Kafka ${KAFKA_VERSION} at ${kafka.bootstrap}, topic ${kafkaTopic}`);
}
const remoteSinks = withKafka ? ['upstream', 'kafka'] : ['upstream'];
const centralTable = `fleet_central_${stamp}`;
const sitesTable = `fleet_sites_${stamp}`;
const centralPort = String(await freePort());
const centralEnv = {
  PORT: centralPort,
  API_KEY: CENTRAL_KEY,
  DATA_DIR: join(work, 'central'),
  QUESTDB_URL: questdb.httpUrl,
  QUESTDB_TABLE: centralTable,
  RETENTION_DAYS: '0',
  HEALTH_REPORT: 'false',
  DURABILITY: durability,
};
const startCentral = () => startGatewayProcess({ bundle, env: centralEnv, timeoutMs: 60_000 });
let central = await startCentral();
log(`QuestDB ${QUESTDB_VERSION} at ${questdb.httpUrl}; central gateway pid ${central.pid} at ${central.url}`);

// Every site's readings fall on a day of its own, so no two sites share a key and each site's
// share of the central table is one time interval.
const dayOf = (/** @type {number} */ i) => new Date(Date.UTC(2026, 0, 1 + i)).toISOString().slice(0, 10);
const siteId = (/** @type {number} */ i) => `site-${String(i).padStart(3, '0')}`;
/** @type {import('../lib/gateway-process.mjs').GatewayProcess[]} */
const siteGateways = [];
for (let i = 0; i < sites; i++) {
  siteGateways.push(
    await startGatewayProcess({
      bundle,
      timeoutMs: 60_000,
      env: {
        API_KEY: SITE_KEY,
        SITE_ID: siteId(i),
        DATA_DIR: join(work, `site-${i}`),
        QUESTDB_URL: questdb.httpUrl,
        QUESTDB_TABLE: sitesTable,
        RETENTION_DAYS: '0',
        // Health rows and the reports to the centre, every 5 s.
        HEALTH_REPORT: 'true',
        HOUSEKEEPING_CRON: '*/5 * * * * *',
        DURABILITY: durability,
        // Staggered, so the sites' deliveries do not all fall on the same instant.
        FLUSH_INTERVAL_MS: String(500 + Math.round((500 * i) / sites)),
        FLUSH_BACKOFF_MAX_MS: '5000',
        UPSTREAM_URL: `${central.url}/api/v2/ingest/batch`,
        UPSTREAM_API_KEY: CENTRAL_KEY,
        ...(kafka === undefined ? {} : { KAFKA_BROKERS: kafka.bootstrap, KAFKA_TOPIC: kafkaTopic }),
      },
    }),
  );
}
log(`${sites} site gateways started; load ${rate} readings/s per site in batches of ${BATCH}`);

/** @param {import('../lib/gateway-process.mjs').GatewayProcess} gw */
const rssMb = (gw) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${gw.pid}/status`, 'utf8'))?.[1]) / 1024;
/** @typedef {{ name: string, backlog: number, oldestAgeSeconds: number | null }} SinkStatus */
/**
 * The site's remote sinks as /status shows them, by name.
 * @param {import('../lib/gateway-process.mjs').GatewayProcess} gw
 * @returns {Promise<Map<string, SinkStatus>>}
 */
const remoteSinksOf = async (gw) => {
  const status = /** @type {{ sinks: SinkStatus[] }} */ (
    await (await fetch(`${gw.url}/status`, { headers: { 'x-api-key': SITE_KEY } })).json()
  );
  const byName = new Map(status.sinks.map((s) => [s.name, s]));
  for (const name of remoteSinks) if (!byName.has(name)) throw new Error(`site ${gw.url} has no ${name} sink`);
  return byName;
};
/**
 * CPU seconds the process used so far (user + system; the clock ticks at 100 Hz on Linux).
 * @param {import('../lib/gateway-process.mjs').GatewayProcess} gw
 */
const cpuSeconds = (gw) => {
  const fields = readFileSync(`/proc/${gw.pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  return (Number(fields[11]) + Number(fields[12])) / 100;
};
let peakSiteRssMb = 0;
const sampleRss = () => {
  for (const gw of siteGateways) peakSiteRssMb = Math.max(peakSiteRssMb, rssMb(gw));
};

const loads = siteGateways.map((gw, i) =>
  startDevices({ url: gw.url, apiKey: SITE_KEY, date: dayOf(i), batchSize: BATCH, devices: 1, pauseMs: (1000 * BATCH) / rate }),
);
const accepted = () => loads.reduce((sum, l) => sum + l.accepted, 0);
const loadStarted = Date.now();
const sampler = setInterval(sampleRss, 2000);

await sleep((seconds / 4) * 1000);
const cutAt = Date.now();
// The broker's controlled shutdown (SIGTERM) takes a while; the cut starts when it is asked to stop.
await Promise.all([
  (async () => {
    central.child.kill('SIGKILL');
    await central.exited;
  })(),
  kafka?.stop(),
]);
log(`uplink cut: central gateway killed (-9)${kafka ? ', Kafka stopped,' : ''} after ${accepted()} readings accepted by the sites`);
await sleep(Math.max(0, cutAt + outageSeconds * 1000 - Date.now()));
/** Readings each remote sink still held, summed over the sites, when its destination came back. */
const backlogAtRestart = /** @type {Record<string, number>} */ ({});
/** @type {Record<string, number>} */
const restoredAt = {};
const sumBacklog = async (/** @type {string} */ name) =>
  (await Promise.all(siteGateways.map(remoteSinksOf))).reduce((sum, sinks) => sum + (sinks.get(name)?.backlog ?? 0), 0);
await Promise.all([
  (async () => {
    backlogAtRestart.upstream = await sumBacklog('upstream');
    central = await startCentral();
    restoredAt.upstream = Date.now();
    log(
      `central gateway back after ${((restoredAt.upstream - cutAt) / 1000).toFixed(1)} s; ${backlogAtRestart.upstream} readings were waiting at the sites`,
    );
  })(),
  (async () => {
    if (kafka === undefined) return;
    backlogAtRestart.kafka = await sumBacklog('kafka');
    await kafka.start();
    restoredAt.kafka = Date.now();
    log(
      `Kafka back after ${((restoredAt.kafka - cutAt) / 1000).toFixed(1)} s; ${backlogAtRestart.kafka} readings were waiting at the sites`,
    );
  })(),
]);

/**
 * Per remote sink, seconds from its destination's return (or `since`) until `done` held for that
 * sink at every site; null when not before `deadline`.
 * @param {number | undefined} since
 * @param {number} deadline
 * @param {(s: SinkStatus) => boolean} done
 * @returns {Promise<Record<string, number | null>>}
 */
const waitSites = async (since, deadline, done) => {
  /** @type {Record<string, number | null>} */
  const took = Object.fromEntries(remoteSinks.map((name) => [name, null]));
  for (;;) {
    const all = await Promise.all(siteGateways.map(remoteSinksOf));
    for (const name of remoteSinks) {
      const sinceFor = since ?? restoredAt[name] ?? Date.now();
      if (took[name] === null && all.every((sinks) => done(/** @type {SinkStatus} */ (sinks.get(name)))))
        took[name] = Number(((Date.now() - sinceFor) / 1000).toFixed(1));
    }
    if (Object.values(took).every((s) => s !== null) || Date.now() > deadline) return took;
    await sleep(250);
  }
};
// Under load the backlog is never quite empty; the sites have caught up once nothing older than
// a few seconds waits, that is, nothing from the outage.
const CAUGHT_UP_AGE_S = 3;
const caughtUpUnderLoad = await waitSites(
  undefined,
  loadStarted + seconds * 1000,
  (s) => s.oldestAgeSeconds === null || s.oldestAgeSeconds < CAUGHT_UP_AGE_S,
);
await sleep(Math.max(0, loadStarted + seconds * 1000 - Date.now()));
await Promise.all(loads.map((l) => l.stop()));
const loadSeconds = (Date.now() - loadStarted) / 1000;
const stoppedAt = Date.now();
const total = accepted();
const refused = loads.reduce((sum, l) => sum + l.refused, 0);
log(`load stopped after ${loadSeconds.toFixed(1)} s: ${total} readings accepted, ${refused} requests refused`);
const drainSeconds = await waitSites(stoppedAt, Date.now() + 600_000, (s) => s.backlog === 0);
const undrained = remoteSinks.filter((name) => drainSeconds[name] === null);
if (undrained.length > 0)
  throw new Error(`the sites' ${undrained.join(' and ')} sinks did not deliver everything within 10 minutes of the load`);
clearInterval(sampler);
sampleRss();
const fleetView = await checkFleetView();
const siteRss = siteGateways.map(rssMb);
const centralRssMb = rssMb(central);
const siteCpuSeconds = siteGateways.reduce((sum, gw) => sum + cpuSeconds(gw), 0);

await Promise.all(
  [...siteGateways, central].map((gw) => {
    gw.child.kill('SIGTERM');
    return gw.exited;
  }),
);
if (!(await walApplied(questdb.httpUrl, centralTable, 120_000))) throw new Error('QuestDB did not apply the central WAL in time');
const count = async (/** @type {string} */ query) => Number((await sql(questdb.httpUrl, query)).dataset[0]?.[0]);
const centralRows = await count(`SELECT count() FROM "${centralTable}"`);
const perSite = [];
for (const [i, l] of loads.entries()) {
  const rows = await count(`SELECT count() FROM "${centralTable}" WHERE time IN '${dayOf(i)}'`);
  const distinct = await count(`SELECT count() FROM (SELECT DISTINCT value FROM "${centralTable}" WHERE time IN '${dayOf(i)}')`);
  perSite.push({ site: i, accepted: l.accepted, rows, distinct });
}
await questdb.stop();
const wrong = perSite.filter((s) => s.rows !== s.accepted || s.distinct !== s.accepted);

// Kafka: each site's readings are told apart by their day, as in the central table; a reading sent
// again after a request whose answer the broker's stop cut off is a duplicate, never a loss.
const kafkaCheck = await (async () => {
  if (kafka === undefined) return undefined;
  const messages = await readTopic(kafka.bootstrap, kafkaTopic, 600_000);
  await kafka.close();
  const siteOfDay = new Map(loads.map((_, i) => [dayOf(i), i]));
  const seen = loads.map(() => new Set());
  let strangers = 0;
  for (const m of messages) {
    const reading = /** @type {{ time: string, value: number }} */ (JSON.parse(m.value));
    const site = siteOfDay.get(reading.time.slice(0, 10));
    if (site === undefined) strangers++;
    else seen[site]?.add(reading.value);
  }
  const perSiteKafka = loads.map((l, i) => ({ site: i, accepted: l.accepted, distinct: seen[i]?.size ?? 0 }));
  const lost = perSiteKafka.reduce((sum, s) => sum + Math.max(0, s.accepted - s.distinct), 0);
  return {
    messages: messages.length,
    lost,
    duplicates: messages.length - strangers - perSiteKafka.reduce((sum, s) => sum + s.distinct, 0),
    strangers,
    short: perSiteKafka.filter((s) => s.distinct < s.accepted),
  };
})();

/**
 * The Fleet dashboard's Sites and Sinks queries, as Grafana sends them, against the central
 * QuestDB once a report after the drain has arrived from every site: every site listed, reporting,
 * each remote sink up to date. Returns what they showed and how long the queries took.
 */
async function checkFleetView() {
  const dashboard = JSON.parse(readFileSync(join(projectRoot, 'grafana', 'provisioning', 'dashboards', 'harbor', 'fleet.json'), 'utf8'));
  const queries = dashboardQueries(dashboard);
  const rawSql = (/** @type {string} */ title) => /** @type {{ rawSql: string }} */ (queries.find((q) => q.title === title)).rawSql;
  const client = new pg.Client({ host: '127.0.0.1', port: questdb.pgPort, user: 'admin', password: 'quest', database: 'qdb' });
  await client.connect();
  try {
    const expected = siteGateways.map((_, i) => siteId(i));
    const deadline = Date.now() + 60_000;
    for (;;) {
      const range = { from: Date.now() - 3_600_000, to: Date.now() + 60_000 };
      const started = performance.now();
      const sitesRows = (await client.query(expandSql(rawSql('Sites'), { range }))).rows;
      const sinksRows = (await client.query(expandSql(rawSql('Sinks of each site'), { range }))).rows;
      const queryMs = Math.round(performance.now() - started);
      const listed = sitesRows.filter((r) => expected.includes(r.site));
      const caughtUp = expected.every((site) =>
        remoteSinks.every((sink) => sinksRows.some((r) => r.site === site && r.sink === sink && Number(r.backlog_readings) === 0)),
      );
      const reporting = listed.filter((r) => r.reporting === 'reporting').length;
      if ((listed.length === expected.length && reporting === expected.length && caughtUp) || Date.now() > deadline) {
        const offsets = listed.map((r) => Math.abs(Number(r.clock_offset_s)));
        return {
          sitesListed: listed.length,
          reporting,
          sinksUpToDate: caughtUp,
          states: Object.fromEntries(
            [...new Set(listed.map((r) => r.state))].map((state) => [state, listed.filter((r) => r.state === state).length]),
          ),
          largestClockOffsetSeconds: Number(Math.max(...offsets, 0).toFixed(3)),
          queryMs,
        };
      }
      await sleep(1000);
    }
  } finally {
    await client.end();
  }
}

const summary = {
  command,
  machine: `${os.cpus().length} × ${os.cpus()[0]?.model.trim()}, ${(os.totalmem() / 1024 ** 3).toFixed(0)} GiB, load average ${os
    .loadavg()
    .map((n) => n.toFixed(1))
    .join(' ')} at the end, Node ${process.version}`,
  sites,
  durability,
  readingsAccepted: total,
  requestsRefused: refused,
  /** Requests a device sent again because no answer came (a keep-alive connection closed as it went out). */
  requestsResent: loads.reduce((sum, l) => sum + l.resent, 0),
  loadSeconds: Number(loadSeconds.toFixed(1)),
  acceptedPerSecond: Math.round(total / loadSeconds),
  /** Per destination: from the cut until it was back. */
  outageSeconds: Object.fromEntries(Object.entries(restoredAt).map(([name, at]) => [name, Number(((at - cutAt) / 1000).toFixed(1))])),
  backlogAtRestart,
  /** From each destination's return until no site held a reading older than CAUGHT_UP_AGE_S for it; null: not before the load ended. */
  caughtUpUnderLoadSeconds: caughtUpUnderLoad,
  drainAfterLoadSeconds: drainSeconds,
  centralRows,
  exactlyOnce: wrong.length === 0 && centralRows === total,
  /** Messages in the topic; lost = answered readings missing from it; duplicates = messages beyond one per reading. */
  kafka:
    kafkaCheck === undefined
      ? null
      : { messages: kafkaCheck.messages, lost: kafkaCheck.lost, duplicates: kafkaCheck.duplicates, strangers: kafkaCheck.strangers },
  siteRssMb: {
    median: Number(siteRss.sort((a, b) => a - b)[Math.floor(siteRss.length / 2)]?.toFixed(1)),
    max: Number(Math.max(...siteRss).toFixed(1)),
    peak: Number(peakSiteRssMb.toFixed(1)),
  },
  centralRssMb: Number(centralRssMb.toFixed(1)),
  /** The Fleet dashboard's Sites and Sinks queries at the centre after the drain: sites listed and reporting, and their time. */
  fleetView,
  /** All sites together: ingest, the local QuestDB sink and the remote sinks. */
  siteCpuSecondsPerMillionReadings: Math.round((siteCpuSeconds / total) * 1e6),
  wallSeconds: Number(((Date.now() - started) / 1000).toFixed(1)),
};
process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
let failed = false;
if (!summary.exactlyOnce) {
  process.stdout.write(`sites whose central rows differ from what they answered: ${JSON.stringify(wrong)}\n`);
  failed = true;
}
if (fleetView.sitesListed !== sites || fleetView.reporting !== sites || !fleetView.sinksUpToDate) {
  process.stdout.write(`the Fleet dashboard does not show every site reporting with its sinks up to date: ${JSON.stringify(fleetView)}\n`);
  failed = true;
}
if (kafkaCheck !== undefined && (kafkaCheck.lost > 0 || kafkaCheck.strangers > 0)) {
  process.stdout.write(`sites with answered readings missing from Kafka: ${JSON.stringify(kafkaCheck.short)}\n`);
  failed = true;
}
if (failed) process.exit(1);
log(
  `every answered reading is in the central table exactly once${kafkaCheck ? ` and in Kafka at least once (${kafkaCheck.duplicates} duplicates, each a reading sent again after a request the broker's stop left unanswered)` : ''}`,
);
process.exit(0);
