// Micro-benchmarks of the Kafka sink's per-reading work, one core, no I/O:
// `node bench/kafka-encode.mjs`. A batch of 20,000 of the benchmarks' readings (the default
// KAFKA_BATCH_READINGS) as queue records of 1,000 is indexed (`ReadingMessages#load`) and
// encoded into Produce requests of at most 64 KiB over 3 partitions, as the sink sends them; the
// CRC-32C of the requests' record batches is measured apart, beside the client's own CRC-32C.
// Medians of 5 runs.
import { jsCRC32C } from '@platformatic/kafka';
import { batchTemplate, fillBatchBody } from '../scripts/lib/readings.mjs';
import { importSources, medianOfFive } from './lib/micro.mjs';

const k = await importSources(
  'kafka-encode',
  `
      export { parseBatch } from '../../src/reading/parse-readings.ts';
      export { readingSchema } from '../../src/reading/reading-schema.ts';
      export { encodeRecord } from '../../src/queue/record-codec.ts';
      export { ReceiveClock } from '../../src/reading/receive-clock.ts';
      export { ReadingMessages } from '../../src/sinks/kafka/reading-messages.ts';
      export { encodeProduceRequest, ScratchBuffer } from '../../src/sinks/kafka/produce-request.ts';
      export { crc32c } from '../../src/sinks/kafka/crc32c.ts';
    `,
);

const BATCH = 20_000;
const RECORD = 1000;
const MAX_REQUEST_BYTES = 64 * 1024;
const PARTITIONS = 3;
const limits = { maxIdLength: 100 };
const validator = { schema: k.readingSchema(limits), limits };
const clock = new k.ReceiveClock();
const template = batchTemplate(RECORD);
const records = Array.from({ length: BATCH / RECORD }, (_, r) => {
  const readings = k.parseBatch(JSON.parse(fillBatchBody(template, Date.parse('2026-11-21T10:00:00Z'), r)), validator, RECORD).readings;
  const payload = k.encodeRecord(readings, clock);
  return { segment: 1, id: r + 1, receivedMs: 0, readings: readings.length, bytes: payload.length, payload };
});

const messages = new k.ReadingMessages();
const scratch = new k.ScratchBuffer();
/** The requests of a batch as the sink cuts them: readings [from, to) of at most MAX_REQUEST_BYTES, by partition. */
/** @type {{ partition: number, baseSequence: number, indices: number[] }[][]} */
const requests = [];
messages.load(records, [], 'bench-site');
for (let from = 0; from < messages.length; ) {
  let bytes = messages.bytes(from);
  let to = from + 1;
  while (to < messages.length && bytes + messages.bytes(to) <= MAX_REQUEST_BYTES) bytes += messages.bytes(to++);
  const byPartition = Array.from({ length: PARTITIONS }, () => /** @type {number[]} */ ([]));
  for (let i = from; i < to; i++) byPartition[messages.hash(i) % PARTITIONS]?.push(i);
  requests.push(byPartition.map((indices, partition) => ({ partition, baseSequence: 0, indices })));
  from = to;
}
const encode = (/** @type {(typeof requests)[number]} */ partitions) =>
  k.encodeProduceRequest(
    {
      version: 11,
      acks: -1,
      timeoutMs: 30_000,
      topic: 'bench-readings',
      producerId: 1n,
      producerEpoch: 0,
      timestampMs: Date.parse('2026-11-21T10:00:00Z'),
      messages,
      partitions,
    },
    scratch,
  );
// The encoded requests, kept to checksum them apart: their record batches are most of their bytes.
const encoded = requests.map((partitions) => Buffer.from(encode(partitions)));
const requestBytes = encoded.reduce((n, b) => n + b.length, 0);

/** Every request's bytes through `crc` (all of it, header included: nearly all is its record batches). @param {(b: Buffer) => number} crc */
const checksumAll = (crc) => () => {
  for (const b of encoded) crc(b);
};
/** @type {[string, () => unknown][]} */
const cases = [
  ['index the batch (ReadingMessages#load)', () => messages.load(records, [], 'bench-site')],
  [
    'encode its requests (keys, values, varints, CRC-32C)',
    () => {
      for (const partitions of requests) encode(partitions);
    },
  ],
  ['CRC-32C of every request, the sink’s', checksumAll((b) => k.crc32c(b))],
  ['CRC-32C of every request, the client’s JavaScript one (a byte at a time)', checksumAll(jsCRC32C)],
];
// The client's optional native CRC-32C, where it is installed (not on the appliance, which has the bundle alone).
const nodeRs = await import('@node-rs/crc32').catch(() => undefined);
if (nodeRs !== undefined) cases.push(['CRC-32C of every request, @node-rs/crc32 (native, for comparison)', checksumAll(nodeRs.crc32c)]);

console.log(
  `a batch of ${BATCH.toLocaleString('en-US')} readings, ${requests.length} requests of ${Math.round(requestBytes / requests.length).toLocaleString('en-US')} bytes on average (${(requestBytes / BATCH).toFixed(1)} bytes a reading); median of 5 runs, Node ${process.version}`,
);
console.log('| Piece | µs per batch | ns per reading | MB/s of request bytes |');
console.log('|---|---:|---:|---:|');
for (const [name, fn] of cases) {
  const us = medianOfFive(fn);
  console.log(`| ${name} | ${us.toFixed(0)} | ${((us * 1000) / BATCH).toFixed(0)} | ${(requestBytes / us).toFixed(0)} |`);
}
