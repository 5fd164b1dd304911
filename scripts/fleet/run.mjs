// The fleet run: site gateways (their own processes and queues, flush intervals staggered), each
// forwarding to one central gateway in front of QuestDB, with device load on every site; the uplink
// is cut (the central gateway killed, -9) for a while and started again. Checks at the end that
// every reading a site answered is in the central table exactly once, and prints the figures.
//   npm run fleet -- [--sites 20] [--seconds 120] [--outage 40] [--rate 200] [--durability power-loss]
// --rate is readings per second per site; the outage starts a quarter into the load.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os, { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { startDevices } from '../lib/device-load.mjs';
import { startGatewayProcess } from '../lib/gateway-process.mjs';
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
const command = `npm run fleet -- --sites ${sites} --seconds ${seconds} --outage ${outageSeconds} --rate ${rate} --durability ${durability}`;

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
/** @type {import('../lib/gateway-process.mjs').GatewayProcess[]} */
const siteGateways = [];
for (let i = 0; i < sites; i++) {
  siteGateways.push(
    await startGatewayProcess({
      bundle,
      timeoutMs: 60_000,
      env: {
        API_KEY: SITE_KEY,
        DATA_DIR: join(work, `site-${i}`),
        QUESTDB_URL: questdb.httpUrl,
        QUESTDB_TABLE: sitesTable,
        RETENTION_DAYS: '0',
        HEALTH_REPORT: 'false',
        DURABILITY: durability,
        // Staggered, so the sites' deliveries do not all fall on the same instant.
        FLUSH_INTERVAL_MS: String(500 + Math.round((500 * i) / sites)),
        FLUSH_BACKOFF_MAX_MS: '5000',
        UPSTREAM_URL: `${central.url}/api/v2/ingest/batch`,
        UPSTREAM_API_KEY: CENTRAL_KEY,
      },
    }),
  );
}
log(`${sites} site gateways started; load ${rate} readings/s per site in batches of ${BATCH}`);

/** @param {import('../lib/gateway-process.mjs').GatewayProcess} gw */
const rssMb = (gw) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${gw.pid}/status`, 'utf8'))?.[1]) / 1024;
/**
 * The site's upstream sink as /status shows it.
 * @param {import('../lib/gateway-process.mjs').GatewayProcess} gw
 * @returns {Promise<{ name: string, backlog: number, oldestAgeSeconds: number | null }>}
 */
const upstreamOf = async (gw) => {
  const status = /** @type {{ sinks: { name: string, backlog: number, oldestAgeSeconds: number | null }[] }} */ (
    await (await fetch(`${gw.url}/status`, { headers: { 'x-api-key': SITE_KEY } })).json()
  );
  const sink = status.sinks.find((s) => s.name === 'upstream');
  if (sink === undefined) throw new Error(`site ${gw.url} has no upstream sink`);
  return sink;
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
central.child.kill('SIGKILL');
await central.exited;
const cutAt = Date.now();
log(`uplink cut: central gateway killed (-9) after ${accepted()} readings accepted by the sites`);
await sleep(outageSeconds * 1000);
const backlogs = await Promise.all(siteGateways.map(upstreamOf));
const backlogAtRestart = backlogs.reduce((sum, s) => sum + s.backlog, 0);
central = await startCentral();
const restoredAt = Date.now();
log(`central gateway back after ${((restoredAt - cutAt) / 1000).toFixed(1)} s; ${backlogAtRestart} readings waiting at the sites`);

/** Seconds from `since` until `done` holds for every site's upstream sink. */
const waitSites = async (
  /** @type {number} */ since,
  /** @type {number} */ deadline,
  /** @type {(s: { backlog: number, oldestAgeSeconds: number | null }) => boolean} */ done,
) => {
  for (;;) {
    const all = await Promise.all(siteGateways.map(upstreamOf));
    if (all.every(done)) return (Date.now() - since) / 1000;
    if (Date.now() > deadline) return null;
    await sleep(250);
  }
};
// Under load the backlog is never quite empty; the sites have caught up once nothing older than
// a few seconds waits, that is, nothing from the outage.
const CAUGHT_UP_AGE_S = 3;
const caughtUpUnderLoad = await waitSites(
  restoredAt,
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
if (drainSeconds === null) throw new Error('the sites did not forward everything within 10 minutes of the load');
clearInterval(sampler);
sampleRss();
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
  loadSeconds: Number(loadSeconds.toFixed(1)),
  acceptedPerSecond: Math.round(total / loadSeconds),
  outageSeconds: Number(((restoredAt - cutAt) / 1000).toFixed(1)),
  backlogAtRestart,
  /** From the central gateway's restart until no site held a reading older than CAUGHT_UP_AGE_S; null: not before the load ended. */
  caughtUpUnderLoadSeconds: caughtUpUnderLoad === null ? null : Number(caughtUpUnderLoad.toFixed(1)),
  drainAfterLoadSeconds: Number(drainSeconds.toFixed(1)),
  centralRows,
  exactlyOnce: wrong.length === 0 && centralRows === total,
  siteRssMb: {
    median: Number(siteRss.sort((a, b) => a - b)[Math.floor(siteRss.length / 2)]?.toFixed(1)),
    max: Number(Math.max(...siteRss).toFixed(1)),
    peak: Number(peakSiteRssMb.toFixed(1)),
  },
  centralRssMb: Number(centralRssMb.toFixed(1)),
  /** All sites together: ingest, the local QuestDB sink and the upstream sink. */
  siteCpuSecondsPerMillionReadings: Math.round((siteCpuSeconds / total) * 1e6),
  wallSeconds: Number(((Date.now() - started) / 1000).toFixed(1)),
};
process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
if (!summary.exactlyOnce) {
  process.stdout.write(`sites whose central rows differ from what they answered: ${JSON.stringify(wrong)}\n`);
  process.exit(1);
}
log('every answered reading is in the central table exactly once');
process.exit(0);
