// The readings the benchmarks send. Every reading is unique in (time, ship_id, cargo_id), so
// QuestDB's deduplication can hide nothing: times carry nanoseconds whose digits say which
// generator, which request and which reading of the request they belong to.
import { writeFileSync } from 'node:fs';

const SHIPS = Array.from({ length: 50 }, (_, i) => `ship-${String(i).padStart(3, '0')}`);
const CARGOS = ['temperature', 'humidity', 'pressure', 'latitude', 'longitude', 'battery', 'rssi', 'speed'];

/** Placeholder a generator replaces with `YYYY-MM-DDTHH:MM:SS.mmm` plus two digits of its own. */
export const TIME_PLACEHOLDER = '@T@';

/**
 * The fields after `time` of reading `i`: an id pair and a value of a realistic shape (some with
 * a float32's long tail, as microcontrollers send them).
 * @param {number} i
 */
export function readingTail(i) {
  const ship = /** @type {string} */ (SHIPS[i % SHIPS.length]);
  const cargo = /** @type {string} */ (CARGOS[Math.floor(i / SHIPS.length) % CARGOS.length]);
  const value = i % 7 === 0 ? Math.fround(((i * 7919) % 100_000) / 1000) : ((i * 7919) % 200_000) / 1000 - 100;
  return `"ship_id":${JSON.stringify(ship)},"cargo_id":${JSON.stringify(cargo)},"value":${value}}`;
}

/**
 * A batch body whose reading `i` has the time `<placeholder>` + `i` in four digits + `Z`; a
 * generator fills in the placeholder per request (one request per millisecond and slot).
 * @param {number} size  at most 10,000 readings (four digits)
 */
export function batchTemplate(size) {
  if (!(size >= 1 && size <= 10_000)) throw new RangeError(`batch size must be 1..10000, got ${size}`);
  const readings = [];
  for (let i = 0; i < size; i++) readings.push(`{"time":"${TIME_PLACEHOLDER}${String(i).padStart(4, '0')}Z",${readingTail(i)}`);
  return `[${readings.join(',')}]`;
}

/**
 * The time prefix (23 characters of ISO 8601 up to milliseconds) of epoch millisecond `ms`.
 * @param {number} ms
 */
export const msPrefix = (ms) => new Date(ms).toISOString().slice(0, 23);

/**
 * A batch body for request `request` of a Node generator: one millisecond per request after
 * `baseMs`, slot digits `9` and `request % 10` (the load generator's threads use 0..8).
 * @param {string} template  from batchTemplate
 * @param {number} baseMs
 * @param {number} request
 */
export function fillBatchBody(template, baseMs, request) {
  return template.replaceAll(TIME_PLACEHOLDER, `${msPrefix(baseMs + Math.floor(request / 10))}9${request % 10}`);
}

/**
 * Bytes of JSON per reading in a body sent with a filled-in time.
 * @param {string} template
 * @param {number} readings
 */
export function jsonBytesPerReading(template, readings) {
  return Buffer.byteLength(template.replaceAll(TIME_PLACEHOLDER, '2026-11-21T10:00:00.00000')) / readings;
}

/**
 * Writes the files the wrk script reads: the batch template, or for single pushes the tails of
 * 1,000 readings, one a line.
 * @param {string} path
 * @param {'single' | 'batch'} kind
 * @param {number} size
 * @returns {{ path: string, jsonBytesPerReading: number }}
 */
export function writeLoadFile(path, kind, size) {
  if (kind === 'batch') {
    const template = batchTemplate(size);
    writeFileSync(path, template);
    return { path, jsonBytesPerReading: jsonBytesPerReading(template, size) };
  }
  const tails = Array.from({ length: 1000 }, (_, i) => readingTail(i));
  writeFileSync(path, `${tails.join('\n')}\n`);
  // A single push carries `{"time":"` + 29 characters of time + `Z",` before the tail.
  const mean = tails.reduce((sum, t) => sum + Buffer.byteLength(t), 0) / tails.length;
  return { path, jsonBytesPerReading: '{"time":"'.length + 30 + 2 + mean };
}
