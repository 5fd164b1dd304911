// A quiet gateway's cost: `npm run bench:idle [-- --runs 3 --settle 20 --window 60 --bundle PATH --parts off,on]`.
// QuestDB runs beside it; each run starts the gateway with its shipped settings on a fresh data
// directory, sends one reading (so the table is set up and one delivery went out), waits `--settle`
// seconds, then measures `--window` seconds of doing nothing: CPU time (utime + stime of all
// threads, as a share of one core), wake-ups (voluntary context switches) per thread, and at the
// end resident, peak resident (VmHWM) and private memory (RssAnon), the V8 heaps of both threads
// and the process's mappings grouped. `--bundle` adds another build, run alternately with this one
// (its runs first in odd runs), with `--bundle-env NAME=VALUE` added to its environment only.
// `--parts` measures each build in each of the settings it lists (comma-separated, alternately):
// `off`, a plain site gateway (local QuestDB, HTTP and HTTPS ingest, CONSOLE=off), each optional
// part alone on top of it (`console`, `mqtt`, `catalogue`, `kafka`, `fleet-report`), or `on`, all of
// them; without it the shipped settings alone. Kafka's parts start a broker beside QuestDB.
// Prints a Markdown table of medians (min–max) with the load average at start and end.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createKafkaTopic, startKafka } from '../scripts/lib/kafka.mjs';
import { sampleProcess } from '../scripts/lib/proc.mjs';
import { median } from '../scripts/lib/stats.mjs';
import { startBenchGateway } from './lib/gateway.mjs';
import { sleep, waitFor } from './lib/harness.mjs';
import { envPairs, loadAverage, standaloneBench } from './lib/standalone.mjs';

const { values: args } = parseArgs({
  options: {
    runs: { type: 'string', default: '3' },
    settle: { type: 'string', default: '20' },
    window: { type: 'string', default: '60' },
    bundle: { type: 'string' },
    env: { type: 'string', multiple: true, default: [] },
    'bundle-env': { type: 'string', multiple: true, default: [] },
    parts: { type: 'string', multiple: true, default: [] },
  },
});
const runs = Number(args.runs);
const settleS = Number(args.settle);
const windowS = Number(args.window);
const load = loadAverage;
/** The optional parts `--parts` may name, each on top of a plain site gateway (checked before QuestDB starts). */
const PART_NAMES = ['console', 'mqtt', 'catalogue', 'kafka', 'fleet-report'];
const settings = args.parts.flatMap((list) => list.split(',')).filter((name) => name !== '');
for (const name of settings)
  if (name !== 'off' && name !== 'on' && !PART_NAMES.includes(name))
    throw new Error(`--parts ${name}: not one of off, on, ${PART_NAMES.join(', ')}`);
const { builds, extraEnv, workDir, apiKey, loadAtStart, questdb } = await standaloneBench('idle-', args);
// The other build's environment as its release shipped it (`GLIBC_TUNABLES=` for one from before the malloc setting).
const bundleEnv = envPairs(args['bundle-env']);

const kafkaTopic = `idle_${randomBytes(4).toString('hex')}`;
/** A broker for the settings with a Kafka sink; QuestDB stopped again when it cannot be had. */
async function kafkaWhenNeeded() {
  if (!settings.some((name) => name === 'kafka' || name === 'on')) return undefined;
  const broker = await startKafka().catch(async (/** @type {unknown} */ error) => {
    await questdb.stop();
    throw error;
  });
  await createKafkaTopic(broker.bootstrap, kafkaTopic).catch(async (/** @type {unknown} */ error) => {
    await Promise.all([broker.close(), questdb.stop()]);
    throw error;
  });
  return broker;
}
const kafka = await kafkaWhenNeeded();
const catalogueFile = join(workDir, 'catalogue.yaml');
writeFileSync(catalogueFile, 'ships:\n  ship-000: MV Idle\ncargo:\n  - match: temp*\n    name: Temperature\n    unit: °C\n');

/** The environment of one optional part when on. @param {string} part @returns {Record<string, string>} */
function partEnv(part) {
  switch (part) {
    case 'console':
      return { CONSOLE: 'on' };
    case 'mqtt':
      return { MQTT: 'on', MQTT_PORT: '0', MQTT_TLS_PORT: '0' };
    case 'catalogue':
      return { CATALOGUE_FILE: catalogueFile };
    case 'kafka':
      return { KAFKA_BROKERS: kafka?.bootstrap ?? '', KAFKA_TOPIC: kafkaTopic };
    default:
      // The site's report goes to the centre it forwards to: a remote QuestDB sink (here the same QuestDB).
      return {
        HEALTH_REPORT: 'true',
        REMOTE_QUESTDB_URL: questdb.httpUrl,
        REMOTE_QUESTDB_TABLE: `idle_remote_${randomBytes(4).toString('hex')}`,
      };
  }
}

/** A setting of `--parts` as an environment. @param {string} name @returns {Record<string, string>} */
const settingEnv = (name) => Object.assign({ CONSOLE: 'off' }, ...(name === 'on' ? PART_NAMES : name === 'off' ? [] : [name]).map(partEnv));

/** What is measured: each build in each setting. */
const targets = builds.flatMap((build) =>
  settings.length === 0
    ? [{ ...build, env: {} }]
    : settings.map((name) => ({ name: `${build.name}, parts ${name}`, bundle: build.bundle, env: settingEnv(name) })),
);

/**
 * Voluntary context switches (the thread slept and was woken), CPU ticks and run time in ns (from
 * `schedstat`, which resolves what a tick of 10 ms cannot) per thread. @param {number} pid
 */
function wakeUps(pid) {
  /** @type {Record<string, number>} */
  const byName = {};
  /** @type {Record<string, number>} */
  const ticks = {};
  /** @type {Record<string, number>} */
  const runNs = {};
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      // Worker, libuv and V8 threads are all called "node": the main thread apart, the rest together.
      const name = tid === String(pid) ? 'main thread' : 'other threads';
      const switches = Number(/voluntary_ctxt_switches:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/task/${tid}/status`, 'utf8'))?.[1]);
      byName[name] = (byName[name] ?? 0) + switches;
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks[name] = (ticks[name] ?? 0) + Number(fields[11]) + Number(fields[12]);
      const ns = Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
      runNs[name] = (runNs[name] ?? 0) + ns;
    } catch {
      // The thread ended between the listing and the read.
    }
  }
  return { byName, ticks, runNs };
}

/** Private resident kB of the process's mappings, grouped: heap-like anonymous, node's binary, libraries, the rest. @param {number} pid */
function mappings(pid) {
  /** @type {Record<string, number>} */
  const groups = {};
  let name = '';
  for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const head = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (head) {
      const path = head[1] ?? '';
      name =
        path === ''
          ? 'anonymous'
          : path.startsWith('[')
            ? path
            : path.endsWith('/node')
              ? 'node binary'
              : path.includes('better_sqlite3')
                ? 'better_sqlite3.node'
                : 'other files';
      continue;
    }
    const anon = /^Anonymous:\s+(\d+) kB/.exec(line);
    if (anon) groups[name] = (groups[name] ?? 0) + Number(anon[1]);
  }
  return groups;
}

/** @param {{ name: string, bundle: string, env: Record<string, string> }} build */
async function idleRun(build) {
  const dataDir = mkdtempSync(join(workDir, 'gateway-'));
  const gateway = await startBenchGateway({
    bundle: build.bundle,
    apiKey,
    env: {
      DATA_DIR: dataDir,
      QUESTDB_URL: questdb.httpUrl,
      QUESTDB_TABLE: `idle_${randomBytes(4).toString('hex')}`,
      ...build.env,
      ...extraEnv,
      ...(build.bundle === args.bundle ? bundleEnv : {}),
    },
  });
  try {
    const response = await fetch(`${gateway.url}/api/v2/ingest/`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-API-Key': apiKey },
      body: JSON.stringify({ time: new Date().toISOString(), ship_id: 'ship-000', cargo_id: 'temperature', value: 21.5 }),
    });
    if (!response.ok) throw new Error(`the reading was refused: ${response.status}`);
    // Delivered by every sink (Kafka's and the remote QuestDB's too, when on).
    const delivered = async () => {
      const status = await gateway.status();
      return status.totals.flushedReadings >= 1 && (status.sinks ?? []).every((sink) => sink.backlog === 0);
    };
    if (!(await waitFor(delivered, 30_000))) throw new Error('the reading was not delivered by every sink within 30 s');
    await sleep(settleS * 1000);
    const before = sampleProcess(gateway.pid);
    const wokeBefore = wakeUps(gateway.pid);
    await sleep(windowS * 1000);
    const after = sampleProcess(gateway.pid);
    const wokeAfter = wakeUps(gateway.pid);
    const { memory } = await gateway.status();
    /** @type {Record<string, number>} */
    const woke = {};
    for (const [thread, n] of Object.entries(wokeAfter.byName)) woke[thread] = (n - (wokeBefore.byName[thread] ?? 0)) / windowS;
    /** @type {Record<string, number>} */
    const ticks = {};
    for (const [thread, n] of Object.entries(wokeAfter.ticks)) {
      const used = n - (wokeBefore.ticks[thread] ?? 0);
      if (used > 0) ticks[thread] = used;
    }
    /** @type {Record<string, number>} */
    const runMs = {};
    for (const [thread, ns] of Object.entries(wokeAfter.runNs)) runMs[thread] = (ns - (wokeBefore.runNs[thread] ?? 0)) / 1e6;
    return {
      cpuShare: (after.cpuSeconds - before.cpuSeconds) / windowS,
      runShare: Object.values(runMs).reduce((a, b) => a + b, 0) / 1000 / windowS,
      runMs,
      rssMb: after.rssKb / 1024,
      anonMb: after.anonKb / 1024,
      hwmMb: after.hwmKb / 1024,
      ingestHeapMb: (memory.heapTotalBytes ?? 0) / 2 ** 20,
      ingestHeapUsedMb: memory.heapUsedBytes / 2 ** 20,
      deliveryHeapMb: (memory.deliveryHeapTotalBytes ?? 0) / 2 ** 20,
      deliveryHeapUsedMb: (memory.deliveryHeapUsedBytes ?? 0) / 2 ** 20,
      woke,
      ticks,
      mappingsMb: Object.fromEntries(Object.entries(mappings(gateway.pid)).map(([k, v]) => [k, v / 1024])),
    };
  } finally {
    await gateway.stop('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/** @type {Map<string, Awaited<ReturnType<typeof idleRun>>[]>} */
const results = new Map(targets.map((b) => [b.name, []]));
try {
  for (let run = 1; run <= runs; run++) {
    const order = run % 2 === 1 ? targets : [...targets].reverse();
    for (const build of order) {
      const result = await idleRun(build);
      results.get(build.name)?.push(result);
      const woke = Object.entries(result.woke)
        .filter(([, n]) => n >= 0.05)
        .map(([t, n]) => `${t} ${n.toFixed(2)}`)
        .join(', ');
      process.stdout.write(
        `run ${run}, ${build.name}: CPU ${(result.cpuShare * 100).toFixed(3)} % of a core, RSS ${result.rssMb.toFixed(1)} MB, ` +
          `private ${result.anonMb.toFixed(1)} MB, heaps ${result.ingestHeapMb.toFixed(1)} + ${result.deliveryHeapMb.toFixed(1)} MB; wake-ups/s: ${woke}; ` +
          `CPU ticks by thread: ${JSON.stringify(result.ticks)}; run time ${(result.runShare * 100).toFixed(3)} % of a core, ms by thread: ` +
          `${Object.entries(result.runMs)
            .map(([t, ms]) => `${t} ${ms.toFixed(1)}`)
            .join(', ')}\n`,
      );
    }
  }
} finally {
  await kafka?.close();
  await questdb.stop();
  rmSync(workDir, { recursive: true, force: true });
}

/** @param {number[]} values @param {number} digits */
const cell = (values, digits) =>
  `${(median(values) ?? 0).toFixed(digits)} (${Math.min(...values).toFixed(digits)}–${Math.max(...values).toFixed(digits)})`;
const rows = [
  ['idle CPU, % of a core', (/** @type {any} */ r) => r.cpuShare * 100, 3],
  ["idle CPU by threads' run time, % of a core", (/** @type {any} */ r) => r.runShare * 100, 3],
  ["main thread's run time, ms", (/** @type {any} */ r) => r.runMs['main thread'] ?? 0, 1],
  ["other threads' run time, ms", (/** @type {any} */ r) => r.runMs['other threads'] ?? 0, 1],
  ['RSS, MB', (/** @type {any} */ r) => r.rssMb, 1],
  ['private (RssAnon), MB', (/** @type {any} */ r) => r.anonMb, 1],
  ['peak RSS since start (VmHWM), MB', (/** @type {any} */ r) => r.hwmMb, 1],
  ['ingest thread heap, committed MB', (/** @type {any} */ r) => r.ingestHeapMb, 1],
  ['ingest thread heap, used MB', (/** @type {any} */ r) => r.ingestHeapUsedMb, 1],
  ['delivery thread heap, committed MB', (/** @type {any} */ r) => r.deliveryHeapMb, 1],
  ['delivery thread heap, used MB', (/** @type {any} */ r) => r.deliveryHeapUsedMb, 1],
  ['wake-ups per second, all threads', (/** @type {any} */ r) => Object.values(r.woke).reduce((a, b) => a + b, 0), 2],
];
process.stdout.write(
  `\nload average at start ${loadAtStart}, at end ${load()}; ${runs} runs, ${settleS} s settle, ${windowS} s measured\n\n`,
);
process.stdout.write(`| Figure | ${targets.map((b) => b.name).join(' | ')} |\n|---|${targets.map(() => '---:').join('|')}|\n`);
for (const [label, pick, digits] of rows)
  process.stdout.write(
    `| ${label} | ${targets.map((b) => cell((results.get(b.name) ?? []).map(/** @type {any} */ (pick)), /** @type {number} */ (digits))).join(' | ')} |\n`,
  );
for (const build of targets) {
  const list = results.get(build.name) ?? [];
  const threads = [...new Set(list.flatMap((r) => Object.keys(r.woke)))];
  const groups = [...new Set(list.flatMap((r) => Object.keys(r.mappingsMb)))];
  process.stdout.write(`\n${build.name}, wake-ups per second by thread (median): `);
  process.stdout.write(threads.map((t) => `${t} ${(median(list.map((r) => r.woke[t] ?? 0)) ?? 0).toFixed(2)}`).join(', '));
  process.stdout.write(`\n${build.name}, private memory by mapping, MB (median): `);
  process.stdout.write(`${groups.map((g) => `${g} ${(median(list.map((r) => r.mappingsMb[g] ?? 0)) ?? 0).toFixed(1)}`).join(', ')}\n`);
}
