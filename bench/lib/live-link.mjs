// A live site forwarding upstream, for bench/link-bytes.mjs: its devices post each round as it
// happens, its local QuestDB sink delivers every FLUSH_INTERVAL_MS (1 s) and its upstream sink
// every UPSTREAM_FLUSH_INTERVAL_MS, through a counting proxy in front of a central gateway. Measured:
// the link's bytes per reading once the link is in its steady coding; how long after its request
// was answered each reading was delivered to the local QuestDB and to the centre (from
// the site's `delivered` log lines, which follow queue order, so the site is asked nothing while it
// is measured); and the site gateway's CPU.
import { join } from 'node:path';
import { CountingProxy } from '../../scripts/lib/counting-proxy.mjs';
import { cpuSeconds } from '../../scripts/lib/proc.mjs';
import { settleAndDrop } from '../../scripts/lib/questdb-sql.mjs';
import { percentile, waitsSeconds } from '../../scripts/lib/stats.mjs';
import { tableHolds } from './forward.mjs';
import { startBenchGateway } from './gateway.mjs';
import { READINGS_PER_SHIP_AND_TICK, siteRequests } from './site-mix.mjs';

/** Between a round's ships: their devices' phases (site-mix.mjs staggers their times so). */
const SHIP_PHASE_MS = 731;
/** How often the site's log is read for a sink's deliveries. */
const POLL_MS = 100;

const pause = (/** @type {number} */ ms) => new Promise((r) => setTimeout(r, ms));

/**
 * @typedef {{ atMs: number, readings: number }} Mark  readings so far (answered, or delivered) at a time
 * @typedef {{ median: number, p99: number, max: number }} Waits  seconds
 * @typedef {{ intervalMs: number, compression: string, readings: number, sent: number, received: number,
 *   requests: number, localWaits: Waits, centreWaits: Waits, siteCpuPerMillion: number }} LiveResult
 */

/** Median, 99th percentile and longest of `waits`. @param {number[]} waits */
const spread = (waits) => ({
  median: /** @type {number} */ (percentile(waits, 50)),
  p99: /** @type {number} */ (percentile(waits, 99)),
  max: Math.max(...waits),
});

/**
 * One live site with its upstream sink at `intervalMs` and `compression`, for `ticks` rounds after a
 * first round that brings the link to its coding (a site's first request goes as plain JSON, until
 * the centre's answer offers the series form and the coding).
 * @param {{ bundle: string, apiKey: string, env: Record<string, string>, work: string, questdbUrl: string, n: number,
 *   ships: number, ticks: number, tickMs: number, intervalMs: number, compression: string }} options
 * @returns {Promise<LiveResult>}
 */
export async function liveLink({ bundle, apiKey, env, work, questdbUrl, n, ships, ticks, tickMs, intervalMs, compression }) {
  const stamp = `${n}_${Date.now()}`;
  const tables = { site: `bench_live_site_${stamp}`, central: `bench_live_central_${stamp}` };
  const central = await startBenchGateway({
    bundle,
    apiKey,
    env: {
      ...env,
      DATA_DIR: join(work, `live-central-${n}`),
      GATEWAY_NAME: 'bench-central',
      QUESTDB_URL: questdbUrl,
      QUESTDB_TABLE: tables.central,
      RETENTION_DAYS: '0',
    },
  });
  const proxy = await CountingProxy.start(Number(new URL(central.url).port));
  const site = await startBenchGateway({
    bundle,
    apiKey,
    env: {
      ...env,
      DATA_DIR: join(work, `live-site-${n}`),
      GATEWAY_NAME: `bench-site-${n}`,
      QUESTDB_URL: questdbUrl,
      QUESTDB_TABLE: tables.site,
      RETENTION_DAYS: '0',
      UPSTREAM_URL: `${proxy.url}/api/v2/ingest/batch`,
      UPSTREAM_API_KEY: apiKey,
      UPSTREAM_COMPRESSION: compression,
      UPSTREAM_FLUSH_INTERVAL_MS: String(intervalMs),
    },
  });
  const roundReadings = ships * READINGS_PER_SHIP_AND_TICK;
  try {
    const requests = siteRequests({ ships, ticks: ticks + 1, tickMs, startMs: Date.now() });
    /** @type {Mark[]} */
    const answered = [];
    let posted = 0;
    /** Posts the devices' requests of one round, each ship at its phase from `startMs`. */
    const round = async (/** @type {number} */ startMs) => {
      for (let s = 0; s < ships * 2; s++) {
        const next = requests.next();
        if (next.done) throw new Error('the site ran out of rounds');
        await pause(startMs + Math.floor(s / 2) * SHIP_PHASE_MS - Date.now());
        const response = await fetch(`${site.url}${next.value.path}`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', 'X-API-Key': apiKey },
          body: next.value.body,
        });
        await response.arrayBuffer();
        if (!response.ok) throw new Error(`live: POST ${next.value.path} answered ${response.status}`);
        posted += next.value.readings;
        answered.push({ atMs: Date.now(), readings: posted });
      }
    };

    /** The sink's deliveries that moved readings, as it logged them. */
    const deliveries = (/** @type {string} */ name) =>
      site.logs.filter((l) => l.event === 'delivered' && l.sink === name && Number(l.readings) > 0);
    const logged = (/** @type {string} */ name) => deliveries(name).reduce((sum, l) => sum + Number(l.readings), 0);

    await round(Date.now());
    const warmUpDeadline = Date.now() + intervalMs + 60_000;
    while (logged('upstream') < roundReadings) {
      if (Date.now() > warmUpDeadline) throw new Error(`live ${compression} ${intervalMs}: the first round never went upstream`);
      await pause(POLL_MS);
    }
    const before = { ...(proxy.counts().all ?? { sent: 0, received: 0 }), cpu: cpuSeconds(site.pid) ?? 0, answered: answered.length };
    const requestsBefore = deliveries('upstream').length;

    const liveStart = Date.now();
    for (let tick = 0; tick < ticks; tick++) await round(liveStart + tick * tickMs);
    const total = posted;
    const drainDeadline = Date.now() + intervalMs + 60_000;
    // By the log lines, which the marks below are made of.
    while (logged('questdb') < total || logged('upstream') < total) {
      if (Date.now() > drainDeadline) throw new Error(`live ${compression} ${intervalMs}: not delivered within the interval`);
      await pause(POLL_MS);
    }
    const cpu = (cpuSeconds(site.pid) ?? 0) - before.cpu;
    const after = proxy.counts().all ?? { sent: 0, received: 0 };
    if (!(await tableHolds(questdbUrl, tables.site, total))) throw new Error(`live: the site's table does not hold the ${total} readings`);
    if (!(await tableHolds(questdbUrl, tables.central, total))) throw new Error(`live: the centre does not hold the ${total} readings`);
    /** The sink's deliveries as readings so far. */
    const marks = (/** @type {string} */ name) => {
      /** @type {Mark[]} */
      const out = [];
      let readings = 0;
      for (const l of deliveries(name)) {
        readings += Number(l.readings);
        out.push({ atMs: Date.parse(String(l.time)), readings });
      }
      return out;
    };
    const measured = answered.slice(before.answered);
    const readings = total - roundReadings;
    return {
      intervalMs,
      compression,
      readings,
      sent: after.sent - before.sent,
      received: after.received - before.received,
      requests: deliveries('upstream').length - requestsBefore,
      localWaits: spread(waitsSeconds(measured, marks('questdb'))),
      centreWaits: spread(waitsSeconds(measured, marks('upstream'))),
      siteCpuPerMillion: (cpu / readings) * 1e6,
    };
  } finally {
    await site.stop('SIGTERM');
    await proxy.close();
    await central.stop('SIGTERM');
    await settleAndDrop(questdbUrl, tables.site);
    await settleAndDrop(questdbUrl, tables.central);
  }
}
