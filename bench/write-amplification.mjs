// Bytes written to the disk per reading at the rates a site really sends:
// `npm run bench:write-amplification [-- --rates 5,50,500 --modes process-crash,power-loss --duration 60 --runs 1 --bundle PATH]`.
// QuestDB runs beside the gateway and takes its deliveries, so what is counted is the whole life
// of a reading in the queue: the commit before the answer, the sink's marks, checkpoints and the
// dropping of delivered segments. Each run starts the gateway with its shipped settings on a fresh
// data directory, sends single pushes at a fixed rate (each request due at start + k / rate, on as
// many keep-alive connections as the answers need), and counts the gateway's `write_bytes`
// (/proc/<pid>/io: the page cache it dirtied for storage, a page counted again once written back;
// with fsync after every commit that is every commit) over the measured window, after a warm-up.
// `--bundle` adds another build, run alternately with this one.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { sampleProcess } from '../scripts/lib/proc.mjs';
import { median } from '../scripts/lib/stats.mjs';
import { startBenchGateway } from './lib/gateway.mjs';
import { list } from './lib/options.mjs';
import { sleep } from './lib/harness.mjs';
import { pacedLoad } from './lib/paced.mjs';
import { loadAverage, standaloneBench } from './lib/standalone.mjs';

const { values: args } = parseArgs({
  options: {
    rates: { type: 'string', default: '5,50,500' },
    modes: { type: 'string', default: 'process-crash,power-loss' },
    duration: { type: 'string', default: '60' },
    warmup: { type: 'string', default: '5' },
    runs: { type: 'string', default: '1' },
    bundle: { type: 'string' },
    env: { type: 'string', multiple: true, default: [] },
  },
});
const rates = list(args.rates).map(Number);
const modes = list(args.modes);
const durationS = Number(args.duration);
const warmupS = Number(args.warmup);
const runs = Number(args.runs);
const load = loadAverage;
const { builds, extraEnv, workDir, apiKey, loadAtStart, questdb } = await standaloneBench('writes-', args);

/** @param {{ name: string, bundle: string }} build @param {string} mode @param {number} rate */
async function writesRun(build, mode, rate) {
  const dataDir = mkdtempSync(join(workDir, 'gateway-'));
  const gateway = await startBenchGateway({
    bundle: build.bundle,
    apiKey,
    env: {
      DATA_DIR: dataDir,
      DURABILITY: mode,
      QUESTDB_URL: questdb.httpUrl,
      QUESTDB_TABLE: `writes_${randomBytes(4).toString('hex')}`,
      ...extraEnv,
    },
  });
  try {
    await pacedLoad({ url: gateway.url, apiKey, rate, seconds: warmupS });
    const before = sampleProcess(gateway.pid);
    const sent = await pacedLoad({ url: gateway.url, apiKey, rate, seconds: durationS });
    if (sent.failed > 0) throw new Error(`${sent.failed} requests failed at ${rate}/s`);
    // The last readings' delivery and marks belong to the window too.
    await sleep(2000);
    const after = sampleProcess(gateway.pid);
    const written = after.writeBytes - before.writeBytes;
    return {
      readings: sent.readings,
      writtenPerReading: written / sent.readings,
      jsonPerReading: sent.jsonBytes / sent.readings,
      cpuSecondsPerMillion: ((after.cpuSeconds - before.cpuSeconds) / sent.readings) * 1e6,
    };
  } finally {
    await gateway.stop('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/** @type {Map<string, Awaited<ReturnType<typeof writesRun>>[]>} */
const results = new Map();
const key = (/** @type {string} */ build, /** @type {string} */ mode, /** @type {number} */ rate) => `${build}|${mode}|${rate}`;
try {
  for (let run = 1; run <= runs; run++)
    for (const rate of rates)
      for (const mode of modes)
        for (const build of run % 2 === 1 ? builds : [...builds].reverse()) {
          const result = await writesRun(build, mode, rate);
          const k = key(build.name, mode, rate);
          results.set(k, [...(results.get(k) ?? []), result]);
          process.stdout.write(
            `run ${run}, ${build.name}, ${mode}, ${rate}/s: ${result.readings} readings, ${result.writtenPerReading.toFixed(0)} bytes written per reading ` +
              `(JSON ${result.jsonPerReading.toFixed(0)}), ${result.cpuSecondsPerMillion.toFixed(0)} CPU-s per million; load ${load()}\n`,
          );
        }
} finally {
  await questdb.stop();
  rmSync(workDir, { recursive: true, force: true });
}

/** @param {number[]} values @param {number} digits */
const cell = (values, digits) =>
  values.length === 1
    ? (values[0] ?? 0).toFixed(digits)
    : `${(median(values) ?? 0).toFixed(digits)} (${Math.min(...values).toFixed(digits)}–${Math.max(...values).toFixed(digits)})`;
process.stdout.write(
  `\nload average at start ${loadAtStart}, at end ${load()}; ${runs} run(s) of ${durationS} s after ${warmupS} s of warm-up\n\n`,
);
process.stdout.write(
  '| Build | Mode | Requests/s | Bytes written per reading | × JSON | CPU-s per million readings |\n|---|---|---:|---:|---:|---:|\n',
);
for (const build of builds)
  for (const mode of modes)
    for (const rate of rates) {
      const list = results.get(key(build.name, mode, rate)) ?? [];
      if (list.length === 0) continue;
      const json = median(list.map((r) => r.jsonPerReading)) ?? 1;
      process.stdout.write(
        `| ${build.name} | ${mode} | ${rate} | ${cell(
          list.map((r) => r.writtenPerReading),
          0,
        )} | ${((median(list.map((r) => r.writtenPerReading)) ?? 0) / json).toFixed(1)} | ${cell(
          list.map((r) => r.cpuSecondsPerMillion),
          0,
        )} |\n`,
      );
    }
