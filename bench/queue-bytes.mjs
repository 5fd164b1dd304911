// Bytes per reading in the queue, for sizing a site's card against an uplink outage:
// `npm run build && node bench/queue-bytes.mjs [--readings 1000000] [--singles 20000]`.
// A gateway whose every sink is unreachable (QuestDB on a port nobody listens on) takes readings
// of the benchmarks' shapes, in batches of 1,000 and as single pushes, into a fresh queue; then it
// stops and the queue's files (queue.db and its WAL) are divided by the readings they hold. The
// queue's own count of payload bytes (what QUEUE_MAX_BYTES bounds) is printed beside it.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { startBenchGateway } from './lib/gateway.mjs';
import { projectRoot } from '../scripts/lib/paths.mjs';
import { freePort } from '../scripts/lib/ports.mjs';
import { batchTemplate, fillBatchBody, readingTail } from '../scripts/lib/readings.mjs';

const { values } = parseArgs({
  options: { readings: { type: 'string', default: '1000000' }, singles: { type: 'string', default: '20000' } },
});
const bundle = join(projectRoot, 'dist', 'gateway.mjs');
const BATCH = 1000;
const CONCURRENCY = 8;

/**
 * Sends `count` bodies made by `body(i)`, a few at a time; every answer must be 2xx. Returns the JSON bytes sent.
 * @param {string} url
 * @param {string} apiKey
 * @param {string} path
 * @param {number} count
 * @param {(i: number) => string} body
 */
async function send(url, apiKey, path, count, body) {
  let next = 0;
  let bytes = 0;
  const worker = async () => {
    while (next < count) {
      const i = next++;
      const text = body(i);
      bytes += Buffer.byteLength(text);
      const response = await fetch(`${url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': apiKey },
        body: text,
      });
      if (!response.ok) throw new Error(`request ${i}: ${response.status} ${await response.text()}`);
      await response.arrayBuffer();
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  return bytes;
}

/** Bytes of the queue's files in `dir`. @param {string} dir */
const fileBytes = (dir) =>
  ['queue.db', 'queue.db-wal'].reduce((sum, name) => {
    try {
      return sum + statSync(join(dir, name)).size;
    } catch {
      return sum;
    }
  }, 0);

/**
 * @param {string} label
 * @param {number} readings
 * @param {(url: string, apiKey: string) => Promise<number>} fill  sends the readings; returns their JSON bytes
 */
async function measure(label, readings, fill) {
  const dataDir = mkdtempSync(join(tmpdir(), 'harbor-queue-bytes-'));
  const apiKey = randomBytes(16).toString('hex');
  try {
    const gateway = await startBenchGateway({
      bundle,
      apiKey,
      env: {
        DATA_DIR: dataDir,
        QUESTDB_URL: `http://127.0.0.1:${await freePort()}`,
        HEALTH_REPORT: 'false',
        DURABILITY: 'process-crash',
        QUEUE_MAX_BYTES: '8GiB',
        // The readings carry fixed dates: no retention window, so they are accepted in any year.
        RETENTION_DAYS: '0',
      },
    });
    const jsonBytes = await fill(gateway.url, apiKey);
    const status = await gateway.status();
    await gateway.stop('SIGTERM');
    if (status.queue.readings !== readings)
      throw new Error(`${label}: queue holds ${status.queue.readings} readings, expected ${readings}`);
    const onDisk = fileBytes(dataDir);
    return {
      label,
      readings,
      jsonPerReading: jsonBytes / readings,
      filePerReading: onDisk / readings,
      countedPerReading: status.queue.bytes / readings,
      fileBytes: onDisk,
    };
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const readings = Number(values.readings);
const singles = Number(values.singles);
const template = batchTemplate(BATCH);
const base = Date.parse('2026-11-21T10:00:00.000Z');
const results = [
  await measure(`batches of ${BATCH}`, readings, (url, key) =>
    send(url, key, '/api/v2/ingest/batch', readings / BATCH, (i) => fillBatchBody(template, base, i)),
  ),
  await measure('single pushes', singles, (url, key) =>
    send(
      url,
      key,
      '/api/v2/ingest/',
      singles,
      (i) => `{"time":"${new Date(base + i).toISOString().slice(0, 23)}000000Z",${readingTail(i)}`,
    ),
  ),
];

console.log(
  '| Requests | Readings queued | JSON bytes per reading | Queue file bytes per reading | Counted toward QUEUE_MAX_BYTES per reading |',
);
console.log('|---|---:|---:|---:|---:|');
for (const r of results) {
  console.log(
    `| ${r.label} | ${r.readings.toLocaleString('en')} | ${r.jsonPerReading.toFixed(1)} | ${r.filePerReading.toFixed(1)} | ${r.countedPerReading.toFixed(1)} |`,
  );
}
