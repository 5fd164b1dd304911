// The ceiling of single push on this machine: the same wrk load as `npm run bench` against a Hono
// app on @hono/node-server whose handler only reads the body and answers the gateway's JSON, no
// validation, no queue. `npm run bench:http-floor [-- --runs N --duration S]`. Medians of runs.
// `--batch N`: batch push instead, N readings a request (16 connections unless `--connections`), the
// floor's handler parsing the body as JSON and answering its count.
// With `--gateway` (after `npm run build`) each run also loads the built gateway in both durability
// modes, on the same CPU, right after the floor and in turns, and prints each mode's share of the floor.
// `--bundle PATH` loads another build instead of dist/gateway.mjs; `--fsync-delay-ms N` makes every
// fsync of the gateways N ms slower (bench/lib/slow-fsync.mjs), as a card's may be.
import { randomBytes } from 'node:crypto';
import { mkdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { projectRoot } from '../scripts/lib/paths.mjs';
import { writeLoadFile } from '../scripts/lib/readings.mjs';
import { startQuestDb } from '../scripts/lib/questdb.mjs';
import { median } from '../scripts/lib/stats.mjs';
import { startFloorServer } from './lib/floor-server.mjs';
import { startBenchGateway } from './lib/gateway.mjs';
import { waitFor } from './lib/harness.mjs';
import { parseLoadArgs } from './lib/options.mjs';
import { slowFsyncEnv } from './lib/slow-fsync.mjs';
import { ensureWrk, runWrk } from './lib/wrk.mjs';

const { runs, durationS, extra } = parseLoadArgs(5, {
  connections: { type: 'string' },
  batch: { type: 'string' },
  gateway: { type: 'boolean', default: false },
  bundle: { type: 'string', default: join(projectRoot, 'dist', 'gateway.mjs') },
  'fsync-delay-ms': { type: 'string', default: '0' },
});
const gatewayToo = extra.gateway === true;
const batch = extra.batch === undefined ? undefined : Number(extra.batch);
const kind = batch === undefined ? 'single' : 'batch';
const connections = Number(extra.connections ?? (batch === undefined ? 64 : 16));
/** Readings a request: rates are of requests, shares of the floor the same for readings. */
const perRequest = batch ?? 1;

ensureWrk();
const loadAtStart = os
  .loadavg()
  .map((l) => l.toFixed(1))
  .join(' ');
const work = join(projectRoot, 'bench', '.work');
mkdirSync(work, { recursive: true });
const load = writeLoadFile(join(work, `floor-${kind}-${perRequest}.txt`), kind, perRequest);

// The floor runs as its own process on CPU 0, like the gateway in `npm run bench`; wrk on CPU 1.
const floor = await startFloorServer({ cpus: '0' });
const floorUrl = batch === undefined ? floor.url : floor.batchUrl;
const MODES = ['process-crash', 'power-loss'];
const apiKey = randomBytes(24).toString('base64url');
const dataDir = join(work, `floor-${process.pid}`);
const questdb = gatewayToo ? await startQuestDb({ dataDir: join(dataDir, 'questdb') }) : undefined;
/** The loads of one run: the floor, then with --gateway each mode's gateway. @type {{ name: string, url: string, key: string, status?: () => Promise<any> }[]} */
const targets = [{ name: 'floor', url: floorUrl, key: 'floor' }];
/** @type {import('./lib/gateway.mjs').BenchGateway[]} */
const gateways = [];
/** @type {Record<string, { rate: number, p99: number }[]>} */
const results = {};
try {
  for (const mode of MODES) {
    if (questdb === undefined) break;
    const gw = await startBenchGateway({
      bundle: String(extra.bundle),
      apiKey,
      cpus: '0',
      env: {
        ...slowFsyncEnv(Number(extra['fsync-delay-ms'])),
        DATA_DIR: join(dataDir, mode),
        DURABILITY: mode,
        QUESTDB_URL: questdb.httpUrl,
        QUESTDB_TABLE: `floor_${mode.replace('-', '_')}_${randomBytes(3).toString('hex')}`,
        // As the batch scenario of `npm run bench`: a run's readings must not fill the queue.
        ...(batch === undefined ? {} : { QUEUE_MAX_BYTES: '8GiB' }),
      },
    });
    gateways.push(gw);
    targets.push({
      name: mode,
      url: `${gw.url}/api/v2/ingest/${batch === undefined ? '' : 'batch'}`,
      key: apiKey,
      status: () => gw.status(),
    });
  }
  for (const t of targets) results[t.name] = [];
  const wrkOf = (/** @type {{ url: string, key: string }} */ t, /** @type {number} */ seconds) =>
    runWrk({
      url: t.url,
      threads: 2,
      connections,
      durationS: seconds,
      cpus: '1',
      env: { BENCH_KIND: kind, BENCH_FILE: load.path, BENCH_API_KEY: t.key },
    });
  for (const t of targets) await wrkOf(t, 2);
  for (let run = 1; run <= runs; run++) {
    // The floor first, then the modes in turns: a neighbour's load falls on the gateway as often as on the floor.
    const modes = targets.slice(1);
    const order = [targets[0], ...(run % 2 === 1 ? modes : modes.reverse())];
    for (const t of /** @type {typeof targets} */ (order)) {
      // A gateway delivers the last run's readings before it is loaded again.
      const status = t.status;
      if (status !== undefined) await waitFor(async () => (await status()).queue.readings === 0, 120_000, 200);
      const result = await wrkOf(t, durationS);
      const rate = result.requests / (result.durationUs / 1e6);
      results[t.name]?.push({ rate, p99: result.latencyUs.p99 / 1000 });
      process.stdout.write(
        `run ${run}, ${t.name}: ${Math.round(rate)} requests/s${batch === undefined ? '' : ` (${Math.round(rate * perRequest)} readings/s)`}, ` +
          `p99 ${(result.latencyUs.p99 / 1000).toFixed(2)} ms; load average ${os
            .loadavg()
            .map((l) => l.toFixed(1))
            .join(' ')}\n`,
      );
    }
  }
  const floor = results.floor ?? [];
  const rates = floor.map((r) => r.rate);
  process.stdout.write(
    `minimal Hono handler, ${batch === undefined ? 'single push' : `batches of ${batch}`}, ${connections} connections, median of ${runs} runs: ${Math.round(median(rates) ?? 0)} requests/s (${Math.round(Math.min(...rates))}–${Math.round(Math.max(...rates))}), p99 ${(median(floor.map((r) => r.p99)) ?? 0).toFixed(2)} ms\n`,
  );
  if (gateways.length > 0) {
    process.stdout.write(
      `\nLoad average at the start ${loadAtStart}, at the end ${os
        .loadavg()
        .map((l) => l.toFixed(1))
        .join(
          ' ',
        )}.\n\n| Load | requests/s |${batch === undefined ? '' : ' readings/s |'} p99 ms | share of the floor in the same run |\n|---|---:|${batch === undefined ? '' : '---:|'}---:|---:|\n`,
    );
    for (const t of targets) {
      const list = results[t.name] ?? [];
      const shares = list.map((r, i) => r.rate / (floor[i]?.rate ?? Number.NaN));
      const range = (/** @type {number[]} */ v, /** @type {number} */ digits) =>
        `${(median(v) ?? 0).toFixed(digits)} (${Math.min(...v).toFixed(digits)}–${Math.max(...v).toFixed(digits)})`;
      const share =
        t.name === 'floor'
          ? '–'
          : `${range(
              shares.map((x) => x * 100),
              1,
            )} %`;
      const rate = range(
        list.map((r) => r.rate),
        0,
      );
      const readings =
        batch === undefined
          ? ''
          : ` ${range(
              list.map((r) => r.rate * perRequest),
              0,
            )} |`;
      process.stdout.write(
        `| ${t.name} | ${rate} |${readings} ${range(
          list.map((r) => r.p99),
          2,
        )} | ${share} |\n`,
      );
    }
  }
} finally {
  await floor.stop();
  for (const gw of gateways) await gw.stop('SIGTERM');
  await questdb?.stop();
  rmSync(dataDir, { recursive: true, force: true });
}
