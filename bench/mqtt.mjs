// MQTT benchmark: `npm run bench:mqtt [-- --runs N --duration S --modes LIST]`. Builds the bundle,
// starts the gateway (MQTT on, no sink reachable: what is measured is ingest up to the commit, as
// the HTTP single and batch push figures are), and drives it with a load generator of its own on
// mqtt-packet (many publishes in flight per connection) for:
//   - QoS 0 and QoS 1, single readings (harbor/v1/{ship}/{cargo}, a number) and batches of 100
//     (harbor/v1/ingest): messages and readings per second, p50/p99 PUBACK latency, gateway CPU
//     seconds per million readings;
//   - HTTP single and batch push from the same machine and harness (keep-alive connections), for
//     the comparison;
//   - Mosquitto (Debian's, QoS 1 publishes, no subscriber, no persistence) with the same generator:
//     the ceiling of MQTT on this machine.
// Medians over runs, in both durability modes. Method and results: docs/benchmarks.md.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import os from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { generate, parser as packetParser } from 'mqtt-packet';
import { Pool } from 'undici';
import { startGatewayProcess } from '../scripts/lib/gateway-process.mjs';
import { startMosquitto } from '../scripts/lib/mosquitto.mjs';
import { projectRoot } from '../scripts/lib/paths.mjs';
import { cpuSeconds } from '../scripts/lib/proc.mjs';
import { percentile, summarize } from '../scripts/lib/stats.mjs';

const { values: args } = parseArgs({
  options: {
    runs: { type: 'string', default: '3' },
    duration: { type: 'string', default: '8' },
    connections: { type: 'string', default: '16' },
    window: { type: 'string', default: '32' },
    modes: { type: 'string', default: 'process-crash,power-loss' },
  },
});
const RUNS = Number(args.runs);
const DURATION_MS = Number(args.duration) * 1000;
const CONNECTIONS = Number(args.connections);
const WINDOW = Number(args.window);
const BATCH = 100;
const KEY = 'bench-key-0123456789abcdef';
const log = (/** @type {string} */ line) => process.stdout.write(`${line}\n`);

/** @param {number} i */
const singlePayload = (i) => String((i % 1000) / 10);
/** @param {number} i @param {number} conn */
const batchPayload = (i, conn) =>
  JSON.stringify(Array.from({ length: BATCH }, (_, j) => ({ ship_id: `ship-${conn}`, cargo_id: `c${j}`, value: i + j / 100 })));

/**
 * One run of the MQTT load: `CONNECTIONS` clients, each keeping `WINDOW` QoS 1 publishes in flight
 * (QoS 0: writing as fast as the socket drains), for DURATION_MS.
 * @param {{ port: number, qos: 0 | 1, kind: 'single' | 'batch', password?: string, pid?: number }} target
 */
async function mqttLoad(target) {
  /** @type {number[]} */
  const latencies = [];
  let acked = 0;
  let sent = 0;
  const deadline = Date.now() + DURATION_MS;
  const client = (/** @type {number} */ conn) =>
    new Promise((resolve, reject) => {
      const socket = connect(target.port, '127.0.0.1');
      socket.setNoDelay(true);
      const parser = packetParser({ protocolVersion: 4 });
      /** @type {Map<number, number>} */
      const started = new Map();
      let nextId = 1;
      let done = false;
      const pump = () => {
        while (!done && (target.qos === 0 ? socket.writableLength < 64 * 1024 : started.size < WINDOW)) {
          if (Date.now() > deadline) {
            done = true;
            if (target.qos === 0 || started.size === 0) socket.end(generate({ cmd: 'disconnect' }));
            return;
          }
          const id = nextId;
          nextId = (nextId % 65535) + 1;
          const topic = target.kind === 'single' ? `harbor/v1/ship-${conn}/c${sent % 8}` : 'harbor/v1/ingest';
          const payload = target.kind === 'single' ? singlePayload(sent) : batchPayload(sent, conn);
          sent += 1;
          if (target.qos === 1) started.set(id, performance.now());
          socket.write(generate({ cmd: 'publish', topic, payload, qos: target.qos, messageId: id, dup: false, retain: false }));
        }
      };
      parser.on('packet', (packet) => {
        if (packet.cmd === 'connack') {
          if (packet.returnCode !== 0) reject(new Error(`CONNACK ${packet.returnCode}`));
          else pump();
        } else if (packet.cmd === 'puback') {
          const at = started.get(packet.messageId ?? 0);
          started.delete(packet.messageId ?? 0);
          if (at !== undefined && !done) {
            latencies.push(performance.now() - at);
            acked += 1;
          }
          if (done && started.size === 0) socket.end(generate({ cmd: 'disconnect' }));
          else pump();
        }
      });
      socket.on('data', (chunk) => parser.parse(chunk));
      socket.on('drain', pump);
      socket.on('error', (error) => reject(new Error(`connection ${conn} (sent ${sent}, done ${done}): ${error.message}`)));
      socket.on('close', resolve);
      socket.write(
        generate({
          cmd: 'connect',
          protocolId: 'MQTT',
          protocolVersion: 4,
          clientId: `bench-${conn}-${process.pid}`,
          clean: true,
          keepalive: 60,
          username: `bench-${conn}`,
          ...(target.password === undefined ? {} : { password: Buffer.from(target.password) }),
        }),
      );
    });
  const cpuBefore = target.pid === undefined ? undefined : cpuSeconds(target.pid);
  const t0 = performance.now();
  await Promise.all(Array.from({ length: CONNECTIONS }, (_, conn) => client(conn)));
  const seconds = (performance.now() - t0) / 1000;
  const cpu = target.pid === undefined || cpuBefore === undefined ? undefined : (cpuSeconds(target.pid) ?? cpuBefore) - cpuBefore;
  const messages = target.qos === 1 ? acked : sent;
  return {
    messagesPerS: messages / seconds,
    readingsPerS: (messages * (target.kind === 'batch' ? BATCH : 1)) / seconds,
    p50: percentile(latencies, 50) ?? null,
    p99: percentile(latencies, 99) ?? null,
    cpu,
    readings: messages * (target.kind === 'batch' ? BATCH : 1),
  };
}

/** The same loads over HTTP: CONNECTIONS keep-alive connections, one request in flight on each. @param {string} url @param {'single' | 'batch'} kind @param {number} pid */
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
            ? JSON.stringify({ ship_id: `ship-${conn}`, cargo_id: `c${i % 8}`, value: Number(singlePayload(i)) })
            : batchPayload(i, conn);
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
  const readings = answered * (kind === 'batch' ? BATCH : 1);
  return {
    messagesPerS: answered / seconds,
    readingsPerS: readings / seconds,
    p50: percentile(latencies, 50) ?? null,
    p99: percentile(latencies, 99) ?? null,
    cpu: (cpuSeconds(pid) ?? cpuBefore) - cpuBefore,
    readings,
  };
}

execFileSync(process.execPath, [join(projectRoot, 'build.mjs')], { stdio: 'inherit' });
const bundle = join(projectRoot, 'dist', 'gateway.mjs');
log(`# MQTT benchmark, ${new Date().toISOString()}`);
log(
  `${os.cpus().length} × ${os.cpus()[0]?.model}, Node ${process.version}, load average at start ${os
    .loadavg()
    .map((l) => l.toFixed(1))
    .join(' ')}`,
);
log(`${RUNS} runs of ${DURATION_MS / 1000} s, ${CONNECTIONS} connections, ${WINDOW} QoS 1 publishes in flight each, batches of ${BATCH}\n`);
log('| Mode | Protocol | Load | Messages/s | Readings/s | p50 ms | p99 ms | Gateway CPU s per million readings |');
log('|---|---|---|---:|---:|---:|---:|---:|');
const fmt = (/** @type {{ median: number | null, min: number | null, max: number | null }} */ s, digits = 0) =>
  s.median === null
    ? '–'
    : `${s.median.toLocaleString('en', { maximumFractionDigits: digits })} (${(s.min ?? 0).toLocaleString('en', { maximumFractionDigits: digits })}–${(s.max ?? 0).toLocaleString('en', { maximumFractionDigits: digits })})`;
/** @param {string} mode @param {string} protocol @param {string} load @param {Awaited<ReturnType<typeof mqttLoad>>[]} results */
const row = (mode, protocol, load, results) =>
  log(
    `| ${mode} | ${protocol} | ${load} | ${fmt(summarize(results.map((r) => r.messagesPerS)))} | ${fmt(summarize(results.map((r) => r.readingsPerS)))} | ${fmt(summarize(results.map((r) => r.p50)), 2)} | ${fmt(summarize(results.map((r) => r.p99)), 2)} | ${fmt(summarize(results.map((r) => (r.cpu === undefined || r.readings === 0 ? null : (r.cpu / r.readings) * 1e6))), 1)} |`,
  );

for (const mode of args.modes.split(',')) {
  const dataDir = mkdtempSync(join(projectRoot, 'bench', '.work-mqtt-'));
  const gateway = await startGatewayProcess({
    bundle,
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
  const port = Number(started.address.split(':').pop());
  try {
    for (const kind of /** @type {const} */ (['single', 'batch'])) {
      for (const qos of /** @type {const} */ ([0, 1])) {
        const results = [];
        for (let r = 0; r < RUNS; r++) results.push(await mqttLoad({ port, qos, kind, password: KEY, pid: gateway.pid }));
        row(mode, `MQTT QoS ${qos}`, kind === 'single' ? 'one reading a message' : `${BATCH} readings a message`, results);
      }
      const http = [];
      for (let r = 0; r < RUNS; r++) http.push(await httpLoad(gateway.url, kind, gateway.pid));
      row(mode, 'HTTP', kind === 'single' ? 'one reading a request' : `${BATCH} readings a request`, http);
    }
  } finally {
    gateway.child.kill('SIGKILL');
    await gateway.exited;
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const broker = await startMosquitto();
try {
  for (const kind of /** @type {const} */ (['single', 'batch'])) {
    const results = [];
    for (let r = 0; r < RUNS; r++) results.push(await mqttLoad({ port: broker.port, qos: 1, kind }));
    row('–', 'Mosquitto 2.0 QoS 1 (ceiling)', kind === 'single' ? 'one reading a message' : `${BATCH} readings a message`, results);
  }
} finally {
  await broker.stop();
}
log(
  `\nload average at end ${os
    .loadavg()
    .map((l) => l.toFixed(1))
    .join(' ')}`,
);
