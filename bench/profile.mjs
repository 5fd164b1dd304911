// Where single push (or with `--batch N` batch push) spends its CPU: `npm run bench:profile [-- options]` (builds the bundle first).
// Runs the built gateway under `node --cpu-prof` on CPU 0 beside QuestDB, drives single push with
// wrk from CPU 1, stops the gateway gracefully (so V8 writes a profile per thread) and prints the
// self time of the ingest thread by area and by function (located through the bundle's source
// map), and of the delivery thread by area. Keeps the .cpuprofile files (open them in Chrome's
// DevTools or speedscope) and a flame graph of each thread (ingest.svg, delivery.svg) under
// bench/results/profiles/<time>/.
// `--bundle PATH` profiles another build, located through the source map beside it: a release's,
// as the upgrade test builds them into ~/.cache/harbor-gateway/releases/ (0.4.0's among them).
// `--floor` profiles the HTTP floor instead (bench/lib/floor-server.mjs: the same requests, single or
// `--batch N`, a handler that only parses the body and answers), so that each area's µs a request
// can be set against the gateway's.
// `--mqtt` profiles MQTT instead: QoS 1 publishes of one reading (or `--batch 100`: harbor/v1/ingest)
// from bench/lib/mqtt-load.mjs on CPU 1, `--connections` clients (16 here) with `--window` publishes
// in flight each, the gateway with no sink reachable as in bench/mqtt.mjs; a "request" is a message.
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { randomBytes } from 'node:crypto';
import { projectRoot } from '../scripts/lib/paths.mjs';
import { threadCpuSeconds } from '../scripts/lib/proc.mjs';
import { startQuestDb } from '../scripts/lib/questdb.mjs';
import { writeLoadFile } from '../scripts/lib/readings.mjs';
import { monotonicUs, summarizeProfile } from './lib/cpu-profile.mjs';
import { flameGraph } from './lib/flame-graph.mjs';
import { startFloorServer } from './lib/floor-server.mjs';
import { startBenchGateway } from './lib/gateway.mjs';
import { ensureWrk, runWrk } from './lib/wrk.mjs';
import { pin } from './lib/harness.mjs';
import { MQTT_BATCH, mqttLoad } from './lib/mqtt-load.mjs';

const { values: args } = parseArgs({
  options: {
    bundle: { type: 'string', default: join(projectRoot, 'dist', 'gateway.mjs') },
    mode: { type: 'string', default: 'process-crash' },
    connections: { type: 'string' },
    mqtt: { type: 'boolean', default: false },
    window: { type: 'string', default: '32' },
    duration: { type: 'string', default: '10' },
    batch: { type: 'string' },
    floor: { type: 'boolean', default: false },
    top: { type: 'string', default: '25' },
    // More of Node's own options for the gateway (`--node-arg=--trace-gc`); what they print goes to node-output.txt.
    'node-arg': { type: 'string', multiple: true, default: [] },
    out: { type: 'string', default: join(projectRoot, 'bench', 'results', 'profiles') },
  },
});
const mqtt = args.mqtt === true;
const connections = Number(args.connections ?? (mqtt ? 16 : 64));
const durationS = Number(args.duration);

if (!mqtt) ensureWrk();
pin(process.pid, '1');
const stamp = new Date().toISOString().replace(/[:.]/g, '-');
const outDir = join(args.out, stamp);
mkdirSync(outDir, { recursive: true });
const work = join(projectRoot, 'bench', '.work', `profile-${stamp}`);
mkdirSync(work, { recursive: true });
// `--batch N`: batches of N readings to /api/v2/ingest/batch instead of single pushes.
const batch = args.batch === undefined ? undefined : Number(args.batch);
const kind = batch === undefined ? 'single' : 'batch';
const load = writeLoadFile(join(work, `${kind}.txt`), kind, batch ?? 1);
const apiKey = `bench-${randomBytes(16).toString('hex')}`;

const floor = args.floor === true;
if (floor && mqtt) throw new Error('--floor profiles HTTP only');
if (mqtt && batch !== undefined && batch !== MQTT_BATCH) throw new Error(`--mqtt batches are of ${MQTT_BATCH}`);
const questdb = floor || mqtt ? undefined : await startQuestDb({ dataDir: join(work, 'questdb') });
if (questdb !== undefined) pin(/** @type {number} */ (questdb.pid), '1');
/** The measured load's outcome: requests (MQTT: messages) answered, over how long, and their p99. */
let measured = { requests: 0, durationUs: 0, p99Us: 0 };
/** Requests (messages) accepted and the queue's commits since the start, warm-up included. */
let commits = { requests: 0, commits: 0 };
/** The measured window on V8's clock. */
const window = { fromUs: 0, toUs: 0 };
/** The gateway's threads' CPU in the window, from /proc: what the profiles do not show (libuv's pool, V8's helpers). */
const threads = { pid: '', before: new Map(), after: new Map() };
const profileArgs = ['--cpu-prof', `--cpu-prof-dir=${outDir}`, ...args['node-arg']];
try {
  const server = floor
    ? await startFloorServer({ cpus: '0', nodeArgs: profileArgs })
    : await startBenchGateway({
        bundle: args.bundle,
        apiKey,
        cpus: '0',
        nodeArgs: profileArgs,
        env: {
          DATA_DIR: join(work, 'data'),
          DURABILITY: args.mode,
          ...(mqtt
            ? // As bench/mqtt.mjs: no sink reachable, so what is profiled is ingest up to the commit.
              { MQTT: 'on', MQTT_PORT: '0', MQTT_TLS_PORT: '0', QUEUE_MAX_BYTES: '8GiB', QUESTDB_URL: 'http://127.0.0.1:9' }
            : {
                QUESTDB_URL: /** @type {NonNullable<typeof questdb>} */ (questdb).httpUrl,
                QUESTDB_TABLE: `profile_${randomBytes(3).toString('hex')}`,
              }),
        },
      });
  /** Drives the load for `seconds`. @param {number} seconds */
  const drive = async (seconds) => {
    if (mqtt && 'logs' in server) {
      const started = /** @type {{ address: string }} */ (server.logs.find((l) => l.event === 'mqtt_started'));
      const startedAt = performance.now();
      const result = await mqttLoad({
        port: Number(started.address.split(':').pop()),
        qos: 1,
        kind,
        connections,
        window: Number(args.window),
        durationMs: seconds * 1000,
        password: apiKey,
      });
      const durationUs = (performance.now() - startedAt) * 1000;
      return { requests: Math.round((result.messagesPerS * durationUs) / 1e6), durationUs, p99Us: (result.p99 ?? 0) * 1000 };
    }
    const result = await runWrk({
      url:
        'pid' in server
          ? `${server.url}/api/v2/ingest/${batch === undefined ? '' : 'batch'}`
          : batch === undefined
            ? server.url
            : server.batchUrl,
      threads: 2,
      connections,
      cpus: '1',
      durationS: seconds,
      env: { BENCH_KIND: kind, BENCH_FILE: load.path, BENCH_API_KEY: apiKey },
    });
    return { requests: result.requests, durationUs: result.durationUs, p99Us: result.latencyUs.p99 };
  };
  await drive(2);
  const pid = 'pid' in server ? server.pid : undefined;
  if (pid !== undefined) {
    threads.pid = String(pid);
    threads.before = threadCpuSeconds(pid);
  }
  window.fromUs = monotonicUs();
  measured = await drive(durationS);
  window.toUs = monotonicUs();
  if (pid !== undefined) threads.after = threadCpuSeconds(pid);
  if ('pid' in server) {
    const status = await server.status();
    commits = {
      requests: mqtt ? status.totals.acceptedReadings / (batch ?? 1) : status.totals.acceptedRequests,
      commits: status.queue.commits,
    };
    const exit = await server.stop('SIGTERM');
    // Lines that are not the gateway's JSON log are Node's own (what `--node-arg` asked it to print).
    const nodeLines = server.logs.filter((l) => Object.keys(l).length === 1 && typeof l.msg === 'string').map((l) => l.msg);
    if (nodeLines.length > 0) writeFileSync(join(outDir, 'node-output.txt'), `${nodeLines.join('\n')}\n`);
    if (exit.code !== 0) throw new Error(`the gateway exited with ${exit.code ?? exit.signal}`);
  } else {
    await server.stop();
  }
} finally {
  await questdb?.stop();
}

const files = readdirSync(outDir).filter((f) => f.endsWith('.cpuprofile'));
if (files.length === 0) throw new Error(`no CPU profile was written to ${outDir}`);
const pct = (/** @type {number} */ share) => `${(share * 100).toFixed(1)} %`;
const loadName = `${mqtt ? 'MQTT QoS 1, ' : ''}${batch === undefined ? (mqtt ? 'one reading a message' : 'single push') : `batches of ${batch}`}`;
const what = floor ? 'the HTTP floor' : args.mode;
const lines = [
  `${loadName[0]?.toUpperCase()}${loadName.slice(1)}, ${what}, ${connections} connections, ${durationS} s measured (after 2 s of warm-up; only the measured seconds are profiled): ` +
    `${Math.round(measured.requests / (measured.durationUs / 1e6)).toLocaleString('en-US')} ${mqtt ? 'messages' : 'requests'}/s, p99 ${(measured.p99Us / 1000).toFixed(2)} ms` +
    (floor
      ? '.'
      : `; ${(commits.requests / Math.max(1, commits.commits)).toFixed(1)} ${mqtt ? 'messages' : 'requests'} a commit (${commits.commits.toLocaleString('en-US')} commits, warm-up included).`),
  '',
];
/** Self time for each request answered in the measured window, in µs: comparable between the floor and the gateway. */
const perRequest = (/** @type {number} */ ms) => ((ms * 1000) / Math.max(1, measured.requests)).toFixed(2);
/** @type {Record<string, unknown>} */
const summaries = {};
// Node names each thread's profile CPU.<date>.<time>.<pid>.<thread id>.<seq>.cpuprofile: thread 0 is ingest.
for (const file of files.sort()) {
  const main = file.split('.').at(-3) === '0';
  const thread = floor ? 'floor server' : main ? 'ingest thread' : 'delivery thread';
  const profile = JSON.parse(readFileSync(join(outDir, file), 'utf8'));
  const summary = summarizeProfile(profile, window);
  const title = `${thread}, ${loadName}, ${what}, ${connections} connections`;
  writeFileSync(join(outDir, `${thread.split(' ')[0]}.svg`), flameGraph(profile, { title, window }));
  summaries[file] = { thread, ...summary };
  lines.push(
    `#### ${thread}: ${Math.round(summary.busyMs).toLocaleString('en-US')} ms busy of ${Math.round(summary.wallMs).toLocaleString('en-US')} ms measured, ${perRequest(summary.busyMs)} µs a request (${file})`,
    '',
  );
  lines.push('| Area | Self time | µs a request | Share of busy |', '|---|---:|---:|---:|');
  for (const a of summary.areas.slice(0, 12)) lines.push(`| ${a.area} | ${Math.round(a.ms)} ms | ${perRequest(a.ms)} | ${pct(a.share)} |`);
  lines.push('');
  if (!main) continue;
  lines.push('| Function | Source | Self time | µs a request | Share of busy |', '|---|---|---:|---:|---:|');
  for (const f of summary.functions.slice(0, Number(args.top)))
    lines.push(`| \`${f.functionName}\` | ${f.source || f.area} | ${Math.round(f.ms)} ms | ${perRequest(f.ms)} | ${pct(f.share)} |`);
  lines.push('');
}
/** @type {{ thread: string, user: number, system: number }[]} */
const threadRows = [];
for (const [tid, end] of threads.after) {
  const start = threads.before.get(tid) ?? { user: 0, system: 0 };
  const main = tid === threads.pid;
  const row = { thread: main ? `${tid} (ingest)` : tid, user: end.user - start.user, system: end.system - start.system };
  if (main) threadRows.unshift(row);
  else if (row.user + row.system >= 0.01) threadRows.push(row);
}
if (threadRows.length > 0) {
  // Node names every thread "node": the main one is ingest; the delivery thread, libuv's pool and V8's helpers are the others.
  lines.push(`#### Each thread of the gateway in the window, from /proc (10 ms or more)`, '');
  lines.push('| Thread | user s | system s | µs a request |', '|---|---:|---:|---:|');
  for (const r of threadRows)
    lines.push(`| ${r.thread} | ${r.user.toFixed(2)} | ${r.system.toFixed(2)} | ${perRequest((r.user + r.system) * 1000)} |`);
  lines.push('');
}
const markdown = lines.join('\n');
writeFileSync(join(outDir, 'summary.md'), `${markdown}\n`);
writeFileSync(join(outDir, 'summary.json'), `${JSON.stringify({ args, measured, window, summaries, threads: threadRows }, null, 1)}\n`);
process.stdout.write(`${markdown}\nProfiles and summary: ${outDir}\n`);
