// The benchmark harness: `npm run bench` (builds the bundle first; `npm run bench -- --help`).
// Starts QuestDB and the built gateway as separate processes on their own CPUs, drives load with
// wrk, and prints medians over runs of single push, batch push, end to end, drain and footprint,
// in both durability modes; with `--compare REF`, of REF's build too, run by run alternately, and
// each figure's ratio. Writes bench/results/<time>.json and .md. Method: docs/benchmarks.md.
// The scenarios are in bench/lib/scenarios/, what they share in bench/lib/harness.mjs.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { QUESTDB_VERSION, startQuestDb } from '../scripts/lib/questdb.mjs';
import { projectRoot } from '../scripts/lib/paths.mjs';
import { describeMachine } from './lib/machine.mjs';
import { questDbBuild } from '../scripts/lib/questdb-sql.mjs';
import { writeLoadFile } from '../scripts/lib/readings.mjs';
import { renderMarkdown, summarizeResult } from './lib/report.mjs';
import { ensureWrk } from './lib/wrk.mjs';
import { HELP, parseBenchArgs } from './lib/options.mjs';
import { fmtRate, pin } from './lib/harness.mjs';
import { comparedBuild, compareRuns, renderComparison } from './lib/compare.mjs';
import { idleRun } from './lib/scenarios/idle.mjs';
import { ingestRun } from './lib/scenarios/ingest.mjs';
import { e2eScenario } from './lib/scenarios/e2e.mjs';
import { drainRun } from './lib/scenarios/drain.mjs';

const parsed = parseBenchArgs(process.argv.slice(2));
if (parsed.options === undefined) {
  process.stdout.write(HELP);
  process.exit(0);
}
const { options } = parsed;
const has = (/** @type {string} */ scenario) => options.scenarios.includes(scenario);

const bundle = join(projectRoot, 'dist', 'gateway.mjs');
if (!existsSync(bundle)) throw new Error(`${bundle} is missing: run \`npm run bench\`, which builds it first`);

const startedAt = new Date();
const clock = performance.now();
/** @param {string} text */
const say = (text) => process.stdout.write(`[${((performance.now() - clock) / 1000).toFixed(0).padStart(5)} s] ${text}\n`);

// The harness (prober, status polling, fill) runs beside wrk, away from the gateway's CPUs.
if (options.pinning) pin(process.pid, options.pinning.load);
const wrkVersion = ensureWrk();

/** @typedef {{ idle: any[], single: any[], batch: any[], e2e: any[], drain: any[] }} Runs */
/** @returns {Runs} */
const noRuns = () => ({ idle: [], single: [], batch: [], e2e: [], drain: [] });

if (options.compare !== undefined)
  say(`building ${options.compare === 'previous' ? 'the previous release' : options.compare} to compare with`);
const reference = options.compare === undefined ? undefined : { ...comparedBuild(options.compare), runs: noRuns() };
if (reference) say(`comparing with ${reference.name} (${reference.commit.slice(0, 12)}): ${reference.bundle}`);

mkdirSync(options.workDir, { recursive: true });
const workDir = mkdtempSync(join(options.workDir, 'run-'));
process.on('exit', () => {
  if (!parsed.keep) rmSync(workDir, { recursive: true, force: true });
});
for (const signal of /** @type {const} */ (['SIGINT', 'SIGTERM'])) process.on(signal, () => process.exit(130));

say(`starting QuestDB ${QUESTDB_VERSION}`);
const questdb = await startQuestDb({ dataDir: join(workDir, 'questdb') });
if (options.pinning) pin(/** @type {number} */ (questdb.pid), options.pinning.questdb);
const questdbVersion = `${QUESTDB_VERSION} (${(await questDbBuild(questdb.httpUrl)).replace(/\s+/g, ' ').slice(0, 80)})`;

const tableSuffix = randomBytes(3).toString('hex');
let tables = 0;

const result = {
  startedAt: startedAt.toISOString(),
  command: `npm run bench${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`,
  durationSeconds: 0,
  /** @type {string | undefined} */
  failure: undefined,
  machine: describeMachine({ root: projectRoot, workDir, wrk: wrkVersion, questdb: questdbVersion, pinning: options.pinning }),
  options,
  gatewayDefaults:
    'shipped defaults except HOST, PORT, API_KEY, DATA_DIR, DURABILITY, QUESTDB_URL, QUESTDB_TABLE, GATEWAY_NAME, and QUEUE_MAX_BYTES=8GiB in batch runs',
  /** This build's runs. */
  runs: noRuns(),
  /** @type {{ name: string, commit: string, runs: Runs, comparison?: ReturnType<typeof compareRuns> } | undefined} the build compared with, and the comparison */
  compared: reference && { name: reference.name, commit: reference.commit, runs: reference.runs },
  /** @type {{ label: string, error: string }[]} */
  failedRuns: [],
};

/** @type {import('./lib/harness.mjs').BenchContext} */
const bench = {
  options,
  bundle,
  workDir,
  questdb,
  apiKey: `bench-${randomBytes(16).toString('hex')}`,
  loadFiles: {
    single: writeLoadFile(join(workDir, 'single.txt'), 'single', 1),
    batch100: writeLoadFile(join(workDir, 'batch-100.json'), 'batch', 100),
    batch1000: writeLoadFile(join(workDir, 'batch-1000.json'), 'batch', 1000),
  },
  newTable: (label) => `bench_${label}_${tableSuffix}_${++tables}`,
  say,
  attempt,
};

say(
  `machine: ${result.machine.cpuModel}, ${result.machine.cores} cores, ${result.machine.ramGiB} GiB, load average ${result.machine.loadAverageAtStart.join(' ')}`,
);
if ((result.machine.loadAverageAtStart[0] ?? 0) > 0.5)
  say('note: the machine is not idle (load average above 0.5); figures will be lower and noisier');

/**
 * Runs one measurement; a run that fails (a process died, a timeout) is recorded and reported, and
 * the others go on. A failed run gives no figure, so its scenario shows fewer runs.
 * @template T
 * @param {string} label
 * @param {() => Promise<T>} measure
 * @returns {Promise<T | undefined>}
 */
async function attempt(label, measure) {
  try {
    return await measure();
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    result.failedRuns.push({ label, error: message });
    say(`${label} FAILED: ${message}`);
    return undefined;
  }
}

/** The builds measured: this one alone, or REF's and this one. */
const builds = [
  ...(reference ? [{ label: `[${reference.name}] `, context: { ...bench, bundle: reference.bundle }, runs: reference.runs }] : []),
  { label: reference ? '[this build] ' : '', context: bench, runs: result.runs },
];

try {
  for (let run = 1; run <= options.runs; run++) {
    // Alternate which build goes first (ABBA), so a drift of the machine weighs on both alike.
    const order = run % 2 === 1 ? builds : [...builds].reverse();
    for (const mode of options.modes) {
      if (has('idle')) {
        for (const { label, context, runs } of order) {
          const r = await attempt(`${label}idle ${mode} run ${run}`, () => idleRun(context, mode, run));
          if (!r) continue;
          runs.idle.push(r);
          const mb = (/** @type {number} */ kb) => (kb / 1024).toFixed(1);
          const h = r.heapsKb;
          say(
            `${label}idle ${mode} run ${run}: RSS ${mb(r.rssKb)} MB, private ${mb(r.anonKb)}; V8 heaps used/committed: ` +
              `ingest ${mb(h.ingestUsed)}/${mb(h.ingestTotal)}, delivery ${mb(h.deliveryUsed)}/${mb(h.deliveryTotal)} MB`,
          );
        }
      }
      if (has('single')) {
        for (const connections of options.connections) {
          for (const { label, context, runs } of order) {
            const r = await attempt(`${label}single ${mode} c=${connections} run ${run}`, () =>
              ingestRun(context, mode, 'single', 1, connections, run),
            );
            if (!r) continue;
            runs.single.push(r);
            say(
              `${label}single ${mode} c=${connections} run ${run}: ${fmtRate(r.requestsPerSec)}, p50 ${r.latencyMs.p50?.toFixed(2)} ms, p99 ${r.latencyMs.p99?.toFixed(2)} ms`,
            );
          }
        }
      }
      if (has('batch')) {
        for (const size of options.batches) {
          for (const { label, context, runs } of order) {
            const r = await attempt(`${label}batch ${mode} ${size} run ${run}`, () =>
              ingestRun(context, mode, 'batch', size, options.batchConnections, run),
            );
            if (!r) continue;
            runs.batch.push(r);
            say(`${label}batch ${mode} ${size} run ${run}: ${fmtRate(r.readingsPerSec)} readings, p99 ${r.latencyMs.p99?.toFixed(2)} ms`);
          }
        }
      }
    }
  }
  if (has('e2e')) for (const mode of options.modes) result.runs.e2e.push(await e2eScenario(bench, mode));
  if (has('drain')) {
    for (let run = 1; run <= options.runs; run++) {
      const order = run % 2 === 1 ? builds : [...builds].reverse();
      for (const mode of options.modes) {
        for (const { label, context, runs } of order) {
          const r = await attempt(`${label}drain ${mode} run ${run}`, () => drainRun(context, mode, run));
          if (!r) continue;
          runs.drain.push(r);
          say(
            `${label}drain ${mode} run ${run}: ${fmtRate(r.flushedReadingsPerSec)} flushed, ${fmtRate(r.queryableReadingsPerSec)} queryable`,
          );
        }
      }
    }
  }
} catch (error) {
  // Keep what was measured before the failure: a long run should not be lost to its last step.
  result.failure = error instanceof Error ? (error.stack ?? error.message) : String(error);
  process.stderr.write(`benchmark failed: ${result.failure}\n`);
} finally {
  await questdb.stop();
}

result.durationSeconds = (performance.now() - clock) / 1000;
const summary = summarizeResult(result);
let markdown = renderMarkdown(result, summary);
if (result.compared) {
  result.compared.comparison = compareRuns(result.compared.runs, result.runs);
  const current = { name: 'this build', commit: result.machine.gitCommit };
  markdown = `${renderComparison(result.compared.comparison, result.compared, current)}\n${markdown}`;
}
mkdirSync(options.outDir, { recursive: true });
const stamp = result.startedAt.replace(/[:.]/g, '-');
const jsonPath = join(options.outDir, `${stamp}.json`);
writeFileSync(jsonPath, `${JSON.stringify({ ...result, summary }, null, 1)}\n`);
writeFileSync(join(options.outDir, `${stamp}.md`), markdown);
process.stdout.write(`\n${markdown}\nResults: ${jsonPath} (and .md beside it)\n`);
if (result.failure !== undefined) {
  process.stderr.write('the benchmark did not finish: the results above are partial\n');
  process.exitCode = 1;
} else if (result.failedRuns.length > 0) {
  process.stderr.write(`${result.failedRuns.length} run(s) failed and gave no figure (listed above)\n`);
  process.exitCode = 1;
}
