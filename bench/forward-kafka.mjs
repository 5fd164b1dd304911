// Forward throughput of the Kafka sink beside the local QuestDB sink: `npm run bench:forward-kafka`
// (builds the bundle first; `-- --help`). Each run queues the same backlog while no destination is
// reachable, lets the Kafka sink alone forward it to a real broker, then lets the QuestDB sink
// alone deliver the same backlog to QuestDB, and measures readings/s and the gateway's CPU seconds
// per million readings of each. Prints the runs and their medians as Markdown.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Consumer } from '@platformatic/kafka';
import { KAFKA_VERSION, createKafkaTopic, startKafka } from '../scripts/lib/kafka.mjs';
import { projectRoot } from '../scripts/lib/paths.mjs';
import { freePort } from '../scripts/lib/ports.mjs';
import { cpuSeconds } from '../scripts/lib/proc.mjs';
import { QUESTDB_VERSION, startQuestDb } from '../scripts/lib/questdb.mjs';
import { rowCount, settleAndDrop } from '../scripts/lib/questdb-sql.mjs';
import { batchTemplate, fillBatchBody } from '../scripts/lib/readings.mjs';
import { median } from '../scripts/lib/stats.mjs';
import { startBenchGateway } from './lib/gateway.mjs';

const HELP = `Usage: npm run bench:forward-kafka [-- options]

  --runs N       runs (default 3)
  --readings N   backlog of each run, a multiple of 1000 (default 500000)
`;

const { values: args } = parseArgs({
  options: { runs: { type: 'string', default: '3' }, readings: { type: 'string', default: '500000' }, help: { type: 'boolean' } },
});
if (args.help) {
  process.stdout.write(HELP);
  process.exit(0);
}
const runs = Number(args.runs);
const total = Number(args.readings);
if (!(runs >= 1) || !(total >= 1000) || total % 1000 !== 0) throw new Error(`bad options: --runs ${args.runs} --readings ${args.readings}`);

const bundle = join(projectRoot, 'dist', 'gateway.mjs');
const apiKey = 'bench-key-0123456789';
const topic = 'bench-readings';

/** Sum of the topic's end offsets: messages written to it so far. */
async function topicMessages(/** @type {string} */ bootstrap) {
  const consumer = new Consumer({ clientId: 'harbor-bench', groupId: 'harbor-bench', bootstrapBrokers: [bootstrap] });
  try {
    const ends = (await consumer.listOffsets({ topics: [topic] })).get(topic) ?? [];
    return ends.reduce((sum, end) => sum + Number(end), 0);
  } finally {
    await consumer.close(true);
  }
}

/** Queues `total` readings in batches of 1,000 from four connections. */
async function fill(/** @type {string} */ url) {
  const template = batchTemplate(1000);
  const baseMs = Date.now();
  let next = 0;
  const worker = async () => {
    while (next < total / 1000) {
      const response = await fetch(`${url}/api/v2/ingest/batch`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'X-API-Key': apiKey },
        body: fillBatchBody(template, baseMs, next++),
      });
      await response.arrayBuffer();
      if (!response.ok) throw new Error(`fill: POST answered ${response.status}`);
    }
  };
  await Promise.all([worker(), worker(), worker(), worker()]);
}

/**
 * Starts a gateway on the queue in `dataDir`, waits until `sink` has delivered the backlog, and
 * returns its rate (from the start of the first delivery to the end of the last, as logged) and
 * the gateway's CPU seconds per million readings over that time.
 * @param {{ dataDir: string, env: Record<string, string>, sink: string, done: () => Promise<boolean>, otherPid?: number }} options
 */
async function forward({ dataDir, env, sink, done, otherPid }) {
  const gw = await startBenchGateway({
    bundle,
    apiKey,
    env: { DATA_DIR: dataDir, DURABILITY: 'process-crash', HEALTH_REPORT: 'false', ...env },
  });
  try {
    const cpuBefore = cpuSeconds(gw.pid) ?? 0;
    const otherBefore = otherPid === undefined ? 0 : (cpuSeconds(otherPid) ?? 0);
    const deadline = Date.now() + 600_000;
    const backlog = async () => {
      // /status lists every sink with its backlog.
      const status = /** @type {{ sinks: { name: string, backlog: number }[] }} */ (/** @type {unknown} */ (await gw.status()));
      return status.sinks.find((s) => s.name === sink)?.backlog;
    };
    while ((await backlog()) !== 0) {
      if (Date.now() > deadline) throw new Error(`${sink}: backlog not delivered within 600 s`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const cpu = (cpuSeconds(gw.pid) ?? 0) - cpuBefore;
    const other = otherPid === undefined ? undefined : (cpuSeconds(otherPid) ?? 0) - otherBefore;
    const deliveries = gw.logs.filter((l) => l.event === 'delivered' && l.sink === sink);
    const first = /** @type {Record<string, any>} */ (deliveries[0]);
    const last = /** @type {Record<string, any>} */ (deliveries.at(-1));
    const seconds = (Date.parse(last.time) - (Date.parse(first.time) - first.durationMs)) / 1000;
    const delivered = deliveries.reduce((n, l) => n + Number(l.readings), 0);
    if (delivered !== total) throw new Error(`${sink}: delivered ${delivered} readings, expected ${total}`);
    if (!(await done())) throw new Error(`${sink}: the destination does not hold the ${total} readings`);
    return {
      readingsPerSec: total / seconds,
      gatewayCpuPerMillion: (cpu / total) * 1e6,
      destinationCpuPerMillion: other === undefined ? undefined : (other / total) * 1e6,
      deliveries: deliveries.length,
    };
  } finally {
    await gw.stop('SIGTERM');
  }
}

const work = mkdtempSync(join(os.tmpdir(), 'harbor-bench-kafka-'));
const broker = await startKafka();
const questdb = await startQuestDb({ dataDir: join(work, 'questdb'), heap: '512m' });
/** @type {{ kafka: Awaited<ReturnType<typeof forward>>, questdb: Awaited<ReturnType<typeof forward>> }[]} */
const results = [];
try {
  await createKafkaTopic(broker.bootstrap, topic, 3);
  for (let run = 1; run <= runs; run++) {
    const dataDir = join(work, `gateway-${run}`);
    const table = `bench_forward_${run}_${Date.now()}`;
    const unreachable = `http://127.0.0.1:${await freePort()}`;
    const filling = await startBenchGateway({
      bundle,
      apiKey,
      env: { DATA_DIR: dataDir, DURABILITY: 'process-crash', HEALTH_REPORT: 'false', QUESTDB_URL: unreachable },
    });
    try {
      await fill(filling.url);
    } finally {
      await filling.stop('SIGTERM');
    }
    const before = await topicMessages(broker.bootstrap);
    // The Kafka sink joins with backfill, so it starts at the oldest queued reading; QuestDB stays unreachable.
    const kafka = await forward({
      dataDir,
      sink: 'kafka',
      env: { QUESTDB_URL: unreachable, KAFKA_BROKERS: broker.bootstrap, KAFKA_TOPIC: topic, KAFKA_BACKFILL: 'on' },
      otherPid: broker.pid(),
      done: async () => (await topicMessages(broker.bootstrap)) - before === total,
    });
    // The Kafka sink removed, the QuestDB sink delivers the same backlog.
    const local = await forward({
      dataDir,
      sink: 'questdb',
      env: { QUESTDB_URL: questdb.httpUrl, QUESTDB_TABLE: table, RETENTION_DAYS: '0' },
      otherPid: questdb.pid,
      done: async () => {
        for (let i = 0; i < 600 && ((await rowCount(questdb.httpUrl, table)) ?? 0) < total; i++)
          await new Promise((r) => setTimeout(r, 200));
        return (await rowCount(questdb.httpUrl, table)) === total;
      },
    });
    await settleAndDrop(questdb.httpUrl, table);
    rmSync(dataDir, { recursive: true, force: true });
    results.push({ kafka, questdb: local });
    process.stderr.write(`run ${run}: kafka ${Math.round(kafka.readingsPerSec)}/s, questdb ${Math.round(local.readingsPerSec)}/s\n`);
  }
} finally {
  await broker.close();
  await questdb.stop();
  rmSync(work, { recursive: true, force: true });
}

const fmt = (/** @type {number | undefined} */ n, digits = 0) =>
  n === undefined ? '–' : n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
const rows = [];
for (const sink of /** @type {const} */ (['kafka', 'questdb'])) {
  for (const [i, r] of results.entries())
    rows.push(
      `| ${sink} | ${i + 1} | ${fmt(r[sink].readingsPerSec)} | ${fmt(r[sink].gatewayCpuPerMillion, 2)} | ${fmt(r[sink].destinationCpuPerMillion, 2)} | ${r[sink].deliveries} |`,
    );
  const m = (/** @type {'readingsPerSec' | 'gatewayCpuPerMillion' | 'destinationCpuPerMillion'} */ key) =>
    median(results.map((r) => /** @type {number} */ (r[sink][key])));
  rows.push(
    `| **${sink}** | **median** | **${fmt(m('readingsPerSec'))}** | **${fmt(m('gatewayCpuPerMillion'), 2)}** | **${fmt(m('destinationCpuPerMillion'), 2)}** | |`,
  );
}
process.stdout.write(
  [
    `Backlog of ${total.toLocaleString('en-US')} readings per run, ${runs} runs; Kafka ${KAFKA_VERSION} (single node, 3 partitions), QuestDB ${QUESTDB_VERSION}.`,
    `Machine: ${os.cpus()[0]?.model.trim()}, ${os.cpus().length} cores, load average at the end ${os
      .loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')}; processes not pinned.`,
    '',
    '| Sink | Run | Readings/s | Gateway CPU s per million | Destination CPU s per million | Deliveries |',
    '|---|---|---|---|---|---|',
    ...rows,
    '',
  ].join('\n'),
);
