// Forward throughput of each sink beside local delivery: `npm run bench:forward` (builds the bundle
// first; `-- --help`). Each run, for each sink, queues the same backlog while no destination is
// reachable, then starts the gateway with that sink alone able to deliver, and measures readings/s
// and the gateway's CPU seconds per million readings: with what a sink pays once a process included
// (loading its client, compiling its code), and in the steady state, after the first
// `--warm-up-readings` were delivered. Prints the runs and their medians as Markdown.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { KAFKA_VERSION, createKafkaTopic, startKafka } from '../scripts/lib/kafka.mjs';
import { projectRoot } from '../scripts/lib/paths.mjs';
import { freePort } from '../scripts/lib/ports.mjs';
import { QUESTDB_VERSION, startQuestDb } from '../scripts/lib/questdb.mjs';
import { settleAndDrop } from '../scripts/lib/questdb-sql.mjs';
import { median } from '../scripts/lib/stats.mjs';
import { summarizeProfile } from './lib/cpu-profile.mjs';
import { startBenchGateway } from './lib/gateway.mjs';
import { fillQueue, forward, tableHolds, topicMessages } from './lib/forward.mjs';

const SINKS = ['questdb', 'upstream', 'remote-questdb', 'kafka'];

const HELP = `Usage: npm run bench:forward [-- options]

  --runs N       runs (default 3)
  --readings N   backlog of each run, a multiple of 1000 (default 500000)
  --sinks LIST   comma-separated, of ${SINKS.join(',')} (default all)
  --bundle PATH  the gateway build to run (default dist/gateway.mjs)
  --cpu-prof DIR run the site gateway under node --cpu-prof, a directory per run and sink under DIR,
                 and print each thread's self time by area and function over the delivery
  --warm-up-readings N
                 the steady state starts once N readings were delivered (default 100000; 0: not
                 measured): its CPU per million, and the one-off CPU beyond that rate, are
                 reported beside the figure with the one-off included
`;

const { values: args } = parseArgs({
  options: {
    runs: { type: 'string', default: '3' },
    readings: { type: 'string', default: '500000' },
    sinks: { type: 'string', default: SINKS.join(',') },
    bundle: { type: 'string', default: join(projectRoot, 'dist', 'gateway.mjs') },
    'cpu-prof': { type: 'string' },
    'warm-up-readings': { type: 'string', default: '100000' },
    help: { type: 'boolean' },
  },
});
if (args.help) {
  process.stdout.write(HELP);
  process.exit(0);
}
const runs = Number(args.runs);
const total = Number(args.readings);
const sinks = args.sinks.split(',').map((s) => s.trim());
const warmUp = Number(args['warm-up-readings']);
if (!(runs >= 1) || !(total >= 1000) || total % 1000 !== 0) throw new Error(`bad options: --runs ${args.runs} --readings ${args.readings}`);
if (!(warmUp >= 0 && warmUp < total)) throw new Error(`bad option --warm-up-readings ${args['warm-up-readings']}: 0 up to the backlog`);
const unknown = sinks.filter((s) => !SINKS.includes(s));
if (sinks.length === 0 || unknown.length > 0)
  throw new Error(`bad option --sinks: ${unknown.join(',') || 'empty'} (known: ${SINKS.join(',')})`);

const bundle = args.bundle;
const apiKey = 'bench-key-0123456789';
const topic = 'bench-readings';
const gatewayEnv = { DURABILITY: 'process-crash', HEALTH_REPORT: 'false' };
const loadAtStart = os.loadavg();

const work = mkdtempSync(join(os.tmpdir(), 'harbor-bench-forward-'));
const broker = sinks.includes('kafka') ? await startKafka() : undefined;
const questdb = await startQuestDb({ dataDir: join(work, 'questdb'), heap: '512m' });

/**
 * One sink's measurement on a freshly filled queue: the site gateway's environment, the
 * destination's process and, for the upstream sink, the central gateway in front of QuestDB.
 * @param {string} sink
 * @param {string} dataDir
 * @param {string} unreachable
 * @param {string} table
 * @param {string[] | undefined} nodeArgs the site gateway's
 */
async function measure(sink, dataDir, unreachable, table, nodeArgs) {
  /**
   * The site gateway with `env` beside its own, by default delivering into QuestDB's `table`.
   * @param {Record<string, string>} env
   * @param {Partial<Parameters<typeof forward>[0]>} [options]
   */
  const site = (env, options) =>
    forward({
      bundle,
      apiKey,
      sink,
      total,
      nodeArgs,
      warmUp,
      destinationPid: questdb.pid,
      done: () => tableHolds(questdb.httpUrl, table, total),
      ...options,
      env: { DATA_DIR: dataDir, ...gatewayEnv, ...env },
    });
  if (sink === 'questdb') return site({ QUESTDB_URL: questdb.httpUrl, QUESTDB_TABLE: table, RETENTION_DAYS: '0' });
  if (sink === 'remote-questdb')
    // A site of its own per run: the remote QuestDB's site claims give a site id to the first gateway instance only.
    return site({
      LOCAL_QUESTDB: 'off',
      REMOTE_QUESTDB_URL: questdb.httpUrl,
      REMOTE_QUESTDB_TABLE: table,
      REMOTE_QUESTDB_BACKFILL: 'on',
      SITE_ID: table,
    });
  if (sink === 'upstream') {
    const central = await startBenchGateway({
      bundle,
      apiKey,
      env: {
        DATA_DIR: join(work, 'central'),
        ...gatewayEnv,
        GATEWAY_NAME: 'bench-central',
        QUESTDB_URL: questdb.httpUrl,
        QUESTDB_TABLE: table,
        RETENTION_DAYS: '0',
      },
    });
    try {
      const url = `${central.url}/api/v2/ingest/batch`;
      return await site({ LOCAL_QUESTDB: 'off', UPSTREAM_URL: url, UPSTREAM_API_KEY: apiKey, UPSTREAM_BACKFILL: 'on' }, { central });
    } finally {
      await central.stop('SIGTERM');
      rmSync(join(work, 'central'), { recursive: true, force: true });
    }
  }
  const kafka = /** @type {NonNullable<typeof broker>} */ (broker);
  const before = await topicMessages(kafka.bootstrap, topic);
  // The Kafka sink joins with backfill, so it starts at the oldest queued reading; QuestDB stays unreachable.
  return site(
    { QUESTDB_URL: unreachable, KAFKA_BROKERS: kafka.bootstrap, KAFKA_TOPIC: topic, KAFKA_BACKFILL: 'on' },
    { destinationPid: kafka.pid(), done: async () => (await topicMessages(kafka.bootstrap, topic)) - before === total },
  );
}

/**
 * The local ends of this machine's TCP connections to `port` that are in TIME_WAIT: a connection
 * closed within the last minute. Those a run adds are the connections it opened and closed.
 * @param {number} port
 */
function timeWaitTo(port) {
  const remote = `:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  const ends = new Set();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(table, 'utf8').split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (fields.length > 3 && fields[2]?.endsWith(remote) && fields[3] === '06') ends.add(fields[1]);
    }
  }
  return ends;
}

/**
 * Each thread's self time over `window` by area and its top functions, from the profiles in `dir`.
 * @param {string} dir
 * @param {{ fromUs: number, toUs: number }} window
 */
function profileSummary(dir, window) {
  const lines = [];
  // Node names each thread's profile CPU.<date>.<time>.<pid>.<thread id>.<seq>.cpuprofile: thread 0 is ingest.
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'))) {
    const thread = file.split('.').at(-3) === '0' ? 'ingest thread' : 'delivery thread';
    const summary = summarizeProfile(JSON.parse(readFileSync(join(dir, file), 'utf8')), window);
    const pct = (/** @type {number} */ share) => `${(share * 100).toFixed(1)} %`;
    lines.push(`${thread}: ${Math.round(summary.busyMs)} ms busy (${join(dir, file)})`);
    for (const a of summary.areas.slice(0, 10)) lines.push(`  ${a.area}: ${Math.round(a.ms)} ms, ${pct(a.share)}`);
    for (const f of summary.functions.slice(0, 20))
      lines.push(`  ${f.functionName} ${f.source || f.area}: ${Math.round(f.ms)} ms, ${pct(f.share)}`);
  }
  return `${lines.join('\n')}\n`;
}

/** @type {Record<string, (Awaited<ReturnType<typeof forward>> & { closedConnections: number })[]>} */
const results = Object.fromEntries(sinks.map((s) => [s, []]));
try {
  if (broker) await createKafkaTopic(broker.bootstrap, topic, 3);
  for (let run = 1; run <= runs; run++) {
    for (const sink of sinks) {
      const dataDir = join(work, `gateway-${run}-${sink}`);
      const table = `bench_forward_${sink.replace('-', '_')}_${run}_${Date.now()}`;
      const unreachable = `http://127.0.0.1:${await freePort()}`;
      // Only the local sink, pointed nowhere, while the backlog is queued: the sink under test joins with backfill.
      await fillQueue({ bundle, apiKey, total, env: { DATA_DIR: dataDir, ...gatewayEnv, QUESTDB_URL: unreachable } });
      const destinationPort = Number(
        (sink === 'kafka' ? /** @type {NonNullable<typeof broker>} */ (broker).bootstrap : questdb.httpUrl).split(':').at(-1),
      );
      const waitingBefore = timeWaitTo(destinationPort);
      const profileDir = args['cpu-prof'] === undefined ? undefined : join(args['cpu-prof'], `${run}-${sink}`);
      const nodeArgs = profileDir === undefined ? undefined : ['--cpu-prof', `--cpu-prof-dir=${profileDir}`];
      const result = { ...(await measure(sink, dataDir, unreachable, table, nodeArgs)), closedConnections: 0 };
      if (profileDir !== undefined) process.stderr.write(profileSummary(profileDir, result.window));
      result.closedConnections = [...timeWaitTo(destinationPort)].filter((end) => !waitingBefore.has(end)).length;
      if (sink !== 'kafka') await settleAndDrop(questdb.httpUrl, table);
      rmSync(dataDir, { recursive: true, force: true });
      results[sink]?.push(result);
      process.stderr.write(`run ${run}: ${sink} ${Math.round(result.readingsPerSec)} readings/s\n`);
    }
  }
} finally {
  await broker?.close();
  await questdb.stop();
  rmSync(work, { recursive: true, force: true });
}

const fmt = (/** @type {number | undefined} */ n, digits = 0) =>
  n === undefined ? '–' : n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
const rows = [];
for (const sink of sinks) {
  const list = results[sink] ?? [];
  for (const [i, r] of list.entries())
    rows.push(
      `| ${sink} | ${i + 1} | ${fmt(r.readingsPerSec)} | ${fmt(r.siteCpuPerMillion, 2)} | ${fmt(r.steadyCpuPerMillion, 2)} | ${fmt(r.oneOffCpu, 2)} | ${fmt(r.centralCpuPerMillion, 2)} | ${fmt(r.destinationCpuPerMillion, 2)} | ${r.deliveries} | ${r.closedConnections} |`,
    );
  const m = (
    /** @type {'readingsPerSec' | 'siteCpuPerMillion' | 'steadyCpuPerMillion' | 'oneOffCpu' | 'centralCpuPerMillion' | 'destinationCpuPerMillion'} */ key,
  ) => {
    const values = list.map((r) => r[key]).filter((v) => v !== undefined);
    return values.length === 0 ? undefined : median(values);
  };
  rows.push(
    `| **${sink}** | **median** | **${fmt(m('readingsPerSec'))}** | **${fmt(m('siteCpuPerMillion'), 2)}** | **${fmt(m('steadyCpuPerMillion'), 2)}** | **${fmt(m('oneOffCpu'), 2)}** | **${fmt(m('centralCpuPerMillion'), 2)}** | **${fmt(m('destinationCpuPerMillion'), 2)}** | | |`,
  );
}
const load = (/** @type {number[]} */ l) => l.map((v) => v.toFixed(1)).join(' ');
process.stdout.write(
  [
    `Backlog of ${total.toLocaleString('en-US')} readings per run, ${runs} runs; QuestDB ${QUESTDB_VERSION}${broker ? `, Kafka ${KAFKA_VERSION} (single node, 3 partitions)` : ''}.`,
    `Machine: ${os.cpus()[0]?.model.trim()}, ${os.cpus().length} cores, Node ${process.version}; load average (1, 5, 15 min) ${load(loadAtStart)} at the start, ${load(os.loadavg())} at the end; processes not pinned.`,
    '',
    warmUp === 0
      ? 'Site CPU with what a sink pays once a process included; the steady state not measured (--warm-up-readings 0).'
      : `Site CPU: with what a sink pays once a process included (loading its client, compiling its code), over the whole backlog; in the steady state, from when ${warmUp.toLocaleString('en-US')} readings were delivered to the end; the one-off, the CPU beyond the steady rate.`,
    '',
    '| Sink | Run | Readings/s | Site gateway CPU s per million, one-off included | Site CPU s per million, steady state | Site one-off CPU s | Central gateway CPU s per million | Destination CPU s per million | Deliveries | Connections to the destination closed (TIME_WAIT) |',
    '|---|---|---|---|---|---|---|---|---|---|',
    ...rows,
    '',
  ].join('\n'),
);
