// The soak: the built gateway under steady load for a long run while QuestDB restarts every few
// minutes. Samples the gateway's memory, file descriptors, queue file size and latency, checks at
// the end that QuestDB holds every answered reading exactly once, and writes CSV, SVG charts and a
// verdict into docs/soak/<minutes>min/. See docs/soak.md.
//   npm run soak -- --minutes 60 [--rate 40] [--batch 10] [--restart-every 240] [--down 20] [--sample-every 10]
//                   [--env NAME=VALUE ...] [--out DIR]
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readlinkSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os, { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { sql, walApplied } from '../lib/questdb-sql.mjs';
import { startGatewayProcess } from '../lib/gateway-process.mjs';
import { QUESTDB_VERSION, startQuestDb } from '../lib/questdb.mjs';
import { freePorts } from '../lib/ports.mjs';
import { projectRoot } from '../lib/paths.mjs';
import { median } from '../lib/stats.mjs';
import { sampleProcess } from '../lib/proc.mjs';
import { startLoad } from './load.mjs';
import { CHARTS, FLAT_RULES, flatness, toCsv, toSvg } from './report.mjs';

const { values: args } = parseArgs({
  options: {
    minutes: { type: 'string', default: '60' },
    rate: { type: 'string', default: '40' },
    batch: { type: 'string', default: '10' },
    'restart-every': { type: 'string', default: '240' },
    down: { type: 'string', default: '20' },
    'sample-every': { type: 'string', default: '10' },
    env: { type: 'string', multiple: true, default: [] },
    out: { type: 'string' },
  },
});
const minutes = Number(args.minutes);
const rate = Number(args.rate);
const batch = Number(args.batch);
const restartEverySeconds = Number(args['restart-every']);
const downSeconds = Number(args.down);
const sampleEverySeconds = Number(args['sample-every']);
for (const [name, value] of Object.entries({ minutes, rate, batch, restartEverySeconds, downSeconds, sampleEverySeconds })) {
  if (!(value > 0)) throw new Error(`--${name} must be a positive number`);
}
// Extra settings for the gateway's environment, to compare one run against another.
const extraEnv = Object.fromEntries(
  args.env.map((pair) => {
    const at = pair.indexOf('=');
    if (at < 1) throw new Error(`--env ${pair}: expected NAME=VALUE`);
    return [pair.slice(0, at), pair.slice(at + 1)];
  }),
);
const command = `npm run soak -- --minutes ${args.minutes} --rate ${args.rate} --batch ${args.batch} --restart-every ${args['restart-every']} --down ${args.down} --sample-every ${args['sample-every']}${args.env.map((e) => ` --env ${e}`).join('')}`;
const outDir = args.out ?? join(projectRoot, 'docs', 'soak', `${args.minutes}min`);
const API_KEY = 'soak-key-0123456789abcdef';
const sleep = (/** @type {number} */ ms) => new Promise((r) => setTimeout(r, ms));
const log = (/** @type {string} */ line) => process.stdout.write(`[soak ${new Date().toISOString().slice(11, 19)}] ${line}\n`);

const work = mkdtempSync(join(tmpdir(), 'harbor-soak-'));
const questdbDir = join(work, 'questdb');
const dataDir = join(work, 'gateway');
const [httpPort, pgPort] = /** @type {number[]} */ (await freePorts(2));
const questdbPorts = { httpPort, pgPort };
let questdb = await startQuestDb({ dataDir: questdbDir, ...questdbPorts });
const questdbUrl = questdb.httpUrl;
const table = `soak_${Date.now()}`;
const gateway = await startGatewayProcess({
  bundle: join(projectRoot, 'dist', 'gateway.mjs'),
  env: { API_KEY, DATA_DIR: dataDir, QUESTDB_URL: questdbUrl, QUESTDB_TABLE: table, RETENTION_DAYS: '0', ...extraEnv },
});
// Whatever ends this process, the work directory goes; the gateway and QuestDB are killed by
// their own exit handlers, registered before this one.
process.once('exit', () => {
  try {
    rmSync(work, { recursive: true, force: true });
  } catch {
    // QuestDB may still be writing as it dies; the directory is then left in the temporary directory.
  }
});
log(`gateway pid ${gateway.pid} at ${gateway.url}, QuestDB ${questdbUrl}, table ${table}; ${command}`);

const load = startLoad({ url: gateway.url, apiKey: API_KEY, requestsPerSecond: rate, batch });
const startedMs = Date.now();
const endMs = startedMs + minutes * 60_000;
const elapsed = () => (Date.now() - startedMs) / 1000;
/** @type {{ from: number, to: number }[]} */
const outages = [];
let questdbUp = true;
let gatewayErrors = 0;

/** QuestDB stops every restartEverySeconds and comes back downSeconds later, until the end. */
const restarts = (async () => {
  for (let n = 1; startedMs + n * restartEverySeconds * 1000 + downSeconds * 1000 < endMs; n++) {
    await sleep(startedMs + n * restartEverySeconds * 1000 - Date.now());
    const outage = { from: elapsed(), to: Number.NaN };
    questdbUp = false;
    await questdb.stop();
    log(`QuestDB stopped (restart ${n})`);
    await sleep(downSeconds * 1000);
    questdb = await startQuestDb({ dataDir: questdbDir, ...questdbPorts });
    questdbUp = true;
    outage.to = elapsed();
    outages.push(outage);
    log(`QuestDB back after ${(outage.to - outage.from).toFixed(1)} s`);
  }
})();

const status = async () => {
  const response = await fetch(`${gateway.url}/status`, { headers: { 'x-api-key': API_KEY }, signal: AbortSignal.timeout(5000) });
  return /** @type {{ queue: { readings: number }, memory: { heapUsedBytes: number, heapTotalBytes: number, deliveryHeapUsedBytes: number | null, deliveryHeapTotalBytes: number | null } }} */ (
    await response.json()
  );
};
const queueFileBytes = () =>
  ['queue.db', 'queue.db-wal']
    .map((name) => join(dataDir, name))
    .reduce((sum, path) => sum + (existsSync(path) ? statSync(path).size : 0), 0);
/** The gateway's open file descriptors, sockets apart; one may close between the listing and its link. */
const descriptors = () => {
  let fds = 0;
  let sockets = 0;
  for (const fd of readdirSync(`/proc/${gateway.pid}/fd`)) {
    try {
      if (readlinkSync(`/proc/${gateway.pid}/fd/${fd}`).startsWith('socket:')) sockets += 1;
      else fds += 1;
    } catch {
      // closed meanwhile
    }
  }
  return { fds, sockets };
};
/** Resident memory, and of it what is the process's own (heaps, stacks) and what maps files (code). */
const memory = () => {
  const { rssKb, anonKb, fileKb } = sampleProcess(gateway.pid);
  return { rssMb: rssKb / 1024, anonMb: anonKb / 1024, fileMb: fileKb / 1024 };
};
const percentileOf = (/** @type {number[]} */ sorted, /** @type {number} */ p) =>
  sorted.length === 0 ? null : /** @type {number} */ (sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]);

/** @type {import('./report.mjs').Sample[]} */
const samples = [];
while (Date.now() < endMs) {
  await sleep(Math.min(sampleEverySeconds * 1000, endMs - Date.now()));
  if (gateway.child.exitCode !== null || gateway.child.signalCode !== null) throw new Error(`the gateway exited: ${gateway.stderr()}`);
  const latencies = load.takeLatencies().sort((a, b) => a - b);
  const current = await status();
  // The log lines are counted, not kept: an hour of flush lines would grow this process instead.
  gatewayErrors += gateway.logs.splice(0).filter((line) => Number(line.level) >= 50).length;
  samples.push({
    seconds: elapsed(),
    ...memory(),
    heapMb: current.memory.heapUsedBytes / 2 ** 20,
    deliveryHeapMb: (current.memory.deliveryHeapUsedBytes ?? 0) / 2 ** 20,
    heapsCommittedMb: (current.memory.heapTotalBytes + (current.memory.deliveryHeapTotalBytes ?? 0)) / 2 ** 20,
    ...descriptors(),
    queueFileMb: queueFileBytes() / 2 ** 20,
    queuedReadings: current.queue.readings,
    p50Ms: percentileOf(latencies, 50),
    p99Ms: percentileOf(latencies, 99),
    requests: latencies.length,
    questdbUp,
    load1: os.loadavg()[0] ?? 0,
  });
  const s = /** @type {import('./report.mjs').Sample} */ (samples.at(-1));
  log(
    `${(s.seconds / 60).toFixed(1)} min: rss ${s.rssMb.toFixed(1)} MB (anon ${s.anonMb.toFixed(1)}, file ${s.fileMb.toFixed(1)}), heap ${s.heapMb.toFixed(1)} MB + ${s.deliveryHeapMb.toFixed(1)} MB (committed ${s.heapsCommittedMb.toFixed(1)}), fds ${s.fds}, sockets ${s.sockets}, queue file ${s.queueFileMb.toFixed(2)} MB, queued ${s.queuedReadings}, p50 ${s.p50Ms?.toFixed(1)} ms, p99 ${s.p99Ms?.toFixed(1)} ms`,
  );
}

await load.stop();
await restarts;
log('load stopped; waiting for the queue to drain');
const drainDeadline = Date.now() + 300_000;
while ((await status()).queue.readings > 0) {
  if (Date.now() > drainDeadline) throw new Error('the queue did not drain within 5 minutes of the end');
  await sleep(200);
}
await walApplied(questdbUrl, table, 120_000);
const one = async (/** @type {string} */ query) => Number((await sql(questdbUrl, query)).dataset[0]?.[0] ?? 0);
const stored = await one(`SELECT count() FROM "${table}"`);
const distinct = await one(`SELECT count() FROM (SELECT DISTINCT value FROM "${table}")`);
const storedSum = await one(`SELECT sum(value) FROM "${table}"`);
const inBatch = (/** @type {number} */ first) => one(`SELECT count() FROM "${table}" WHERE value >= ${first} AND value < ${first + batch}`);
// Requests without an answer may have been queued (all their readings) or not (none).
let unansweredStored = 0;
let unansweredSum = 0;
let torn = 0;
for (const first of load.totals.unanswered) {
  const count = await inBatch(first);
  if (count === batch) {
    unansweredStored += batch;
    unansweredSum += batch * first + (batch * (batch - 1)) / 2;
  } else if (count !== 0) torn += 1;
}
let refusedStored = 0;
for (const first of load.totals.refused) refusedStored += await inBatch(first);
const expected = load.totals.answeredReadings + unansweredStored;
const delivery = {
  answered: load.totals.answeredReadings,
  stored,
  duplicates: stored - distinct,
  lost: Math.max(0, expected - stored),
  sumMatches: storedSum === load.totals.valueSum + unansweredSum,
  refusedRequests: load.totals.refused.length,
  refusedStored,
  unansweredRequests: load.totals.unanswered.length,
  torn,
};
const deliveryOk = delivery.stored === expected && delivery.duplicates === 0 && delivery.sumMatches && refusedStored === 0 && torn === 0;

gateway.child.kill('SIGTERM');
await gateway.exited;
await questdb.stop();

const flat = flatness(samples);
const allFlat = flat.every((f) => f.flat);
mkdirSync(outDir, { recursive: true });
writeFileSync(join(outDir, 'samples.csv'), toCsv(samples));
for (const chart of CHARTS) writeFileSync(join(outDir, chart.file), toSvg(samples, outages, chart));
const fmt = (/** @type {number | null} */ v) => (v === null ? '–' : Number(v.toFixed(2)).toString());
const summary = `# Soak: ${minutes} minutes

\`${command}\`, run ${new Date(startedMs).toISOString().slice(0, 16)}Z on ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? 'unknown'}),
Node ${process.versions.node}, QuestDB ${QUESTDB_VERSION}; the machine's 1-minute load average over the run: median ${fmt(median(samples.map((s) => s.load1)) ?? null)}, highest ${fmt(Math.max(...samples.map((s) => s.load1)))}
(this run's gateway, load and QuestDB included). ${rate} requests/s of ${batch} readings
(${rate * batch} readings/s) to \`/api/v2/ingest/batch\`, \`DURABILITY=power-loss\`; QuestDB stopped ${outages.length} times
for ${downSeconds} s; a sample every ${sampleEverySeconds} s (${samples.length} samples).

**Verdict: ${allFlat && deliveryOk ? 'flat, nothing lost' : `${allFlat ? 'flat' : 'NOT flat'}, ${deliveryOk ? 'nothing lost' : 'DELIVERY FAILED'}`}.**

## Delivery

| answered 200 | stored in QuestDB | lost | duplicated | value sum matches | refused (503) | without answer | gateway error lines |
|---|---|---|---|---|---|---|---|
| ${delivery.answered} | ${delivery.stored} | ${delivery.lost} | ${delivery.duplicates} | ${delivery.sumMatches ? 'yes' : 'NO'} | ${delivery.refusedRequests} | ${delivery.unansweredRequests} | ${gatewayErrors} |

## Flat

The rule ([docs/soak.md](../../soak.md)): after the first third of the samples (warm-up), a figure
is flat when the median of the last third exceeds the median of the middle third by at most the
allowance (the larger of (ratio - 1) × that median and the slack), and its least-squares trend over
the last two thirds, continued for an hour, adds at most the allowance too.

| figure (ratio, slack) | median, middle third | median, last third | allowance | trend per hour | flat |
|---|---|---|---|---|---|
${flat
  .map((f) => {
    const rule = FLAT_RULES.find((r) => r.key === f.key);
    return `| ${f.label}${f.unit ? ` (${f.unit})` : ''} (×${rule?.ratio}, +${rule?.slack}) | ${fmt(f.middle)} | ${fmt(f.last)} | ${fmt(f.allowance)} | ${fmt(f.trendPerHour)} | ${f.flat ? 'yes' : 'NO'} |`;
  })
  .join('\n')}

## Charts

Shaded: QuestDB down. The samples are in [samples.csv](samples.csv).

${CHARTS.map((c) => `![${c.title}](${c.file})`).join('\n')}
`;
writeFileSync(join(outDir, 'summary.md'), summary);
log(
  `verdict: ${allFlat ? 'flat' : 'NOT flat'}, ${deliveryOk ? 'nothing lost or duplicated' : 'delivery FAILED'} (${JSON.stringify(delivery)}); wrote ${outDir}`,
);
process.exit(allFlat && deliveryOk ? 0 : 1);
