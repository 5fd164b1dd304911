// Micro-benchmarks of the hot path's pieces, one core, no I/O: `npm run bench:hot-path`.
// Compares each piece the gateway does itself with the library it stands in for (zod for the
// reading check, @questdb/nodejs-client for ILP encoding). Medians of 5 runs.
import { importSources, medianOfFive } from './lib/micro.mjs';

const hot = await importSources(
  'hot-path',
  `
      export { parseBatch } from '../../src/reading/parse-readings.ts';
      export { readingSchema } from '../../src/reading/reading-schema.ts';
      export { encodeRecord, decodeRecord } from '../../src/queue/record-codec.ts';
      export { ReceiveClock } from '../../src/reading/receive-clock.ts';
      export { IlpEncoder } from '../../src/sinks/questdb/ilp-encoder.ts';
      export { TimeWindow } from '../../src/reading/time-window.ts';
      export { withoutExpired } from '../../src/sinks/questdb/expired-readings.ts';
      export { ShipTable } from '../../src/console/activity/ship-table.ts';
    `,
);
const { SenderBufferV2 } = await import('@questdb/nodejs-client');

const READINGS = 1000;
const limits = { maxIdLength: 100 };
const schema = hot.readingSchema(limits);
const body = JSON.stringify(
  Array.from({ length: READINGS }, (_, i) => ({
    time: `2026-11-21T10:${String(Math.floor(i / 60) % 60).padStart(2, '0')}:${String(i % 60).padStart(2, '0')}.${String(i).padStart(3, '0')}Z`,
    ship_id: `ship-${String(i % 50).padStart(3, '0')}`,
    cargo_id: ['temperature', 'humidity', 'latitude', 'longitude'][i % 4],
    value: Math.fround(20 + i / 7),
  })),
);
const parsed = JSON.parse(body);
const readings = hot.parseBatch(parsed, { schema, limits }, 10_000).readings;
const clock = new hot.ReceiveClock();
// The same batch as devices without a clock send it: every time is a receive time.
const timeless = readings.map((/** @type {{ timeNs?: string }} */ r) => ({ ...r, timeNs: undefined }));
const payload = hot.encodeRecord(readings, clock);
/** The gateway's default window (RETENTION_DAYS 365, a day ahead) on a clock set to the readings' day. */
const windowLimits = {
  maxIdLength: 100,
  window: new hot.TimeWindow({ maxAheadS: 86_400, maxAgeS: 364 * 86_400 }, () => Date.parse('2026-11-21T12:00:00Z')),
};
const windowed = { schema: hot.readingSchema(windowLimits), limits: windowLimits };
const record = { segment: 1, id: 1, receivedMs: 0, readings: READINGS, bytes: payload.length, payload };
/** A year before the readings: none is older, so the check passes the record on whole, as it usually does. */
const expiredBefore = `${Date.parse('2025-11-21T12:00:00Z') / 1000}000000000`;
const rows = hot.decodeRecord(payload);
const encoder = new hot.IlpEncoder('cargo_data', 'pier 7');
/** The console's table of ships, fed as ingest feeds it: a request of one reading at a time, or one batch; `size` folds. */
const ships = new hot.ShipTable();
/** Single pushes' records, as ingest commits them. */
const singles = readings.map((/** @type {unknown} */ r) => hot.encodeRecord([r], clock));
const feedSingles = () => {
  const now = Date.now();
  for (const one of singles) ships.record('bench-key', one, 1, now);
};
/** A batch's values, handed to the table beside its record as ingest hands them. */
const batchValues = Float64Array.from(readings, (/** @type {{ value: number }} */ r) => r.value);

const median = (/** @type {number[]} */ values) => /** @type {number} */ ([...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]);

/** @type {[string, () => unknown][]} */
const cases = [
  ['JSON.parse of the body', () => JSON.parse(body)],
  [
    'zod schema, every reading (reportInput)',
    () => {
      for (const r of parsed) schema.safeParse(r, { reportInput: true });
    },
  ],
  [
    'zod schema, every reading',
    () => {
      for (const r of parsed) schema.safeParse(r);
    },
  ],
  ['fastValidate, whole batch, without a time window', () => hot.parseBatch(parsed, { schema, limits }, 10_000)],
  ['fastValidate (the gateway), whole batch, the default time window', () => hot.parseBatch(parsed, windowed, 10_000)],
  ['queue record encoding', () => hot.encodeRecord(readings, clock)],
  ['queue record encoding, readings without time', () => hot.encodeRecord(timeless, clock)],
  ['queue record decoding', () => hot.decodeRecord(payload)],
  [
    'ILP, @questdb/nodejs-client SenderBufferV2',
    () => {
      const buffer = new SenderBufferV2({ protocol: 'http', init_buf_size: 1 << 20, max_buf_size: 1 << 28 });
      for (const row of rows) {
        buffer
          .table('cargo_data')
          .symbol('ship_id', row.shipId)
          .symbol('cargo_id', row.cargoId)
          .symbol('site', 'pier 7')
          .floatColumn('value', row.value);
        buffer.at(BigInt(row.timeNs), 'ns');
      }
      buffer.toBufferNew();
    },
  ],
  ["ILP, the gateway's IlpEncoder, from readings", () => encoder.encode(rows)],
  ["ILP, the gateway's IlpEncoder, from queue records (the flusher)", () => encoder.encodeRecords([{ payload }])],
  ["the local sink's check for readings older than its TTL, queue records", () => hot.withoutExpired([record], expiredBefore)],
  [
    "the console's ship table, noted and folded: 1,000 requests of one reading",
    () => {
      feedSingles();
      return ships.size;
    },
  ],
  [
    "the console's ship table, noted and folded: one batch",
    () => {
      ships.record('bench-key', payload, READINGS, Date.now(), batchValues);
      return ships.size;
    },
  ],
];

console.log(`per ${READINGS} readings (body ${body.length} bytes), median of 5 runs, Node ${process.version}`);
console.log('| Piece | µs per 1,000 readings | readings/s on one core |');
console.log('|---|---|---|');
for (const [name, fn] of cases) {
  const us = medianOfFive(fn);
  console.log(`| ${name} | ${us.toFixed(0)} | ${Math.round((READINGS / us) * 1e6).toLocaleString('en-US')} |`);
}

// What the console's ship table costs a single push on its request and what folding costs later,
// with records made afresh as ingest makes them.
const requestNs = [];
const foldNs = [];
for (let round = 0; round < 300; round++) {
  const requests = hot
    .parseBatch(JSON.parse(body), { schema, limits }, 10_000)
    .readings.map((/** @type {unknown} */ r) => hot.encodeRecord([r], clock));
  const now = Date.now();
  const t0 = performance.now();
  for (const one of requests) ships.record('bench-key', one, 1, now);
  const t1 = performance.now();
  ships.size;
  const t2 = performance.now();
  if (round < 50) continue;
  requestNs.push(((t1 - t0) * 1e6) / READINGS);
  foldNs.push(((t2 - t1) * 1e6) / READINGS);
}
console.log(
  `the console's ship table, per single push: ${median(requestNs).toFixed(0)} ns on the request, ${median(foldNs).toFixed(0)} ns folding it later (median of 250 rounds of 1,000)`,
);
