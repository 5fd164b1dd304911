// MQTT benchmark: `npm run bench:mqtt [-- --runs N --duration S --modes LIST --loads LIST --bundle PATH]`.
// Builds the bundle, starts the gateway in each durability mode (MQTT on, no sink reachable: what
// is measured is ingest up to the commit, as the HTTP single and batch push figures are) and
// Debian's Mosquitto 2.0 (QoS 1 publishes, no subscriber), and drives them with the load generator
// of bench/lib/mqtt-load.mjs (many publishes in flight per connection). Loads (`--loads`, all by default):
//   - qos1-single, qos0-single: single readings (harbor/v1/{ship}/{cargo}, a number);
//   - qos1-batch, qos0-batch: batches of 100 (harbor/v1/ingest);
//   - http-single, http-batch: HTTP single and batch push from the same harness (keep-alive
//     connections), for the comparison.
// Each run loads Mosquitto and every gateway one after the other, in turns (the order reversed
// every other run), so a neighbour's load falls on all of them alike; a QoS 1 load's share of
// Mosquitto is the median of each run's gateway ÷ Mosquitto. Beside the rates: the gateway's CPU
// per million readings (every thread) and its ingest thread's CPU per message (Mosquitto's: its one
// thread), which a loaded machine distorts less than the rates. `--bundle PATH` loads another build too, in the same turns,
// and prints this build's ratio to it. Medians (min–max) over runs. Method and results: docs/benchmarks.md.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { startGatewayProcess } from '../scripts/lib/gateway-process.mjs';
import { startMosquitto } from '../scripts/lib/mosquitto.mjs';
import { projectRoot } from '../scripts/lib/paths.mjs';
import { cpuSeconds, threadCpuSeconds } from '../scripts/lib/proc.mjs';
import { percentile, summarize } from '../scripts/lib/stats.mjs';
import { MQTT_BATCH, mqttBatchPayload, mqttLoad, mqttSinglePayload } from './lib/mqtt-load.mjs';

const LOADS = ['qos1-single', 'qos0-single', 'http-single', 'qos1-batch', 'qos0-batch', 'http-batch'];
const { values: args } = parseArgs({
  options: {
    runs: { type: 'string', default: '3' },
    duration: { type: 'string', default: '8' },
    connections: { type: 'string', default: '16' },
    window: { type: 'string', default: '32' },
    modes: { type: 'string', default: 'process-crash,power-loss' },
    loads: { type: 'string', default: LOADS.join(',') },
    bundle: { type: 'string' },
  },
});
const RUNS = Number(args.runs);
const DURATION_MS = Number(args.duration) * 1000;
const CONNECTIONS = Number(args.connections);
const WINDOW = Number(args.window);
const KEY = 'bench-key-0123456789abcdef';
const loads = args.loads.split(',');
for (const load of loads) if (!LOADS.includes(load)) throw new Error(`--loads: ${load} is not one of ${LOADS.join(', ')}`);
const log = (/** @type {string} */ line) => process.stdout.write(`${line}\n`);
const loadAverage = () =>
  os
    .loadavg()
    .map((l) => l.toFixed(1))
    .join(' ');

/**
 * @typedef {{ messagesPerS: number, readingsPerS: number, p50: number | null, p99: number | null, cpu: number | undefined, ingestCpu?: number, readings: number }} LoadResult
 */

/** The same loads over HTTP: CONNECTIONS keep-alive connections, one request in flight on each. @param {string} url @param {'single' | 'batch'} kind @param {number} pid @returns {Promise<LoadResult>} */
async function httpLoad(url, kind, pid) {
  const pool = new Pool(url, { connections: CONNECTIONS });
  /** @type {number[]} */
  const latencies = [];
  let answered = 0;
  const deadline = Date.now() + DURATION_MS;
  const cpuBefore = cpuSeconds(pid) ?? 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async (_, conn) => {
      let i = 0;
      while (Date.now() < deadline) {
        const body =
          kind === 'single'
            ? JSON.stringify({ ship_id: `ship-${conn}`, cargo_id: `c${i % 8}`, value: Number(mqttSinglePayload(i)) })
            : mqttBatchPayload(i, conn);
        i += 1;
        const at = performance.now();
        const response = await pool.request({
          method: 'POST',
          path: kind === 'single' ? '/api/v2/ingest/' : '/api/v2/ingest/batch',
          headers: { 'x-api-key': KEY, 'content-type': 'application/json' },
          body,
        });
        await response.body.dump();
        if (response.statusCode === 200) {
          answered += 1;
          latencies.push(performance.now() - at);
        }
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  await pool.close();
  const readings = answered * (kind === 'batch' ? MQTT_BATCH : 1);
  return {
    messagesPerS: answered / seconds,
    readingsPerS: readings / seconds,
    p50: percentile(latencies, 50) ?? null,
    p99: percentile(latencies, 99) ?? null,
    cpu: (cpuSeconds(pid) ?? cpuBefore) - cpuBefore,
    readings,
  };
}

/** CPU seconds of a process's main thread (the gateway's ingest thread). @param {number} pid */
const mainThreadSeconds = (pid) => {
  const main = threadCpuSeconds(pid).get(String(pid));
  return main === undefined ? 0 : main.user + main.system;
};

/**
 * One load against one target.
 * @param {string} load
 * @param {{ port: number, url?: string, pid?: number, password?: string }} target
 * @returns {Promise<LoadResult>}
 */
async function measure(load, target) {
  const [protocol, kind] = /** @type {[string, 'single' | 'batch']} */ (load.split('-'));
  const before = target.pid === undefined ? 0 : mainThreadSeconds(target.pid);
  /** @type {LoadResult} */
  const result =
    protocol === 'http'
      ? await httpLoad(/** @type {string} */ (target.url), kind, /** @type {number} */ (target.pid))
      : await mqttLoad({
          port: target.port,
          qos: protocol === 'qos0' ? 0 : 1,
          kind,
          connections: CONNECTIONS,
          window: WINDOW,
          durationMs: DURATION_MS,
          password: target.password,
          pid: target.pid,
        });
  const messages = result.readings / (kind === 'batch' ? MQTT_BATCH : 1);
  if (target.pid !== undefined && messages > 0) result.ingestCpu = ((mainThreadSeconds(target.pid) - before) / messages) * 1e6;
  return result;
}

execFileSync(process.execPath, [join(projectRoot, 'build.mjs')], { stdio: 'inherit' });
const builds = [
  ...(args.bundle === undefined ? [] : [{ name: args.bundle, bundle: args.bundle }]),
  { name: 'this build', bundle: join(projectRoot, 'dist', 'gateway.mjs') },
];
const modes = args.modes.split(',');
/** @type {{ name: string, mode: string, build: string, port: number, url: string, pid: number, stop: () => Promise<void> }[]} */
const gateways = [];
const broker = loads.some((l) => l.startsWith('qos1')) ? await startMosquitto() : undefined;
const loadAtStart = loadAverage();
/** Results by load, then by target name, one per run. @type {Map<string, Map<string, LoadResult[]>>} */
const results = new Map(loads.map((l) => [l, new Map()]));
try {
  for (const build of builds) {
    for (const mode of modes) {
      const dataDir = mkdtempSync(join(projectRoot, 'bench', '.work-mqtt-'));
      const gateway = await startGatewayProcess({
        bundle: build.bundle,
        env: {
          API_KEY: KEY,
          DATA_DIR: dataDir,
          DURABILITY: mode,
          MQTT: 'on',
          MQTT_PORT: '0',
          MQTT_TLS_PORT: '0',
          QUEUE_MAX_BYTES: '8GiB',
          QUESTDB_URL: 'http://127.0.0.1:9',
          HEALTH_REPORT: 'false',
        },
        timeoutMs: 30_000,
      });
      const started = /** @type {{ address: string }} */ (gateway.logs.find((l) => l.event === 'mqtt_started'));
      gateways.push({
        name: builds.length > 1 ? `${mode}, ${build.name}` : mode,
        mode,
        build: build.name,
        port: Number(started.address.split(':').pop()),
        url: gateway.url,
        pid: /** @type {number} */ (gateway.child.pid),
        stop: async () => {
          gateway.child.kill('SIGKILL');
          await gateway.exited;
          rmSync(dataDir, { recursive: true, force: true });
        },
      });
    }
  }
  log(`# MQTT benchmark, ${new Date().toISOString()}`);
  log(`${os.cpus().length} × ${os.cpus()[0]?.model}, Node ${process.version}, load average at start ${loadAtStart}`);
  log(
    `${RUNS} runs of ${DURATION_MS / 1000} s, ${CONNECTIONS} connections, ${WINDOW} QoS 1 publishes in flight each, batches of ${MQTT_BATCH}; ` +
      `builds: ${builds.map((b) => b.name).join(', ')}\n`,
  );
  for (let run = 1; run <= RUNS; run++) {
    for (const load of loads) {
      /** @type {{ name: string, port: number, url?: string, pid?: number, password?: string }[]} */
      const targets = [
        ...(load.startsWith('qos1') && broker !== undefined ? [{ name: 'Mosquitto', port: broker.port, pid: broker.pid() }] : []),
        ...gateways.map((g) => ({ ...g, password: KEY })),
      ];
      for (const target of run % 2 === 1 ? targets : targets.reverse()) {
        const result = await measure(load, target);
        results.get(load)?.set(target.name, [...(results.get(load)?.get(target.name) ?? []), result]);
        log(
          `run ${run}, ${load}, ${target.name}: ${Math.round(result.messagesPerS).toLocaleString('en')} messages/s` +
            (result.ingestCpu === undefined ? '' : `, ingest thread ${result.ingestCpu.toFixed(2)} µs a message`) +
            `; load average ${loadAverage()}`,
        );
      }
    }
  }
} finally {
  for (const gateway of gateways) await gateway.stop();
  await broker?.stop();
}

const fmt = (/** @type {{ median: number | null, min: number | null, max: number | null }} */ s, digits = 0) =>
  s.median === null
    ? '–'
    : `${s.median.toLocaleString('en', { maximumFractionDigits: digits })} (${(s.min ?? 0).toLocaleString('en', { maximumFractionDigits: digits })}–${(s.max ?? 0).toLocaleString('en', { maximumFractionDigits: digits })})`;
/** Each run's `a ÷ b`, summarized. @param {LoadResult[]} a @param {LoadResult[] | undefined} b */
const ratios = (a, b) => summarize(a.map((r, i) => (b?.[i] === undefined ? null : r.messagesPerS / b[i].messagesPerS)));
const reference = builds.length > 1 ? builds[0]?.name : undefined;

log(`\nload average at start ${loadAtStart}, at end ${loadAverage()}\n`);
log(
  '| Load | Target | Messages/s | Readings/s | p50 ms | p99 ms | CPU s per million readings | Main (ingest) thread µs a message | Share of Mosquitto, same run |' +
    (reference === undefined ? '' : ' Ratio to the other build, same run |'),
);
log(`|---|---|---:|---:|---:|---:|---:|---:|---:|${reference === undefined ? '' : '---:|'}`);
for (const [load, byTarget] of results) {
  for (const [name, list] of byTarget) {
    const gateway = gateways.find((g) => g.name === name);
    const other =
      gateway === undefined || reference === undefined ? undefined : gateways.find((g) => g.mode === gateway.mode && g.build === reference);
    const cells = [
      load,
      name,
      fmt(summarize(list.map((r) => r.messagesPerS))),
      fmt(summarize(list.map((r) => r.readingsPerS))),
      fmt(summarize(list.map((r) => r.p50)), 2),
      fmt(summarize(list.map((r) => r.p99)), 2),
      fmt(summarize(list.map((r) => (r.cpu === undefined || r.readings === 0 ? null : (r.cpu / r.readings) * 1e6))), 1),
      fmt(summarize(list.map((r) => r.ingestCpu ?? null)), 2),
      gateway !== undefined && byTarget.has('Mosquitto') ? fmt(ratios(list, byTarget.get('Mosquitto')), 2) : '–',
      ...(reference === undefined ? [] : [other === undefined || other === gateway ? '–' : fmt(ratios(list, byTarget.get(other.name)), 2)]),
    ];
    log(`| ${cells.join(' | ')} |`);
  }
}
