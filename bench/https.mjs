// What TLS costs the single push: wrk against the gateway over plain HTTP and over HTTPS with
// keep-alive, and with a new connection per request (Connection: close), as the Arduino/ESP32 SDK
// connects, where every request pays a full handshake.
//   npm run bench:https [-- --runs N --duration S --connections C]   medians of runs
// The gateway runs on CPU 0 with DURABILITY=process-crash and no QuestDB (readings stay queued),
// so the figures are the transport's and the ingest path's, not the disk's; wrk runs on CPU 1.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../scripts/lib/ports.mjs';
import { projectRoot } from '../scripts/lib/paths.mjs';
import { startBenchGateway } from './lib/gateway.mjs';
import { writeLoadFile } from '../scripts/lib/readings.mjs';
import { median } from '../scripts/lib/stats.mjs';
import { parseLoadArgs } from './lib/options.mjs';
import { ensureWrk, runWrk } from './lib/wrk.mjs';

const { runs, durationS, connections } = parseLoadArgs(3);
const API_KEY = 'bench-key-0123456789';

const wrkVersion = ensureWrk();
const work = mkdtempSync(join(tmpdir(), 'harbor-bench-https-'));
const load = writeLoadFile(join(work, 'single.txt'), 'single', 1);
const gateway = await startBenchGateway({
  bundle: join(projectRoot, 'dist', 'gateway.mjs'),
  apiKey: API_KEY,
  cpus: '0',
  env: {
    DATA_DIR: join(work, 'data'),
    DURABILITY: 'process-crash',
    QUESTDB_URL: `http://127.0.0.1:${await freePort()}`,
    HEALTH_REPORT: 'false',
  },
}).catch((error) => {
  rmSync(work, { recursive: true, force: true });
  throw error;
});
const started = gateway.logs.find((line) => line.event === 'started');
const port = new URL(gateway.url).port;
const httpsPort = String(started?.httpsAddress).split(':').pop();

const scenarios = [
  { name: 'HTTP, keep-alive', url: `http://127.0.0.1:${port}/api/v2/ingest/`, headers: [] },
  { name: 'HTTPS, keep-alive', url: `https://127.0.0.1:${httpsPort}/api/v2/ingest/`, headers: [] },
  { name: 'HTTP, new connection per request', url: `http://127.0.0.1:${port}/api/v2/ingest/`, headers: ['Connection: close'] },
  {
    name: 'HTTPS, new connection per request (a handshake each)',
    url: `https://127.0.0.1:${httpsPort}/api/v2/ingest/`,
    headers: ['Connection: close'],
  },
];
const env = { BENCH_KIND: 'single', BENCH_FILE: load.path, BENCH_API_KEY: API_KEY };
const rows = [];
try {
  for (const scenario of scenarios) {
    // A short warm-up: the JIT, the session caches, the queue's first pages.
    await runWrk({ url: scenario.url, headers: scenario.headers, threads: 2, connections, durationS: 2, cpus: '1', env });
    const rates = [];
    const p99s = [];
    let errors = 0;
    for (let run = 1; run <= runs; run++) {
      const result = await runWrk({ url: scenario.url, headers: scenario.headers, threads: 2, connections, durationS, cpus: '1', env });
      rates.push(result.requests / (result.durationUs / 1e6));
      p99s.push(result.latencyUs.p99 / 1000);
      errors += Object.values(result.errors).reduce((sum, n) => sum + n, 0);
    }
    const row = { name: scenario.name, rate: Math.round(median(rates) ?? 0), p99: (median(p99s) ?? 0).toFixed(2), errors };
    rows.push(row);
    process.stdout.write(`${row.name}: ${row.rate} requests/s, p99 ${row.p99} ms, wrk errors ${row.errors}\n`);
  }
  process.stdout.write(
    [
      '',
      `${wrkVersion}, ${connections} connections, ${runs} run(s) of ${durationS} s, medians:`,
      '',
      '| single push | requests/s | p99 (ms) | wrk errors |',
      '|---|---:|---:|---:|',
      ...rows.map((row) => `| ${row.name} | ${row.rate} | ${row.p99} | ${row.errors} |`),
      '',
    ].join('\n'),
  );
} finally {
  await gateway.stop('SIGTERM');
  rmSync(work, { recursive: true, force: true });
}
