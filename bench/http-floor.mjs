// The ceiling of single push on this machine: the same wrk load as `npm run bench` against a Hono
// app on @hono/node-server whose handler only reads the body and answers the gateway's JSON, no
// validation, no queue. `npm run bench:http-floor [-- --runs N --duration S]`. Medians of runs.
import { spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { freePort } from '../scripts/lib/ports.mjs';
import { projectRoot } from '../scripts/lib/paths.mjs';
import { GATEWAY_NODE_OPTIONS } from '../scripts/lib/node-options.mjs';
import { writeLoadFile } from '../scripts/lib/readings.mjs';
import { median } from '../scripts/lib/stats.mjs';
import { parseLoadArgs } from './lib/options.mjs';
import { ensureWrk, runWrk } from './lib/wrk.mjs';

const { runs, durationS, connections } = parseLoadArgs(5);

ensureWrk();
const work = join(projectRoot, 'bench', '.work');
mkdirSync(work, { recursive: true });
const load = writeLoadFile(join(work, 'floor-single.txt'), 'single', 1);

// The server runs as its own process on CPU 0, like the gateway in `npm run bench`; wrk on CPU 1.
const server = `
  import { Hono } from 'hono';
  import { serve } from '@hono/node-server';
  const app = new Hono();
  app.post('/api/v2/ingest/', async (c) => {
    const reading = JSON.parse(await c.req.text());
    return c.json({ status: 'Data received and queued', ship_id: reading.ship_id, cargo_id: reading.cargo_id });
  });
  serve({ fetch: app.fetch, hostname: '127.0.0.1', port: Number(process.env.PORT) }, () => process.stdout.write('listening\\n'));
`;
const port = await freePort();
const child = spawn('taskset', ['-c', '0', process.execPath, ...GATEWAY_NODE_OPTIONS.split(' '), '--input-type=module', '-e', server], {
  cwd: projectRoot,
  env: { ...process.env, PORT: String(port) },
  stdio: ['ignore', 'pipe', 'inherit'],
});
await new Promise((resolve, reject) => {
  child.stdout.on('data', (chunk) => String(chunk).includes('listening') && resolve(undefined));
  child.once('exit', (code) => reject(new Error(`floor server exited with ${code}`)));
});

const url = `http://127.0.0.1:${port}/api/v2/ingest/`;
const env = { BENCH_KIND: 'single', BENCH_FILE: load.path, BENCH_API_KEY: 'floor' };
try {
  await runWrk({ url, threads: 2, connections, durationS: 2, cpus: '1', env });
  const rates = [];
  const p99s = [];
  for (let run = 1; run <= runs; run++) {
    const result = await runWrk({ url, threads: 2, connections, durationS, cpus: '1', env });
    const rate = result.requests / (result.durationUs / 1e6);
    rates.push(rate);
    p99s.push(result.latencyUs.p99 / 1000);
    process.stdout.write(`run ${run}: ${Math.round(rate)} requests/s, p99 ${(result.latencyUs.p99 / 1000).toFixed(2)} ms\n`);
  }
  const rate = Math.round(median(rates) ?? 0);
  const p99 = (median(p99s) ?? 0).toFixed(2);
  process.stdout.write(
    `minimal Hono handler, ${connections} connections, median of ${runs} runs: ${rate} requests/s (${Math.round(Math.min(...rates))}–${Math.round(Math.max(...rates))}), p99 ${p99} ms\n`,
  );
} finally {
  child.kill();
}
