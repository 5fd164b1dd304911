// A batch's work in process: `npm run bench:batch-hot-path [-- --batch N --requests N --rounds R --mode M --other DIR]`.
// The gateway's Hono app (its ingest route, the key check, the console's ship table, a real queue
// file in a temporary directory) and the floor's handler (bench/lib/floor-server.mjs: the body
// parsed as JSON and answered) take the same batch bodies through `app.request`, 16 in flight, in
// alternate rounds; what is left out is Node's HTTP server, the same for both, and the delivery
// thread. Prints CPU µs a reading of each, the least of the rounds and their median, and the
// gateway's share of the floor's rate that the CPU times imply. `--other DIR` adds another
// checkout's gateway (its `src/`), as bench:mqtt-hot-path does, also of a release without the
// console, time window or idempotency keys (0.4.0's sources in the releases cache: what it lacks is
// left out of its app); `--only floor|gateway` runs one side.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { Hono } from 'hono';
import { projectRoot } from '../scripts/lib/paths.mjs';
import { batchTemplate, fillBatchBody } from '../scripts/lib/readings.mjs';
import { importSources } from './lib/micro.mjs';

const { values: args } = parseArgs({
  options: {
    batch: { type: 'string', default: '1000' },
    requests: { type: 'string', default: '400' },
    rounds: { type: 'string', default: '7' },
    mode: { type: 'string', default: 'process-crash' },
    other: { type: 'string' },
    // `floor` or `gateway` alone, to profile one of them (`node --cpu-prof bench/batch-hot-path.mjs --only gateway`).
    only: { type: 'string' },
  },
});
const BATCH = Number(args.batch);
const REQUESTS = Number(args.requests);
const IN_FLIGHT = 16;
const KEY = 'bench-key-0123456789abcdef';

/** The gateway's parts from the sources under `root`; of a release, those it has. @param {string} root @param {string} name */
async function sources(root, name) {
  const src = resolve(root, 'src');
  const has = (/** @type {string} */ file) => existsSync(join(src, file));
  return importSources(
    name,
    `
      export { createApp } from '${src}/http/app.ts';
      export { QueueWriter } from '${src}/queue/queue-writer.ts';
      export { ReceiveClock } from '${src}/reading/${has('reading/receive-clock.ts') ? 'receive-clock' : 'timestamp'}.ts';
      export { readingSchema } from '${src}/reading/reading-schema.ts';
      export { GatewayStats } from '${src}/stats.ts';
      export { FailureDelay } from '${src}/http/middleware/api-key/failure-delay.ts';
      export { KeyStore } from '${src}/keys/key-store.ts';
      export { createLogger } from '${src}/log/logger.ts';
      ${has('reading/time-window.ts') ? `export { TimeWindow } from '${src}/reading/time-window.ts';` : ''}
      ${has('http/idempotency-keys.ts') ? `export { IdempotencyKeys } from '${src}/http/idempotency-keys.ts';` : ''}
      ${has('console/activity/ship-table.ts') ? `export { ShipTable } from '${src}/console/activity/ship-table.ts';` : ''}
    `,
  );
}

/** The gateway's app as gateway.ts makes it, with the console's ship table: its fetch and what to close. @param {any} m @param {string} dir */
function gatewayApp(m, dir) {
  const logger = m.createLogger('silent');
  const queue = m.QueueWriter.open({ dataDir: dir, durability: args.mode, maxBytes: 8 * 1024 ** 3 });
  const ships = m.ShipTable === undefined ? undefined : new m.ShipTable();
  const limits = {
    maxIdLength: 100,
    ...(m.TimeWindow === undefined ? {} : { window: new m.TimeWindow({ maxAheadS: 86_400, maxAgeS: 364 * 86_400 }) }),
  };
  const app = m.createApp({
    queue,
    delivery: { notifyAppended() {} },
    stats: new m.GatewayStats(),
    keys: new m.KeyStore({ defaultKey: KEY, path: join(dir, 'api-keys'), pollMs: 60_000, logger }),
    failureDelay: new m.FailureDelay(100, 60_000),
    isStopping: () => false,
    version: 'bench',
    clock: new m.ReceiveClock(),
    validator: { schema: m.readingSchema(limits), limits },
    logger,
    maxBodyBytes: 8 * 1024 * 1024,
    maxInflightBytes: 64 * 1024 * 1024,
    maxBatchReadings: 10_000,
    harborId: undefined,
    siteId: 'bench',
    stopping: new AbortController().signal,
    idempotency: m.IdempotencyKeys === undefined ? undefined : new m.IdempotencyKeys({ windowMs: 600_000, maxKeys: 20_000 }),
    console:
      ships === undefined
        ? undefined
        : {
            mount() {},
            /** @param {{ name: string }} principal @param {string} record @param {number} readings @param {Float64Array} [values] */
            accepted(principal, record, readings, values) {
              ships.record(principal.name, record, readings, Date.now(), values);
            },
            refused() {},
          },
  });
  return { fetch: (/** @type {Request} */ request) => app.fetch(request), close: () => queue.close() };
}

/** The floor's handler, as bench/lib/floor-server.mjs serves it. */
function floorApp() {
  const app = new Hono();
  app.post('/api/v2/ingest/batch', async (c) => {
    const readings = JSON.parse(await c.req.text());
    return c.json({ status: 'Batch data received and queued', count: readings.length });
  });
  return { fetch: (/** @type {Request} */ request) => app.fetch(request), close: () => undefined };
}

const template = batchTemplate(BATCH);
let sent = 0;
/** One round: REQUESTS batches, IN_FLIGHT at a time; CPU µs a reading. @param {{ fetch: (r: Request) => Promise<Response> | Response }} app */
async function round(app) {
  const baseMs = Date.now();
  const bodies = Array.from({ length: REQUESTS }, () => fillBatchBody(template, baseMs, sent++));
  let next = 0;
  const before = process.cpuUsage();
  const started = performance.now();
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (next < REQUESTS) {
        const body = bodies[next++];
        const response = await app.fetch(
          new Request('http://bench/api/v2/ingest/batch', {
            method: 'POST',
            headers: { 'content-type': 'application/json', 'x-api-key': KEY, 'content-length': String(Buffer.byteLength(body ?? '')) },
            body,
          }),
        );
        await response.arrayBuffer();
        if (response.status !== 200) throw new Error(`answered ${response.status}: ${await response.text()}`);
      }
    }),
  );
  const cpu = process.cpuUsage(before);
  return { cpuUs: (cpu.user + cpu.system) / (REQUESTS * BATCH), wallUs: ((performance.now() - started) * 1000) / (REQUESTS * BATCH) };
}

const dirs = [];
/** @type {{ name: string, app: { fetch: (r: Request) => Promise<Response> | Response, close: () => unknown } }[]} */
const targets = args.only === 'gateway' ? [] : [{ name: 'floor', app: floorApp() }];
for (const [name, root] of args.only === 'floor'
  ? []
  : [...(args.other === undefined ? [] : [[args.other, args.other]]), ['this build', projectRoot]]) {
  const dir = mkdtempSync(join(tmpdir(), 'harbor-batch-hot-'));
  dirs.push(dir);
  targets.push({
    name: `gateway, ${name}`,
    app: gatewayApp(await sources(/** @type {string} */ (root), `batch-hot-path-${targets.length}`), dir),
  });
}
const loadAtStart = loadavg()
  .map((l) => l.toFixed(1))
  .join(' ');
/** @type {Map<string, { cpuUs: number, wallUs: number }[]>} */
const results = new Map(targets.map((t) => [t.name, []]));
try {
  for (const t of targets) await round(t.app);
  for (let r = 1; r <= Number(args.rounds); r++) {
    for (const t of r % 2 === 1 ? targets : [...targets].reverse()) {
      const result = await round(t.app);
      results.get(t.name)?.push(result);
      process.stdout.write(
        `round ${r}, ${t.name}: ${result.cpuUs.toFixed(3)} µs of CPU a reading, ${result.wallUs.toFixed(3)} µs of wall time\n`,
      );
    }
  }
} finally {
  for (const t of targets) t.app.close();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
}
const least = (/** @type {number[]} */ v) => Math.min(...v);
const mid = (/** @type {number[]} */ v) => /** @type {number} */ ([...v].sort((a, b) => a - b)[Math.floor(v.length / 2)]);
const floorCpu = results.get('floor')?.map((r) => r.cpuUs) ?? [];
process.stdout.write(
  `\n${args.mode}, ${args.rounds} rounds of ${REQUESTS} batches of ${BATCH}, ${IN_FLIGHT} in flight; load average ${loadAtStart} at start, ${loadavg()
    .map((l) => l.toFixed(1))
    .join(
      ' ',
    )} at end\n\n| Target | CPU µs a reading, least | median | share of the floor's rate, from the least |\n|---|---:|---:|---:|\n`,
);
for (const [name, list] of results) {
  const cpu = list.map((r) => r.cpuUs);
  const share = name === 'floor' || floorCpu.length === 0 ? '–' : `${((least(floorCpu) / least(cpu)) * 100).toFixed(1)} %`;
  process.stdout.write(`| ${name} | ${least(cpu).toFixed(3)} | ${mid(cpu).toFixed(3)} | ${share} |\n`);
}
