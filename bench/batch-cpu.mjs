// The gateway's CPU for a fixed amount of batch work, the figure a busy machine distorts least:
// `npm run build && node bench/batch-cpu.mjs [--bundle PATH] [--rounds 3] [--batches 300] [--connections 4]
// [--mode process-crash]`. Each round starts the gateway pinned to CPU 0 (QuestDB and this client on
// CPU 1) on a fresh data directory, posts `--batches` batches of 1,000 readings from `--connections`
// connections (`npm run bench` loads batches from 16), waits until QuestDB has them all (queue
// empty), and divides the gateway's CPU time (utime + stime) by the readings it accepted: the ingest
// thread's and the delivery thread's apart. `--bundle` runs another build alternately (its round
// first in odd rounds).
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { startQuestDb } from '../scripts/lib/questdb.mjs';
import { threadCpuSeconds } from '../scripts/lib/proc.mjs';
import { median } from '../scripts/lib/stats.mjs';
import { batchTemplate, fillBatchBody } from '../scripts/lib/readings.mjs';
import { startBenchGateway } from './lib/gateway.mjs';
import { pin, waitFor } from './lib/harness.mjs';
import { benchWorkDir, buildsToRun, loadAverage } from './lib/standalone.mjs';

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    batches: { type: 'string', default: '300' },
    connections: { type: 'string', default: '4' },
    mode: { type: 'string', default: 'process-crash' },
    bundle: { type: 'string' },
  },
});
const rounds = Number(args.rounds);
const batches = Number(args.batches);
const BATCH = 1000;
const builds = buildsToRun(args.bundle);
const load = loadAverage;
const workDir = benchWorkDir('batch-cpu-');
const apiKey = randomBytes(24).toString('base64url');
pin(process.pid, '1');
const questdb = await startQuestDb({ dataDir: join(workDir, 'questdb') });
pin(/** @type {number} */ (questdb.pid), '1');
const loadAtStart = load();
const template = batchTemplate(BATCH);

/** CPU seconds per thread: the main thread, and the rest. @param {number} pid */
function threadSeconds(pid) {
  let main = 0;
  let others = 0;
  for (const [tid, { user, system }] of threadCpuSeconds(pid)) {
    if (tid === String(pid)) main += user + system;
    else others += user + system;
  }
  return { main, others };
}

/** @param {{ name: string, bundle: string }} build */
async function round(build) {
  const dataDir = mkdtempSync(join(workDir, 'gateway-'));
  const gateway = await startBenchGateway({
    bundle: build.bundle,
    apiKey,
    cpus: '0',
    env: { DATA_DIR: dataDir, DURABILITY: args.mode, QUESTDB_URL: questdb.httpUrl, QUESTDB_TABLE: `cpu_${randomBytes(4).toString('hex')}` },
  });
  try {
    const acceptedBefore = (await gateway.status()).totals.acceptedReadings;
    const before = threadSeconds(gateway.pid);
    const baseMs = Date.now();
    let next = 0;
    /** Posts batch `i`, again when the gateway closed a kept-alive connection as it was reused (0.4.0 does, now and then). @param {number} i */
    const post = async (i, tries = 3) => {
      try {
        return await fetch(`${gateway.url}/api/v2/ingest/batch`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', 'X-API-Key': apiKey },
          body: fillBatchBody(template, baseMs, i),
        });
      } catch (error) {
        if (tries <= 1 || /** @type {{ cause?: { code?: string } }} */ (error).cause?.code !== 'ECONNRESET') throw error;
        return post(i, tries - 1);
      }
    };
    const worker = async () => {
      while (next < batches) {
        const i = next++;
        const response = await post(i);
        await response.arrayBuffer();
        if (!response.ok) throw new Error(`batch ${i}: ${response.status}`);
      }
    };
    await Promise.all(Array.from({ length: Number(args.connections) }, worker));
    const ingested = threadSeconds(gateway.pid);
    if (!(await waitFor(async () => (await gateway.status()).queue.readings === 0, 300_000, 100)))
      throw new Error('the queue did not drain');
    const after = threadSeconds(gateway.pid);
    // As the gateway counted them: a batch sent again after a reset may have been stored the first time too.
    const readings = (await gateway.status()).totals.acceptedReadings - acceptedBefore;
    const perMillion = (/** @type {number} */ s) => (s / readings) * 1e6;
    return {
      total: perMillion(after.main + after.others - before.main - before.others),
      ingestMain: perMillion(ingested.main - before.main),
      main: perMillion(after.main - before.main),
      others: perMillion(after.others - before.others),
    };
  } finally {
    await gateway.stop('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/** @type {Map<string, Awaited<ReturnType<typeof round>>[]>} */
const results = new Map(builds.map((b) => [b.name, []]));
try {
  for (let r = 1; r <= rounds; r++)
    for (const build of r % 2 === 1 ? builds : [...builds].reverse()) {
      const result = await round(build);
      results.get(build.name)?.push(result);
      process.stdout.write(
        `round ${r}, ${build.name}: ${result.total.toFixed(2)} CPU-s per million readings (ingest thread ${result.main.toFixed(2)}, ` +
          `of it while posting ${result.ingestMain.toFixed(2)}; other threads ${result.others.toFixed(2)}); load ${load()}\n`,
      );
    }
} finally {
  await questdb.stop();
  rmSync(workDir, { recursive: true, force: true });
}
process.stdout.write(
  `\n${args.mode}, ${rounds} rounds of ${batches} batches of ${BATCH}; load average at start ${loadAtStart}, at end ${load()}\n\n`,
);
process.stdout.write(
  '| Build | CPU-s per million readings | ingest thread | other threads (delivery, GC, libuv) |\n|---|---:|---:|---:|\n',
);
for (const build of builds) {
  const list = results.get(build.name) ?? [];
  const cell = (/** @type {(r: (typeof list)[number]) => number} */ pick) => {
    const values = list.map(pick);
    return `${(median(values) ?? 0).toFixed(2)} (${Math.min(...values).toFixed(2)}–${Math.max(...values).toFixed(2)})`;
  };
  process.stdout.write(`| ${build.name} | ${cell((r) => r.total)} | ${cell((r) => r.main)} | ${cell((r) => r.others)} |\n`);
}
