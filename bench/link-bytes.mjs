// Bytes on the wire per reading on each forwarding link, compressed and not: `npm run bench:link-bytes`
// (builds the bundle first; `-- --help`). A site's readings (bench/lib/site-mix.mjs: ships with
// their reefers, engines and GPS, a round every few seconds) are queued once while no destination
// is reachable; then, for each sink and compression, a site gateway forwards a copy of that queue
// through a counting proxy in front of the destination (scripts/lib/counting-proxy.mjs). Reported:
// the link's TCP payload both ways per reading (requests, bodies, answers, and whatever else the
// sink says on it: table checks, site claims, Kafka metadata), and the site gateway's CPU per
// reading. With `--live-intervals`, live sites besides (bench/lib/live-link.mjs): their devices post
// each round as it happens, the local QuestDB sink delivers every second and the upstream sink every
// UPSTREAM_FLUSH_INTERVAL_MS given, side by side. Bytes do not depend on the machine's load; CPU does.
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { CountingProxy } from '../scripts/lib/counting-proxy.mjs';
import { KAFKA_VERSION, createKafkaTopic, startKafka } from '../scripts/lib/kafka.mjs';
import { projectRoot } from '../scripts/lib/paths.mjs';
import { freePort } from '../scripts/lib/ports.mjs';
import { QUESTDB_VERSION, startQuestDb } from '../scripts/lib/questdb.mjs';
import { settleAndDrop } from '../scripts/lib/questdb-sql.mjs';
import { forward, tableHolds, topicMessages } from './lib/forward.mjs';
import { startBenchGateway } from './lib/gateway.mjs';
import { liveLink } from './lib/live-link.mjs';
import { MAX_SHIPS, READINGS_PER_SHIP_AND_TICK, siteRequests } from './lib/site-mix.mjs';

const CODECS = /** @type {Record<string, string[]>} */ ({
  upstream: ['off', 'gzip', 'deflate', 'br'],
  kafka: ['off', 'gzip', 'snappy', 'lz4'],
  'remote-questdb': ['off', 'gzip'],
});
const BATCH_SETTING = /** @type {Record<string, string>} */ ({
  upstream: 'UPSTREAM_BATCH_READINGS',
  kafka: 'KAFKA_BATCH_READINGS',
  'remote-questdb': 'REMOTE_QUESTDB_BATCH_READINGS',
});

const HELP = `Usage: npm run bench:link-bytes [-- options]

  --minutes N        the site's time queued, in minutes (default 60)
  --ships N          ships, at most ${MAX_SHIPS} (default 6); ${READINGS_PER_SHIP_AND_TICK} readings a ship a round
  --tick-ms N        between a ship's rounds (default 5000)
  --sinks LIST       of ${Object.keys(CODECS).join(',')} (default all)
  --batch-readings LIST
                     most readings a delivery takes: "default" (each sink's own) or numbers (default
                     "default,84": a backlog after an outage, and one round of 6 ships as a live site
                     forwarding every 5 s sends it); "none": no backlog rows
  --live-intervals LIST
                     live sites forwarding upstream with these UPSTREAM_FLUSH_INTERVAL_MS, each with its
                     local QuestDB at FLUSH_INTERVAL_MS 1000 (default none), e.g. "1000,10000,20000"
  --live-codings LIST
                     UPSTREAM_COMPRESSION of the live sites, each interval with each (default "off,gzip")
  --live-minutes N   of rounds each live site's devices post, measured (default 5)
  --bundle PATH      the gateway build to run (default dist/gateway.mjs)
`;

const { values: args } = parseArgs({
  options: {
    minutes: { type: 'string', default: '60' },
    ships: { type: 'string', default: '6' },
    'tick-ms': { type: 'string', default: '5000' },
    sinks: { type: 'string', default: Object.keys(CODECS).join(',') },
    'batch-readings': { type: 'string', default: 'default,84' },
    'live-intervals': { type: 'string', default: '' },
    'live-codings': { type: 'string', default: 'off,gzip' },
    'live-minutes': { type: 'string', default: '5' },
    bundle: { type: 'string', default: join(projectRoot, 'dist', 'gateway.mjs') },
    help: { type: 'boolean' },
  },
});
if (args.help) {
  process.stdout.write(HELP);
  process.exit(0);
}
const ships = Number(args.ships);
const tickMs = Number(args['tick-ms']);
const ticks = Math.round((Number(args.minutes) * 60_000) / tickMs);
const sinks = args.sinks.split(',').map((s) => s.trim());
const batchSizes =
  args['batch-readings'] === 'none' ? [] : args['batch-readings'].split(',').map((b) => (b.trim() === 'default' ? undefined : Number(b)));
const liveIntervals = args['live-intervals'] === '' ? [] : args['live-intervals'].split(',').map(Number);
const liveCodings = args['live-codings'].split(',').map((c) => c.trim());
const liveTicks = Math.round((Number(args['live-minutes']) * 60_000) / tickMs);
if (!(ships >= 1 && ships <= MAX_SHIPS) || !(tickMs >= 100) || !(ticks >= 1)) throw new Error('bad --ships, --tick-ms or --minutes');
if (sinks.some((s) => !(s in CODECS))) throw new Error(`bad --sinks ${args.sinks} (known: ${Object.keys(CODECS).join(',')})`);
if (batchSizes.some((b) => b !== undefined && !(b >= 1))) throw new Error(`bad --batch-readings ${args['batch-readings']}`);
if (liveIntervals.some((i) => !(i >= 10)) || !(liveTicks >= 1)) throw new Error('bad --live-intervals or --live-minutes');
if (liveCodings.some((c) => !CODECS.upstream?.includes(c))) throw new Error(`bad --live-codings ${args['live-codings']}`);

const bundle = args.bundle;
const apiKey = 'bench-key-0123456789';
const gatewayEnv = { DURABILITY: 'process-crash', HEALTH_REPORT: 'false' };
const loadAtStart = os.loadavg();
const work = mkdtempSync(join(os.tmpdir(), 'harbor-bench-link-'));

/** Queues the site's readings in `dataDir` with no destination reachable; returns how many. */
async function fillQueue(/** @type {string} */ dataDir) {
  const unreachable = `http://127.0.0.1:${await freePort()}`;
  const gw = await startBenchGateway({ bundle, apiKey, env: { DATA_DIR: dataDir, ...gatewayEnv, QUESTDB_URL: unreachable } });
  let readings = 0;
  try {
    const requests = siteRequests({ ships, ticks, tickMs, startMs: Date.now() - ticks * tickMs });
    const worker = async () => {
      for (let next = requests.next(); !next.done; next = requests.next()) {
        const response = await fetch(`${gw.url}${next.value.path}`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', 'X-API-Key': apiKey },
          body: next.value.body,
        });
        await response.arrayBuffer();
        if (!response.ok) throw new Error(`fill: POST ${next.value.path} answered ${response.status}`);
        readings += next.value.readings;
      }
    };
    await Promise.all([worker(), worker(), worker(), worker()]);
  } finally {
    await gw.stop('SIGTERM');
  }
  return readings;
}

/** Kafka's requests from the site gateway (its client id), apart from the bench's own. */
const kafkaClassify = (/** @type {string} */ first) => (first.includes('harbor-gateway-') ? 'site' : 'bench');

const queued = join(work, 'queued');
const total = batchSizes.length === 0 ? 0 : await fillQueue(queued);
if (total > 0) process.stderr.write(`queued ${total} readings (${ships} ships, ${ticks} rounds ${tickMs} ms apart)\n`);

const questdb = await startQuestDb({ dataDir: join(work, 'questdb'), heap: '512m' });
const kafkaProxy = sinks.includes('kafka') && total > 0 ? await CountingProxy.start(1, { classify: kafkaClassify }) : undefined;
const broker = kafkaProxy === undefined ? undefined : await startKafka({ advertisedPort: kafkaProxy.port });
if (broker !== undefined) kafkaProxy?.retarget(Number(broker.bootstrap.split(':').at(-1)));

/**
 * @typedef {{ sink: string, compression: string, batch: number | undefined, sent: number, received: number,
 *   siteCpuPerMillion: number, centralCpuPerMillion: number | undefined, requests: number }} Result
 */
/** @type {Result[]} */
const results = [];
/** @type {import('./lib/live-link.mjs').LiveResult[]} */
const liveResults = [];

/**
 * One sink with one compression on a copy of the queue.
 * @param {string} sink
 * @param {string} compression
 * @param {number | undefined} batch
 * @param {number} n
 */
async function measure(sink, compression, batch, n) {
  const dataDir = join(work, `site-${n}`);
  cpSync(queued, dataDir, { recursive: true });
  const table = `bench_link_${sink.replace('-', '_')}_${n}_${Date.now()}`;
  const batchEnv = batch === undefined ? {} : { [/** @type {string} */ (BATCH_SETTING[sink])]: String(batch) };
  const env = { DATA_DIR: dataDir, ...gatewayEnv, LOCAL_QUESTDB: 'off', ...batchEnv };
  /**
   * A sink's result: the proxy's bytes both ways and the forwarding run's CPU and requests.
   * @param {{ sent: number, received: number } | undefined} counts @param {Awaited<ReturnType<typeof forward>>} r
   */
  const result = (counts, r, central = false) => ({
    sent: counts?.sent ?? 0,
    received: counts?.received ?? 0,
    siteCpuPerMillion: r.siteCpuPerMillion,
    centralCpuPerMillion: central ? r.centralCpuPerMillion : undefined,
    requests: r.deliveries,
  });
  try {
    if (sink === 'upstream') {
      const central = await startBenchGateway({
        bundle,
        apiKey,
        env: {
          DATA_DIR: join(work, `central-${n}`),
          ...gatewayEnv,
          GATEWAY_NAME: 'bench-central',
          QUESTDB_URL: questdb.httpUrl,
          QUESTDB_TABLE: table,
          RETENTION_DAYS: '0',
        },
      });
      const proxy = await CountingProxy.start(Number(new URL(central.url).port));
      try {
        const r = await forward({
          bundle,
          apiKey,
          total,
          sink,
          central,
          done: () => tableHolds(questdb.httpUrl, table, total),
          env: {
            ...env,
            UPSTREAM_URL: `${proxy.url}/api/v2/ingest/batch`,
            UPSTREAM_API_KEY: apiKey,
            UPSTREAM_BACKFILL: 'on',
            UPSTREAM_COMPRESSION: compression,
          },
        });
        return result(proxy.counts().all, r, true);
      } finally {
        await proxy.close();
        await central.stop('SIGTERM');
      }
    }
    if (sink === 'remote-questdb') {
      const proxy = await CountingProxy.start(Number(new URL(questdb.httpUrl).port));
      try {
        const r = await forward({
          bundle,
          apiKey,
          total,
          sink,
          destinationPid: questdb.pid,
          done: () => tableHolds(questdb.httpUrl, table, total),
          env: {
            ...env,
            REMOTE_QUESTDB_URL: proxy.url,
            REMOTE_QUESTDB_TABLE: table,
            REMOTE_QUESTDB_BACKFILL: 'on',
            REMOTE_QUESTDB_COMPRESSION: compression,
          },
        });
        return result(proxy.counts().all, r);
      } finally {
        await proxy.close();
      }
    }
    const kafka = /** @type {NonNullable<typeof broker>} */ (broker);
    const proxy = /** @type {CountingProxy} */ (kafkaProxy);
    const topic = table.replaceAll('_', '-');
    await createKafkaTopic(kafka.bootstrap, topic, 3);
    // The topic's readiness marker is a message too.
    const before = await topicMessages(kafka.bootstrap, topic);
    proxy.reset();
    const r = await forward({
      bundle,
      apiKey,
      total,
      sink,
      destinationPid: kafka.pid(),
      done: async () => (await topicMessages(kafka.bootstrap, topic)) - before === total,
      env: {
        ...env,
        KAFKA_BROKERS: proxy.url.replace('http://', ''),
        KAFKA_TOPIC: topic,
        KAFKA_BACKFILL: 'on',
        KAFKA_COMPRESSION: compression,
      },
    });
    return result(proxy.counts().site, r);
  } finally {
    if (sink !== 'kafka') await settleAndDrop(questdb.httpUrl, table);
    rmSync(dataDir, { recursive: true, force: true });
    rmSync(join(work, `central-${n}`), { recursive: true, force: true });
  }
}

try {
  let n = 0;
  for (const batch of batchSizes) {
    for (const sink of sinks) {
      for (const compression of CODECS[sink] ?? []) {
        const r = await measure(sink, compression, batch, ++n);
        results.push({ sink, compression, batch, ...r });
        process.stderr.write(
          `${sink} ${compression} ${batch ?? 'default'}: ${((r.sent + r.received) / total).toFixed(2)} bytes a reading\n`,
        );
      }
    }
  }
  // Side by side: each live site posts in real time, and needs the machine for little else. Each
  // of their gateways listens for this process's exit, to end with it.
  process.setMaxListeners(10 + 2 * liveIntervals.length * liveCodings.length);
  const cases = liveIntervals.flatMap((intervalMs) => liveCodings.map((compression) => ({ intervalMs, compression })));
  const live = await Promise.all(
    cases.map(({ intervalMs, compression }, i) =>
      liveLink({
        bundle,
        apiKey,
        env: gatewayEnv,
        work,
        questdbUrl: questdb.httpUrl,
        n: i + 1,
        ships,
        ticks: liveTicks,
        tickMs,
        intervalMs,
        compression,
      }),
    ),
  );
  for (const r of live) {
    liveResults.push(r);
    process.stderr.write(
      `live upstream ${r.compression} ${r.intervalMs} ms: ${((r.sent + r.received) / r.readings).toFixed(2)} bytes a reading\n`,
    );
  }
} finally {
  await broker?.close();
  await kafkaProxy?.close();
  await questdb.stop();
  rmSync(work, { recursive: true, force: true });
}

const fmt = (/** @type {number | undefined} */ v, digits = 1) =>
  v === undefined ? '–' : v.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
const plainJson = (/** @type {number | undefined} */ batch) => {
  const r = results.find((x) => x.sink === 'upstream' && x.compression === 'off' && x.batch === batch);
  return r === undefined ? undefined : (r.sent + r.received) / total;
};
const load = (/** @type {number[]} */ l) => l.map((v) => v.toFixed(1)).join(' ');
const perReading = (/** @type {{ sent: number, received: number, readings: number }} */ r) => (r.sent + r.received) / r.readings;
const waits = (/** @type {import('./lib/live-link.mjs').Waits} */ w) => `${fmt(w.median, 2)} / ${fmt(w.p99, 2)} / ${fmt(w.max, 2)}`;
const livePlain = (/** @type {number} */ intervalMs) => {
  const r = liveResults.find((x) => x.compression === 'off' && x.intervalMs === intervalMs);
  return r === undefined ? undefined : perReading(r);
};
const backlogLines = [
  `${total.toLocaleString('en-US')} readings: ${ships} ships, ${READINGS_PER_SHIP_AND_TICK} readings a ship every ${tickMs / 1000} s (${ticks} rounds); QuestDB ${QUESTDB_VERSION}${broker ? `, Kafka ${KAFKA_VERSION} (single node, 3 partitions)` : ''}.`,
  'Bytes: TCP payload on the link, both ways, per reading. CPU: the site gateway, whole process, per reading (and the central gateway for the upstream).',
  '',
  '| Sink | Compression | Readings a delivery | Bytes a reading | Sent | Received | Plain JSON upstream ÷ this | Site CPU µs a reading | Central CPU µs a reading | Deliveries |',
  '|---|---|---|---|---|---|---|---|---|---|',
  ...results.map((r) => {
    const bytes = (r.sent + r.received) / total;
    const json = plainJson(r.batch);
    return `| ${r.sink} | ${r.compression} | ${r.batch ?? 'default'} | ${fmt(bytes)} | ${fmt(r.sent / total)} | ${fmt(r.received / total)} | ${json === undefined ? '–' : `${fmt(json / bytes)}×`} | ${fmt(r.siteCpuPerMillion)} | ${fmt(r.centralCpuPerMillion)} | ${r.requests} |`;
  }),
  '',
];
const liveLines = [
  `Live sites, side by side: ${ships} ships, ${READINGS_PER_SHIP_AND_TICK} readings a ship every ${tickMs / 1000} s, ${liveTicks} rounds each (${(liveTicks * ships * READINGS_PER_SHIP_AND_TICK).toLocaleString('en-US')} readings) after a first round that brings the link to its coding; the local QuestDB at FLUSH_INTERVAL_MS 1000.`,
  "Bytes: TCP payload on the upstream link, both ways, per reading. Wait: from a request's answer until its readings were delivered (the sink's log), median / 99th percentile / longest. CPU: the site gateway, whole process (ingest, local QuestDB and upstream sinks), per reading.",
  '',
  '| Sink | Compression | UPSTREAM_FLUSH_INTERVAL_MS | Readings a request | Bytes a reading | Sent | Received | Plain JSON upstream ÷ this | Local QuestDB wait, s | Centre wait, s | Site CPU µs a reading | Requests |',
  '|---|---|---|---|---|---|---|---|---|---|---|---|',
  ...liveResults.map((r) => {
    const bytes = perReading(r);
    const json = livePlain(r.intervalMs);
    return `| upstream | ${r.compression} | ${r.intervalMs} | ${fmt(r.readings / r.requests)} | ${fmt(bytes)} | ${fmt(r.sent / r.readings)} | ${fmt(r.received / r.readings)} | ${json === undefined ? '–' : `${fmt(json / bytes)}×`} | ${waits(r.localWaits)} | ${waits(r.centreWaits)} | ${fmt(r.siteCpuPerMillion)} | ${r.requests} |`;
  }),
  '',
];
process.stdout.write(
  [
    `Machine: ${os.cpus()[0]?.model.trim()}, ${os.cpus().length} cores, Node ${process.version}; load average (1, 5, 15 min) ${load(loadAtStart)} at the start, ${load(os.loadavg())} at the end.`,
    '',
    ...(results.length > 0 ? backlogLines : []),
    ...(liveResults.length > 0 ? liveLines : []),
  ].join('\n'),
);
