// The benchmark harness: `npm run bench` (builds the bundle first; `npm run bench -- --help`).
// Starts QuestDB and the built gateway as separate processes on their own CPUs, drives load with
// wrk, and prints medians over runs of single push, batch push, end to end, drain and footprint,
// in both durability modes. Writes bench/results/<time>.json and .md. Method: docs/benchmarks.md.
import { randomBytes } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { QUESTDB_VERSION, startQuestDb } from '../scripts/lib/questdb.mjs';
import { freePort } from '../scripts/lib/ports.mjs';
import { projectRoot } from '../scripts/lib/paths.mjs';
import { startBenchGateway } from './lib/gateway.mjs';
import { describeMachine } from './lib/machine.mjs';
import { cpuBusyShares, cpuSeconds, cpuTimes, delta, sampleProcess } from '../scripts/lib/proc.mjs';
import { questDbBuild, rowCount, settleAndDrop, sql, walApplied } from '../scripts/lib/questdb-sql.mjs';
import { batchTemplate, fillBatchBody, msPrefix, writeLoadFile } from '../scripts/lib/readings.mjs';
import { renderMarkdown, summarizeResult } from './lib/report.mjs';
import { percentile, queueBounded } from '../scripts/lib/stats.mjs';
import { ensureWrk, runWrk } from './lib/wrk.mjs';

const HELP = `Usage: npm run bench [-- options]

Scenarios (default all): idle, single, batch, e2e, drain (footprint figures come from all of them).

  --quick                 smoke test: 1 run, short durations, 100,000-reading drain
  --runs N                runs per figure (default 5; quick 1)
  --duration S            measured seconds of each single and batch run (default 10; quick 3)
  --warmup S              warm-up seconds before each of them (default 2; quick 1)
  --e2e-duration S        seconds of each end-to-end confirmation run (default 60; quick 8)
  --e2e-step S            seconds of each step of the end-to-end rate search (default 15; quick 4)
  --e2e-start N           first offered rate of the search, readings/s (default 100000; quick 50000)
  --e2e-steps N           most steps of the search (default 7; quick 4)
  --drain-readings N      backlog of the drain scenario (default 1000000; quick 100000)
  --modes LIST            durability modes (default process-crash,power-loss)
  --scenarios LIST        subset of idle,single,batch,e2e,drain
  --connections LIST      single-push connection counts (default 1,16,64)
  --batch-connections N   connections of the batch scenario (default 16)
  --wrk-threads N         wrk threads (default 2)
  --gateway-cpus LIST     CPUs of the gateway (default 0)
  --load-cpus LIST        CPUs of wrk and this harness (default 1)
  --questdb-cpus LIST     CPUs of QuestDB (default 1 on two cores, 2-N on more)
  --no-pin                do not pin processes to CPUs
  --work-dir DIR          where fresh data directories are made (default bench/.work; not tmpfs)
  --out DIR               where results are written (default bench/results)
  --keep                  keep the data directories afterwards
`;

const { values: args } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    runs: { type: 'string' },
    duration: { type: 'string' },
    warmup: { type: 'string' },
    'e2e-duration': { type: 'string' },
    'e2e-step': { type: 'string' },
    'e2e-start': { type: 'string' },
    'e2e-steps': { type: 'string' },
    'drain-readings': { type: 'string' },
    modes: { type: 'string' },
    scenarios: { type: 'string' },
    connections: { type: 'string' },
    'batch-connections': { type: 'string' },
    'wrk-threads': { type: 'string' },
    'gateway-cpus': { type: 'string' },
    'load-cpus': { type: 'string' },
    'questdb-cpus': { type: 'string' },
    'no-pin': { type: 'boolean', default: false },
    'work-dir': { type: 'string' },
    out: { type: 'string' },
    keep: { type: 'boolean', default: false },
    help: { type: 'boolean', default: false },
  },
});
if (args.help) {
  process.stdout.write(HELP);
  process.exit(0);
}

/**
 * @param {string | undefined} value
 * @param {number} fallback
 * @param {string} name
 */
const num = (value, fallback, name) => {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`--${name} must be a positive number, got ${value}`);
  return n;
};
/** @param {string} value */
const list = (value) =>
  value
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');

const quick = args.quick;
const cores = os.availableParallelism();
const ALL_SCENARIOS = ['idle', 'single', 'batch', 'e2e', 'drain'];
const options = {
  quick,
  runs: num(args.runs, quick ? 1 : 5, 'runs'),
  durationS: num(args.duration, quick ? 3 : 10, 'duration'),
  warmupS: num(args.warmup, quick ? 1 : 2, 'warmup'),
  e2eWarmupS: quick ? 2 : 5,
  e2eDurationS: num(args['e2e-duration'], quick ? 8 : 60, 'e2e-duration'),
  e2eStepS: num(args['e2e-step'], quick ? 4 : 15, 'e2e-step'),
  e2eStartRate: num(args['e2e-start'], quick ? 50_000 : 100_000, 'e2e-start'),
  e2eMaxSteps: num(args['e2e-steps'], quick ? 4 : 7, 'e2e-steps'),
  e2eConnections: 16,
  e2eBatch: 1000,
  probeIntervalMs: 100,
  // Each poll is an HTTP query QuestDB parses, runs and logs on the generator's CPU: ten a second
  // keep its cost small beside the load, at 100 ms resolution on delays of a second or more.
  probePollMs: 100,
  drainReadings: num(args['drain-readings'], quick ? 100_000 : 1_000_000, 'drain-readings'),
  idleSettleS: quick ? 2 : 5,
  modes: list(args.modes ?? 'process-crash,power-loss'),
  scenarios: list(args.scenarios ?? ALL_SCENARIOS.join(',')),
  connections: list(args.connections ?? '1,16,64').map(Number),
  batches: [100, 1000],
  batchConnections: num(args['batch-connections'], 16, 'batch-connections'),
  wrkThreads: num(args['wrk-threads'], 2, 'wrk-threads'),
  pinning:
    args['no-pin'] || cores < 2
      ? null
      : {
          gateway: args['gateway-cpus'] ?? '0',
          load: args['load-cpus'] ?? '1',
          questdb: args['questdb-cpus'] ?? (cores === 2 ? '1' : `2-${cores - 1}`),
        },
  workDir: args['work-dir'] ?? join(projectRoot, 'bench', '.work'),
  outDir: args.out ?? join(projectRoot, 'bench', 'results'),
};
for (const mode of options.modes) if (mode !== 'process-crash' && mode !== 'power-loss') throw new Error(`unknown durability mode ${mode}`);
for (const s of options.scenarios)
  if (!ALL_SCENARIOS.includes(s)) throw new Error(`unknown scenario ${s}; known: ${ALL_SCENARIOS.join(', ')}`);
// Thread digits 0..8 are wrk's in the readings' times; 9 is the harness's own fill.
if (options.wrkThreads > 9) throw new Error('--wrk-threads must be 9 or fewer');
if (options.drainReadings % 1000 !== 0) throw new Error('--drain-readings must be a multiple of 1000');
const has = (/** @type {string} */ scenario) => options.scenarios.includes(scenario);

const bundle = join(projectRoot, 'dist', 'gateway.mjs');
if (!existsSync(bundle)) throw new Error(`${bundle} is missing: run \`npm run bench\`, which builds it first`);

const startedAt = new Date();
const clock = performance.now();
/** @param {string} text */
const say = (text) => process.stdout.write(`[${((performance.now() - clock) / 1000).toFixed(0).padStart(5)} s] ${text}\n`);
/** @param {number} ms */
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// The harness (prober, status polling, fill) runs beside wrk, away from the gateway's CPUs.
if (options.pinning) pin(process.pid, options.pinning.load);
const wrkVersion = ensureWrk();

mkdirSync(options.workDir, { recursive: true });
const workDir = mkdtempSync(join(options.workDir, 'run-'));
process.on('exit', () => {
  if (!args.keep) rmSync(workDir, { recursive: true, force: true });
});
for (const signal of /** @type {const} */ (['SIGINT', 'SIGTERM'])) process.on(signal, () => process.exit(130));

const loadFiles = {
  single: writeLoadFile(join(workDir, 'single.txt'), 'single', 1),
  batch100: writeLoadFile(join(workDir, 'batch-100.json'), 'batch', 100),
  batch1000: writeLoadFile(join(workDir, 'batch-1000.json'), 'batch', 1000),
};
/** @param {number} size */
const batchFile = (size) => (size === 100 ? loadFiles.batch100 : loadFiles.batch1000);

say(`starting QuestDB ${QUESTDB_VERSION}`);
const questdb = await startQuestDb({ dataDir: join(workDir, 'questdb') });
if (options.pinning) pin(/** @type {number} */ (questdb.pid), options.pinning.questdb);
const questdbVersion = `${QUESTDB_VERSION} (${(await questDbBuild(questdb.httpUrl)).replace(/\s+/g, ' ').slice(0, 80)})`;

const apiKey = `bench-${randomBytes(16).toString('hex')}`;
const tableSuffix = randomBytes(3).toString('hex');
let tables = 0;
/** @param {string} label */
const newTable = (label) => `bench_${label}_${tableSuffix}_${++tables}`;

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
  /** @type {{ idle: any[], single: any[], batch: any[], e2e: any[], drain: any[] }} */
  runs: { idle: [], single: [], batch: [], e2e: [], drain: [] },
  /** @type {{ label: string, error: string }[]} */
  failedRuns: [],
};
say(
  `machine: ${result.machine.cpuModel}, ${result.machine.cores} cores, ${result.machine.ramGiB} GiB, load average ${result.machine.loadAverageAtStart.join(' ')}`,
);
if ((result.machine.loadAverageAtStart[0] ?? 0) > 0.5)
  say('note: the machine is not idle (load average above 0.5); figures will be lower and noisier');

/**
 * Sets the CPU affinity of every thread of a process.
 * @param {number} pid
 * @param {string} cpus
 */
function pin(pid, cpus) {
  const done = spawnSync('taskset', ['-a', '-p', '-c', cpus, String(pid)], { encoding: 'utf8' });
  if (done.status !== 0) throw new Error(`taskset could not pin ${pid} to CPUs ${cpus}: ${done.stderr}`);
}

/**
 * A fresh gateway (own data directory and QuestDB table) for one run.
 * @param {string} mode
 * @param {string} label
 * @param {Record<string, string>} [env]
 */
async function freshGateway(mode, label, env = {}) {
  const dataDir = mkdtempSync(join(workDir, 'gateway-'));
  const table = newTable(label);
  const gateway = await startBenchGateway({
    bundle,
    apiKey,
    cpus: options.pinning?.gateway,
    env: { DATA_DIR: dataDir, DURABILITY: mode, QUESTDB_URL: questdb.httpUrl, QUESTDB_TABLE: table, ...env },
  });
  return {
    gateway,
    dataDir,
    table,
    /** Kills the gateway, removes its queue, and lets QuestDB finish with the table before dropping it. */
    async dispose() {
      await gateway.stop('SIGKILL');
      rmSync(dataDir, { recursive: true, force: true });
      if (!(await settleAndDrop(questdb.httpUrl, table))) say(`warning: QuestDB did not apply the WAL of ${table} within 120 s`);
    },
  };
}

/** Readings of the processes and CPUs around a measured window. */
function snapshot(/** @type {number} */ gatewayPid) {
  return { gateway: sampleProcess(gatewayPid), questdbCpu: cpuSeconds(/** @type {number} */ (questdb.pid)) ?? 0, cpus: cpuTimes() };
}

/**
 * Footprint of the gateway and contention on the CPUs between two snapshots.
 * @param {ReturnType<typeof snapshot>} before
 * @param {ReturnType<typeof snapshot>} after
 * @param {number} readings  accepted (or flushed) readings in the window
 */
function footprint(before, after, readings) {
  const d = delta(before.gateway, after.gateway);
  const busy = cpuBusyShares(before.cpus, after.cpus);
  const loadCpus = options.pinning ? cpuList(options.pinning.load) : [...Object.keys(busy)].map(Number);
  const loadBusy = loadCpus.map((c) => busy[c] ?? 0);
  // Whatever kept the gateway's CPUs busy besides the gateway: other processes on the machine.
  const gatewayCpus = options.pinning ? cpuList(options.pinning.gateway) : [];
  const gatewayCpusBusy = gatewayCpus.reduce((sum, c) => sum + (busy[c] ?? 0), 0);
  return {
    footprint: {
      seconds: d.seconds,
      cpuSeconds: d.cpuSeconds,
      gatewayCpuShare: d.cpuSeconds / d.seconds,
      cpuSecondsPerMillion: readings > 0 ? (d.cpuSeconds / readings) * 1e6 : null,
      writeBytes: d.writeBytes,
      cancelledWriteBytes: d.cancelledWriteBytes,
      writeBytesPerReading: readings > 0 ? d.writeBytes / readings : null,
      rssKb: d.rssKb,
      hwmKb: d.hwmKb,
    },
    questdbCpuShare: (after.questdbCpu - before.questdbCpu) / d.seconds,
    cpuBusy: busy,
    loadCpuBusy: loadBusy.reduce((a, b) => a + b, 0) / Math.max(1, loadBusy.length),
    othersOnGatewayCpus: options.pinning ? Math.max(0, gatewayCpusBusy - d.cpuSeconds / d.seconds) / gatewayCpus.length : null,
  };
}

/** @param {string} spec  e.g. "0", "1,3", "2-5" */
function cpuList(spec) {
  return list(spec).flatMap((part) => {
    const [a, b] = part.split('-').map(Number);
    return b === undefined
      ? [/** @type {number} */ (a)]
      : Array.from({ length: b - /** @type {number} */ (a) + 1 }, (_, i) => /** @type {number} */ (a) + i);
  });
}

/**
 * @param {{ gateway: import('./lib/gateway.mjs').BenchGateway }} run
 * @param {string} path
 * @param {string} body
 */
async function post(run, path, body) {
  const response = await fetch(`${run.gateway.url}${path}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'X-API-Key': apiKey },
    body,
  });
  await response.arrayBuffer();
  if (!response.ok) throw new Error(`POST ${path} answered ${response.status}`);
}

/**
 * Polls `check` every `everyMs` until it returns true; false after `timeoutMs`.
 * @param {() => Promise<boolean>} check
 * @param {number} timeoutMs
 * @param {number} [everyMs]
 */
async function waitFor(check, timeoutMs, everyMs = 100) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return true;
    await sleep(everyMs);
  }
  return false;
}

/**
 * Waits until the gateway's queue is empty and QuestDB applied its WAL, then compares the rows of
 * the run's table with the readings the gateway accepted since it started.
 * @param {{ gateway: import('./lib/gateway.mjs').BenchGateway, table: string }} gw
 * @returns {Promise<{ ok: boolean, rows: number, accepted: number }>}
 */
async function allRowsArrived(gw) {
  const drained = await waitFor(async () => (await gw.gateway.status()).queue.readings === 0, 300_000, 200);
  const accepted = (await gw.gateway.status()).totals.acceptedReadings;
  const applied = drained && (await walApplied(questdb.httpUrl, gw.table, 120_000));
  const rows = (await rowCount(questdb.httpUrl, gw.table)) ?? 0;
  return { ok: applied && rows === accepted, rows, accepted };
}

// ---- idle footprint ---------------------------------------------------------------------------

/** @param {string} mode @param {number} run */
async function idleRun(mode, run) {
  const gw = await freshGateway(mode, 'idle');
  try {
    // One reading through the whole path, so the idle figure includes a set-up table and a flush.
    await post(
      gw,
      '/api/v2/ingest/',
      JSON.stringify({ time: new Date().toISOString(), ship_id: 'ship-000', cargo_id: 'temperature', value: 21.5 }),
    );
    const flushed = await waitFor(async () => (await gw.gateway.status()).totals.flushedReadings >= 1, 30_000);
    await sleep(options.idleSettleS * 1000);
    const sample = sampleProcess(gw.gateway.pid);
    return { mode, run, flushed, rssKb: sample.rssKb, anonKb: sample.anonKb, fileKb: sample.fileKb, hwmKb: sample.hwmKb };
  } finally {
    await gw.dispose();
  }
}

// ---- single and batch push --------------------------------------------------------------------

/**
 * @param {string} mode
 * @param {'single' | 'batch'} kind
 * @param {number} size
 * @param {number} connections
 * @param {number} run
 */
async function ingestRun(mode, kind, size, connections, run) {
  // Batch runs outpace the flusher and queue millions of readings: a larger bound than the shipped
  // 1 GiB keeps a fast gateway from answering 503 before the run ends.
  const gw = await freshGateway(
    mode,
    kind === 'single' ? `single_c${connections}` : `batch${size}`,
    kind === 'batch' ? { QUEUE_MAX_BYTES: '8GiB' } : {},
  );
  try {
    const file = kind === 'single' ? loadFiles.single : batchFile(size);
    const load = {
      url: `${gw.gateway.url}${kind === 'single' ? '/api/v2/ingest/' : '/api/v2/ingest/batch'}`,
      threads: Math.min(connections, options.wrkThreads),
      connections,
      cpus: options.pinning?.load,
      env: { BENCH_KIND: kind, BENCH_FILE: file.path, BENCH_API_KEY: apiKey },
    };
    await runWrk({ ...load, durationS: options.warmupS });
    const status0 = await gw.gateway.status();
    const before = snapshot(gw.gateway.pid);
    const wrk = await runWrk({ ...load, durationS: options.durationS });
    const after = snapshot(gw.gateway.pid);
    const status1 = await gw.gateway.status();
    const seconds = wrk.durationUs / 1e6;
    const accepted = wrk.requests - wrk.errors.status;
    const gatewayAccepted = status1.totals.acceptedReadings - status0.totals.acceptedReadings;
    // Single pushes leave a short queue: check that every accepted reading became its own row.
    // (Batch runs leave millions queued; the end-to-end and drain runs check the batch readings.)
    const verified = kind === 'single' ? await allRowsArrived(gw) : null;
    return {
      mode,
      kind,
      batch: size,
      connections,
      run,
      seconds,
      requests: wrk.requests,
      requestsPerSec: accepted / seconds,
      readingsPerSec: (accepted * size) / seconds,
      // A run in which no request completed has no latency; its rate (0) stands.
      latencyMs:
        accepted === 0
          ? { p50: null, p90: null, p99: null, max: null }
          : { p50: wrk.latencyUs.p50 / 1000, p90: wrk.latencyUs.p90 / 1000, p99: wrk.latencyUs.p99 / 1000, max: wrk.latencyUs.max / 1000 },
      errors: wrk.errors,
      gatewayAcceptedReadings: gatewayAccepted,
      queueAtEnd: status1.queue.readings,
      jsonBytesPerReading: file.jsonBytesPerReading,
      verified,
      wrkCpuShare: wrk.cpuSeconds === undefined ? null : wrk.cpuSeconds / seconds,
      ...footprint(before, after, accepted === 0 ? 0 : gatewayAccepted),
    };
  } finally {
    await gw.dispose();
  }
}

// ---- end to end -------------------------------------------------------------------------------

/**
 * Posts a probe reading every `probeIntervalMs` and polls QuestDB for the newest probe row; the
 * delay of a probe is from its 2xx answer to the first poll answer that shows it (so at most one
 * poll late). The flusher ships the queue in order and QuestDB makes its commits visible in order,
 * so once probe n is visible every probe before it is too: asking for the latest probe only (a
 * constant, cheap query) sees each probe as soon as a query for it would.
 * @param {{ gateway: import('./lib/gateway.mjs').BenchGateway, table: string }} gw
 */
function startProber(gw) {
  /** @type {Map<number, number>} probe id -> when its 2xx answer arrived */
  const pending = new Map();
  /** @type {number[]} */
  const delaysMs = [];
  let sent = 0;
  let failed = 0;
  let inFlight = 0;
  let polling = true;
  const posting = setInterval(() => {
    const id = ++sent;
    const time = `${msPrefix(Date.now())}${String(id % 1_000_000).padStart(6, '0')}Z`;
    inFlight += 1;
    post(gw, '/api/v2/ingest/', JSON.stringify({ time, ship_id: 'bench-probe', cargo_id: 'latency', value: id }))
      .then(
        () => pending.set(id, performance.now()),
        () => (failed += 1),
      )
      .finally(() => (inFlight -= 1));
  }, options.probeIntervalMs);
  const query = `SELECT value FROM '${gw.table}' WHERE ship_id = 'bench-probe' LATEST ON time PARTITION BY ship_id`;
  const poller = (async () => {
    while (polling) {
      if (pending.size > 0) {
        try {
          const latest = Number((await sql(questdb.httpUrl, query)).dataset[0]?.[0] ?? 0);
          const at = performance.now();
          for (const [id, ackAt] of pending) {
            if (id > latest) continue;
            delaysMs.push(at - ackAt);
            pending.delete(id);
          }
        } catch {
          // The table does not exist before the first flush.
        }
      }
      await sleep(options.probePollMs);
    }
  })();
  return {
    /** Stops posting, waits up to `timeoutMs` for the probes still on their way, and reports. */
    async finish(/** @type {number} */ timeoutMs) {
      clearInterval(posting);
      await waitFor(async () => inFlight === 0 && pending.size === 0, timeoutMs, 50);
      polling = false;
      await poller;
      return {
        sent,
        failed,
        found: delaysMs.length,
        lost: pending.size,
        p50Ms: percentile(delaysMs, 50) ?? null,
        p99Ms: percentile(delaysMs, 99) ?? null,
        maxMs: delaysMs.length === 0 ? null : Math.max(...delaysMs),
        delaysMs: delaysMs.map((d) => Math.round(d * 10) / 10),
      };
    },
  };
}

/**
 * Offers `rate` readings/s in batches for `windowS` seconds (after a warm-up) and checks that the
 * gateway takes them all and its queue stays bounded.
 * @param {string} mode
 * @param {number} rate
 * @param {number} windowS
 * @param {{ probe: boolean, verify: boolean }} what
 */
async function e2eRun(mode, rate, windowS, what) {
  const gw = await freshGateway(mode, 'e2e');
  try {
    const file = batchFile(options.e2eBatch);
    const wrkDone = runWrk({
      url: `${gw.gateway.url}/api/v2/ingest/batch`,
      threads: options.wrkThreads,
      connections: options.e2eConnections,
      durationS: options.e2eWarmupS + windowS + 2,
      cpus: options.pinning?.load,
      env: { BENCH_KIND: 'batch', BENCH_FILE: file.path, BENCH_API_KEY: apiKey, BENCH_RATE: String(rate / options.e2eBatch) },
    });
    // Awaited below; until then a failure elsewhere must not leave its rejection unhandled.
    wrkDone.catch(() => undefined);
    await sleep(options.e2eWarmupS * 1000);
    const status0 = await gw.gateway.status();
    const before = snapshot(gw.gateway.pid);
    const prober = what.probe ? startProber(gw) : undefined;
    /** @type {{ t: number, depth: number }[]} */
    const samples = [];
    const t0 = performance.now();
    while (performance.now() - t0 < windowS * 1000) {
      const status = await gw.gateway.status();
      samples.push({ t: (performance.now() - t0) / 1000, depth: status.queue.readings });
      await sleep(250);
    }
    const after = snapshot(gw.gateway.pid);
    const status1 = await gw.gateway.status();
    const seconds = (after.gateway.at - before.gateway.at) / 1000;
    const wrk = await wrkDone;
    const acceptedReadings = status1.totals.acceptedReadings - status0.totals.acceptedReadings;
    const flushedReadings = status1.totals.flushedReadings - status0.totals.flushedReadings;
    const acceptedRate = acceptedReadings / seconds;
    const flushedRate = flushedReadings / seconds;
    const queue = queueBounded(samples, rate);
    const errors = wrk.errors.connect + wrk.errors.read + wrk.errors.write + wrk.errors.timeout + wrk.errors.status;
    const reasons = [];
    if (errors > 0) reasons.push(`${errors} failed requests`);
    if (acceptedRate < 0.95 * rate)
      reasons.push(`accepted ${Math.round(acceptedRate)}/s of ${rate}/s offered (wrk sent ${wrk.requests} requests)`);
    if (!queue.bounded)
      reasons.push(
        `queue grew ${Math.round(queue.growthPerSecond)}/s (allowed ${Math.round(queue.allowedGrowthPerSecond)}/s) to ${queue.lastDepth}`,
      );
    const probe = prober ? await prober.finish(30_000) : undefined;
    /** @type {boolean | null} */
    let verified = null;
    let rows = null;
    if (what.verify) {
      // Every accepted reading (load and probes) must be in QuestDB exactly once.
      const check = await allRowsArrived(gw);
      verified = check.ok;
      rows = check.rows;
      if (!verified) reasons.push(`QuestDB has ${rows} rows, ${check.accepted} readings were accepted`);
    }
    return {
      mode,
      rate,
      windowS,
      seconds,
      sustained: reasons.length === 0,
      reasons,
      acceptedReadingsPerSec: acceptedRate,
      flushedReadingsPerSec: flushedRate,
      queue: { ...queue, samples: samples.map((s) => [Math.round(s.t * 100) / 100, s.depth]) },
      wrk: { requests: wrk.requests, errors: wrk.errors, latencyMs: { p50: wrk.latencyUs.p50 / 1000, p99: wrk.latencyUs.p99 / 1000 } },
      wrkCpuShare: wrk.cpuSeconds === undefined ? null : wrk.cpuSeconds / (wrk.durationUs / 1e6),
      probe,
      verified,
      rows,
      jsonBytesPerReading: file.jsonBytesPerReading,
      ...footprint(before, after, acceptedReadings),
    };
  } finally {
    await gw.dispose();
  }
}

/**
 * Finds the highest offered rate the gateway sustains (short steps: doubling, then bisection),
 * then confirms it with full-length runs, stepping down 10 % when a run fails.
 * @param {string} mode
 */
async function e2eScenario(mode) {
  /** @param {number} r */
  const round = (r) => Math.max(options.e2eBatch, Math.round(r / options.e2eBatch) * options.e2eBatch);
  const steps = [];
  let rate = round(options.e2eStartRate);
  let good = 0;
  let bad = Infinity;
  for (let i = 0; i < options.e2eMaxSteps; i++) {
    const step = await attempt(`e2e ${mode} step ${fmtRate(rate)}`, () =>
      e2eRun(mode, rate, options.e2eStepS, { probe: false, verify: false }),
    );
    if (step) {
      steps.push(step);
      say(`e2e ${mode} step ${fmtRate(rate)}: ${step.sustained ? 'sustained' : `not sustained (${step.reasons.join('; ')})`}`);
    }
    if (step?.sustained) good = Math.max(good, rate);
    else bad = Math.min(bad, rate);
    if (good > 0 && bad / good <= 1.1) break;
    const next = round(bad === Infinity ? rate * 2 : good === 0 ? rate / 2 : (good + bad) / 2);
    if (next === rate) break;
    rate = next;
  }
  const confirmations = [];
  let confirmedRate = good;
  for (let reductions = 0; confirmedRate > 0 && reductions <= 2; reductions++) {
    let failed = false;
    for (let run = 1; run <= options.runs; run++) {
      const r = await attempt(`e2e ${mode} run ${run} at ${fmtRate(confirmedRate)}`, () =>
        e2eRun(mode, confirmedRate, options.e2eDurationS, { probe: true, verify: true }),
      );
      if (!r) {
        failed = true;
        break;
      }
      confirmations.push(r);
      say(
        `e2e ${mode} run ${run} at ${fmtRate(confirmedRate)}: ${r.sustained ? 'sustained' : `not sustained (${r.reasons.join('; ')})`}, ` +
          `into QuestDB ${fmtRate(r.flushedReadingsPerSec)}, probe p50 ${r.probe?.p50Ms?.toFixed(0)} ms p99 ${r.probe?.p99Ms?.toFixed(0)} ms`,
      );
      if (!r.sustained) {
        failed = true;
        break;
      }
    }
    if (!failed) break;
    if (reductions < 2) confirmedRate = round(confirmedRate * 0.9);
  }
  return { mode, search: { good, bad, steps }, confirmedRate, confirmations };
}

// ---- drain ------------------------------------------------------------------------------------

/**
 * Queues `total` readings in batches of 1,000 from four connections.
 * @param {{ gateway: import('./lib/gateway.mjs').BenchGateway }} gw
 * @param {number} total
 */
async function fill(gw, total) {
  const template = batchTemplate(1000);
  const baseMs = Date.now();
  const requests = total / 1000;
  let next = 0;
  const worker = async () => {
    while (next < requests) await post(gw, '/api/v2/ingest/batch', fillBatchBody(template, baseMs, next++));
  };
  await Promise.all([worker(), worker(), worker(), worker()]);
}

/** @param {string} mode @param {number} run */
async function drainRun(mode, run) {
  const dataDir = mkdtempSync(join(workDir, 'gateway-'));
  const table = newTable('drain');
  const env = { DATA_DIR: dataDir, DURABILITY: mode, QUESTDB_TABLE: table };
  const total = options.drainReadings;
  // QuestDB "down": nothing listens on this port, so every flush fails and the readings queue up.
  const down = await startBenchGateway({
    bundle,
    apiKey,
    cpus: options.pinning?.gateway,
    env: { ...env, QUESTDB_URL: `http://127.0.0.1:${await freePort()}` },
  });
  const fillStarted = performance.now();
  try {
    await fill({ gateway: down }, total);
    const queued = (await down.status()).queue.readings;
    if (queued !== total) throw new Error(`drain: ${queued} readings queued, expected ${total}`);
  } finally {
    await down.stop('SIGTERM');
  }
  const fillSeconds = (performance.now() - fillStarted) / 1000;

  const up = await startBenchGateway({ bundle, apiKey, cpus: options.pinning?.gateway, env: { ...env, QUESTDB_URL: questdb.httpUrl } });
  try {
    const before = snapshot(up.pid);
    /** @type {ReturnType<typeof snapshot> | undefined} */
    let after;
    let emptyAt = 0;
    let queryableAt = 0;
    const drained = await waitFor(
      async () => {
        if (after === undefined && (await up.status()).queue.readings === 0) {
          emptyAt = Date.now();
          after = snapshot(up.pid);
        }
        if (after !== undefined && ((await rowCount(questdb.httpUrl, table)) ?? 0) >= total) {
          queryableAt = Date.now();
          return true;
        }
        return false;
      },
      600_000,
      50,
    );
    if (!drained || after === undefined)
      throw new Error(`drain: ${(await up.status()).queue.readings} readings still queued or not queryable after 600 s`);
    const flushes = up.logs.filter((l) => l.event === 'delivered');
    const first = /** @type {Record<string, any>} */ (flushes[0]);
    const last = /** @type {Record<string, any>} */ (flushes[flushes.length - 1]);
    // From the start of the first flush that moved readings to the end of the last one.
    const startMs = Date.parse(first.time) - first.durationMs;
    const flushed = flushes.reduce((n, l) => n + Number(l.readings), 0);
    const applied = await walApplied(questdb.httpUrl, table, 120_000);
    const rows = (await rowCount(questdb.httpUrl, table)) ?? 0;
    return {
      mode,
      run,
      readings: total,
      fillSeconds,
      flushes: flushes.length,
      flushedReadingsPerSec: flushed / ((Date.parse(last.time) - startMs) / 1000),
      queryableReadingsPerSec: total / ((queryableAt - startMs) / 1000),
      emptySecondsAfterStart: (emptyAt - startMs) / 1000,
      verified: applied && rows === total && flushed === total,
      rows,
      ...footprint(before, after, total),
    };
  } finally {
    await up.stop('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
    await settleAndDrop(questdb.httpUrl, table);
  }
}

// ---- main ------------------------------------------------------------------------------------

/** @param {number} r */
const fmtRate = (r) => `${Math.round(r).toLocaleString('en-US')}/s`;

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

try {
  for (let run = 1; run <= options.runs; run++) {
    for (const mode of options.modes) {
      if (has('idle')) {
        const r = await attempt(`idle ${mode} run ${run}`, () => idleRun(mode, run));
        if (r) {
          result.runs.idle.push(r);
          say(`idle ${mode} run ${run}: RSS ${(r.rssKb / 1024).toFixed(1)} MB`);
        }
      }
      if (has('single')) {
        for (const connections of options.connections) {
          const r = await attempt(`single ${mode} c=${connections} run ${run}`, () => ingestRun(mode, 'single', 1, connections, run));
          if (!r) continue;
          result.runs.single.push(r);
          say(
            `single ${mode} c=${connections} run ${run}: ${fmtRate(r.requestsPerSec)}, p50 ${r.latencyMs.p50?.toFixed(2)} ms, p99 ${r.latencyMs.p99?.toFixed(2)} ms`,
          );
        }
      }
      if (has('batch')) {
        for (const size of options.batches) {
          const r = await attempt(`batch ${mode} ${size} run ${run}`, () => ingestRun(mode, 'batch', size, options.batchConnections, run));
          if (!r) continue;
          result.runs.batch.push(r);
          say(`batch ${mode} ${size} run ${run}: ${fmtRate(r.readingsPerSec)} readings, p99 ${r.latencyMs.p99?.toFixed(2)} ms`);
        }
      }
    }
  }
  if (has('e2e')) for (const mode of options.modes) result.runs.e2e.push(await e2eScenario(mode));
  if (has('drain')) {
    for (let run = 1; run <= options.runs; run++) {
      for (const mode of options.modes) {
        const r = await attempt(`drain ${mode} run ${run}`, () => drainRun(mode, run));
        if (!r) continue;
        result.runs.drain.push(r);
        say(`drain ${mode} run ${run}: ${fmtRate(r.flushedReadingsPerSec)} flushed, ${fmtRate(r.queryableReadingsPerSec)} queryable`);
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
const markdown = renderMarkdown(result, summary);
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
