// Where single push (or with `--batch N` batch push) spends its CPU: `npm run bench:profile [-- options]` (builds the bundle first).
// Runs the built gateway under `node --cpu-prof` on CPU 0 beside QuestDB, drives single push with
// wrk from CPU 1, stops the gateway gracefully (so V8 writes a profile per thread) and prints the
// self time of the ingest thread by area and by function (located through the bundle's source
// map), and of the delivery thread by area. Keeps the .cpuprofile files (open them in Chrome's
// DevTools or speedscope) and a flame graph of each thread (ingest.svg, delivery.svg) under
// bench/results/profiles/<time>/.
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { randomBytes } from 'node:crypto';
import { projectRoot } from '../scripts/lib/paths.mjs';
import { startQuestDb } from '../scripts/lib/questdb.mjs';
import { writeLoadFile } from '../scripts/lib/readings.mjs';
import { monotonicUs, summarizeProfile } from './lib/cpu-profile.mjs';
import { flameGraph } from './lib/flame-graph.mjs';
import { startBenchGateway } from './lib/gateway.mjs';
import { ensureWrk, runWrk } from './lib/wrk.mjs';
import { pin } from './lib/harness.mjs';

const { values: args } = parseArgs({
  options: {
    bundle: { type: 'string', default: join(projectRoot, 'dist', 'gateway.mjs') },
    mode: { type: 'string', default: 'process-crash' },
    connections: { type: 'string', default: '64' },
    duration: { type: 'string', default: '10' },
    batch: { type: 'string' },
    top: { type: 'string', default: '25' },
    // More of Node's own options for the gateway (`--node-arg=--trace-gc`); what they print goes to node-output.txt.
    'node-arg': { type: 'string', multiple: true, default: [] },
    out: { type: 'string', default: join(projectRoot, 'bench', 'results', 'profiles') },
  },
});
const connections = Number(args.connections);
const durationS = Number(args.duration);

ensureWrk();
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

const questdb = await startQuestDb({ dataDir: join(work, 'questdb') });
pin(/** @type {number} */ (questdb.pid), '1');
let wrk;
/** Requests accepted and the queue's commits since the start, warm-up included. */
let commits = { requests: 0, commits: 0 };
/** The measured window on V8's clock. */
const window = { fromUs: 0, toUs: 0 };
try {
  const gateway = await startBenchGateway({
    bundle: args.bundle,
    apiKey,
    cpus: '0',
    nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${outDir}`, ...args['node-arg']],
    env: {
      DATA_DIR: join(work, 'data'),
      DURABILITY: args.mode,
      QUESTDB_URL: questdb.httpUrl,
      QUESTDB_TABLE: `profile_${randomBytes(3).toString('hex')}`,
    },
  });
  const run = {
    url: `${gateway.url}/api/v2/ingest/${batch === undefined ? '' : 'batch'}`,
    threads: 2,
    connections,
    cpus: '1',
    env: { BENCH_KIND: kind, BENCH_FILE: load.path, BENCH_API_KEY: apiKey },
  };
  await runWrk({ ...run, durationS: 2 });
  window.fromUs = monotonicUs();
  wrk = await runWrk({ ...run, durationS });
  window.toUs = monotonicUs();
  const status = await gateway.status();
  commits = { requests: status.totals.acceptedRequests, commits: status.queue.commits };
  const exit = await gateway.stop('SIGTERM');
  // Lines that are not the gateway's JSON log are Node's own (what `--node-arg` asked it to print).
  const nodeLines = gateway.logs.filter((l) => Object.keys(l).length === 1 && typeof l.msg === 'string').map((l) => l.msg);
  if (nodeLines.length > 0) writeFileSync(join(outDir, 'node-output.txt'), `${nodeLines.join('\n')}\n`);
  if (exit.code !== 0) throw new Error(`the gateway exited with ${exit.code ?? exit.signal}`);
} finally {
  await questdb.stop();
}

const files = readdirSync(outDir).filter((f) => f.endsWith('.cpuprofile'));
if (files.length === 0) throw new Error(`no CPU profile was written to ${outDir}`);
const pct = (/** @type {number} */ share) => `${(share * 100).toFixed(1)} %`;
const loadName = batch === undefined ? 'single push' : `batches of ${batch}`;
const lines = [
  `${loadName[0]?.toUpperCase()}${loadName.slice(1)}, ${args.mode}, ${connections} connections, ${durationS} s measured (after 2 s of warm-up; only the measured seconds are profiled): ` +
    `${Math.round(wrk.requests / (wrk.durationUs / 1e6)).toLocaleString('en-US')} requests/s, p99 ${(wrk.latencyUs.p99 / 1000).toFixed(2)} ms; ` +
    `${(commits.requests / Math.max(1, commits.commits)).toFixed(1)} requests a commit (${commits.commits.toLocaleString('en-US')} commits, warm-up included).`,
  '',
];
/** @type {Record<string, unknown>} */
const summaries = {};
// Node names each thread's profile CPU.<date>.<time>.<pid>.<thread id>.<seq>.cpuprofile: thread 0 is ingest.
for (const file of files.sort()) {
  const thread = file.split('.').at(-3) === '0' ? 'ingest thread' : 'delivery thread';
  const profile = JSON.parse(readFileSync(join(outDir, file), 'utf8'));
  const summary = summarizeProfile(profile, window);
  const title = `${thread}, ${loadName}, ${args.mode}, ${connections} connections`;
  writeFileSync(join(outDir, `${thread.split(' ')[0]}.svg`), flameGraph(profile, { title, window }));
  summaries[file] = { thread, ...summary };
  lines.push(
    `#### ${thread}: ${Math.round(summary.busyMs).toLocaleString('en-US')} ms busy of ${Math.round(summary.wallMs).toLocaleString('en-US')} ms measured (${file})`,
    '',
  );
  lines.push('| Area | Self time | Share of busy |', '|---|---:|---:|');
  for (const a of summary.areas.slice(0, 12)) lines.push(`| ${a.area} | ${Math.round(a.ms)} ms | ${pct(a.share)} |`);
  lines.push('');
  if (thread !== 'ingest thread') continue;
  lines.push('| Function | Source | Self time | Share of busy |', '|---|---|---:|---:|');
  for (const f of summary.functions.slice(0, Number(args.top)))
    lines.push(`| \`${f.functionName}\` | ${f.source || f.area} | ${Math.round(f.ms)} ms | ${pct(f.share)} |`);
  lines.push('');
}
const markdown = lines.join('\n');
writeFileSync(join(outDir, 'summary.md'), `${markdown}\n`);
writeFileSync(join(outDir, 'summary.json'), `${JSON.stringify({ args, wrk, summaries }, null, 1)}\n`);
process.stdout.write(`${markdown}\nProfiles and summary: ${outDir}\n`);
