// Drain: a backlog queued while QuestDB was unreachable, then the time to ship it all.
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { freePort } from '../../../scripts/lib/ports.mjs';
import { rowCount, settleAndDrop, walApplied } from '../../../scripts/lib/questdb-sql.mjs';
import { batchTemplate, fillBatchBody } from '../../../scripts/lib/readings.mjs';
import { startBenchGateway } from '../gateway.mjs';
import { footprint, post, snapshot, waitFor } from '../harness.mjs';

/**
 * Queues `total` readings in batches of 1,000 from four connections.
 * @param {import('../harness.mjs').BenchContext} bench
 * @param {{ gateway: import('../gateway.mjs').BenchGateway }} gw
 * @param {number} total
 */
async function fill(bench, gw, total) {
  const template = batchTemplate(1000);
  const baseMs = Date.now();
  const requests = total / 1000;
  let next = 0;
  const worker = async () => {
    while (next < requests) await post(bench, gw, '/api/v2/ingest/batch', fillBatchBody(template, baseMs, next++));
  };
  await Promise.all([worker(), worker(), worker(), worker()]);
}

/**
 * @param {import('../harness.mjs').BenchContext} bench
 * @param {string} mode
 * @param {number} run
 */
export async function drainRun(bench, mode, run) {
  const { options, bundle, apiKey, questdb } = bench;
  const dataDir = mkdtempSync(join(bench.workDir, 'gateway-'));
  const table = bench.newTable('drain');
  const env = { DATA_DIR: dataDir, DURABILITY: mode, QUESTDB_TABLE: table, ...options.gatewayEnv };
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
    await fill(bench, { gateway: down }, total);
    const queued = (await down.status()).queue.readings;
    if (queued !== total) throw new Error(`drain: ${queued} readings queued, expected ${total}`);
  } finally {
    await down.stop('SIGTERM');
  }
  const fillSeconds = (performance.now() - fillStarted) / 1000;

  const up = await startBenchGateway({ bundle, apiKey, cpus: options.pinning?.gateway, env: { ...env, QUESTDB_URL: questdb.httpUrl } });
  try {
    const before = snapshot(bench, up.pid);
    /** @type {ReturnType<typeof snapshot> | undefined} */
    let after;
    let emptyAt = 0;
    let queryableAt = 0;
    const drained = await waitFor(
      async () => {
        if (after === undefined && (await up.status()).queue.readings === 0) {
          emptyAt = Date.now();
          after = snapshot(bench, up.pid);
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
      ...footprint(bench, before, after, total),
    };
  } finally {
    await up.stop('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
    await settleAndDrop(questdb.httpUrl, table);
  }
}
