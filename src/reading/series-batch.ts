import * as z from 'zod';
import { formatTimestampNs } from './format-timestamp.js';
import { MAX_REPORTED_PROBLEMS, parseBatch, type ParseResult, type Validator } from './parse-readings.js';
import type { ReadingIssue } from './reading-issues.js';
import { MAX_EPOCH_SECONDS, parseTimestampNs } from './timestamp.js';

/**
 * The batch form a gateway forwards in to a gateway that takes it (declared by its Content-Type):
 * readings grouped by ship and cargo id, each group's times as differences, and so a tenth or less
 * of the plain batch's bytes once compressed, as a site's readings repeat their ids and follow a beat:
 *
 *     {"time0": "2026-05-27T10:00:00.000000000Z", "time_unit": "ms",
 *      "series": [{"ship_id": "MV-1", "cargo_id": "temp", "times": [0, 5000, 5001], "values": [12.3, 12.4, 12.4]}]}
 *
 * A series' first time is `time0` plus its first entry; each later one is the time before it plus
 * its entry, in `time_unit`. It stands for the plain batch of its readings series after series, and
 * is that batch as far as validation goes: indices in a refusal count in that order.
 */
export const SERIES_MEDIA_TYPE = 'application/vnd.harbor.series+json';

/** Whether a Content-Type header declares the series form (parameters such as charset aside). */
export function isSeriesMediaType(contentType: string | undefined): boolean {
  if (contentType === undefined) return false;
  const semicolon = contentType.indexOf(';');
  return (semicolon === -1 ? contentType : contentType.slice(0, semicolon)).trim().toLowerCase() === SERIES_MEDIA_TYPE;
}

const UNITS = { s: 1_000_000_000n, ms: 1_000_000n, us: 1_000n, ns: 1n } as const;
type TimeUnit = keyof typeof UNITS;
const COARSEST_FIRST: readonly TimeUnit[] = ['s', 'ms', 'us', 'ns'];
const END_NS = BigInt(MAX_EPOCH_SECONDS) * 1_000_000_000n;

/** The envelope; ids and values are left to the reading schema of record, once the readings are laid out. */
const envelopeSchema = z.object({
  time0: z.string(),
  time_unit: z.enum(['s', 'ms', 'us', 'ns']),
  series: z.array(
    z
      .object({ ship_id: z.unknown().optional(), cargo_id: z.unknown().optional(), times: z.array(z.int()), values: z.array(z.unknown()) })
      .refine((s) => s.times.length === s.values.length, { message: 'times and values must be as long as each other', path: ['values'] }),
  ),
});

/** A reading as the series form takes it: its time in epoch nanoseconds (a decimal string). */
export interface SeriesReading {
  timeNs: string;
  shipId: string;
  cargoId: string;
  value: number;
}

// JSON.stringify(-0) is "0"; keep the sign, as the plain form does.
const jsonNumber = (value: number): string => (Object.is(value, -0) ? '-0' : String(value));

/**
 * The series form of `readings` and the order its readings stand in (indices into `readings`): a
 * group per ship and cargo id in the order each first appears, each in its own order. Undefined
 * when a time difference is too large for a JSON number to hold exactly in the finest unit the
 * times need (readings more than 104 days apart, timed to the nanosecond): send the plain form.
 */
export function encodeSeriesBatch(readings: readonly SeriesReading[]): { body: string; order: number[] } | undefined {
  if (readings.length === 0) return undefined;
  const groups = new Map<string, Map<string, number[]>>();
  const order: number[] = [];
  const series: number[][] = [];
  for (let i = 0; i < readings.length; i++) {
    const { shipId, cargoId } = readings[i]!;
    let cargos = groups.get(shipId);
    if (cargos === undefined) {
      cargos = new Map();
      groups.set(shipId, cargos);
    }
    const indices = cargos.get(cargoId);
    if (indices !== undefined) {
      indices.push(i);
    } else {
      const started = [i];
      cargos.set(cargoId, started);
      series.push(started);
    }
  }
  for (const indices of series) order.push(...indices);
  const times = readings.map((r) => BigInt(r.timeNs));
  const time0 = times[order[0]!]!;
  const unit = COARSEST_FIRST.find((u) => times.every((t) => (t - time0) % UNITS[u] === 0n))!;
  const scale = UNITS[unit];
  const parts: string[] = [];
  for (const indices of series) {
    const deltas: number[] = [];
    let before = time0;
    for (const i of indices) {
      const delta = Number((times[i]! - before) / scale);
      if (!Number.isSafeInteger(delta)) return undefined;
      deltas.push(delta);
      before = times[i]!;
    }
    const first = readings[indices[0]!]!;
    const values = indices.map((i) => jsonNumber(readings[i]!.value)).join(',');
    parts.push(
      `{"ship_id":${JSON.stringify(first.shipId)},"cargo_id":${JSON.stringify(first.cargoId)},"times":[${deltas.join(',')}],"values":[${values}]}`,
    );
  }
  const body = `{"time0":"${formatTimestampNs(time0.toString())}","time_unit":"${unit}","series":[${parts.join(',')}]}`;
  return { body, order };
}

type Laid = { ok: true; readings: unknown[] } | (ParseResult & { ok: false });

const malformed = (message: string, details: ReadingIssue[]): Laid => ({ ok: false, refusal: 'malformed', message, details });

/**
 * The plain batch a series-form body stands for: one reading object (`time` in RFC 3339 with nine
 * fraction digits, `ship_id`, `cargo_id`, `value` as sent) a reading, series after series. The
 * envelope's shape is checked here; the readings are the reading schema's to judge.
 */
export function layOutSeries(body: unknown, maxReadings: number): Laid {
  // Counted before anything is made: a body that stands for too many readings costs nothing more.
  const count = countReadings(body);
  if (count > maxReadings) {
    return malformed(`Batch has ${count} readings; at most ${maxReadings} are accepted per request`, [
      { loc: ['body', 'series'], msg: `Batch must contain at most ${maxReadings} readings`, type: 'too_long' },
    ]);
  }
  const parsed = envelopeSchema.safeParse(body);
  if (!parsed.success) {
    const details = parsed.error.issues.slice(0, MAX_REPORTED_PROBLEMS).map((issue) => ({
      loc: ['body', ...issue.path.map((key) => (typeof key === 'symbol' ? String(key) : key))],
      msg: issue.message,
      type: issue.code,
    }));
    return malformed(`Body is not a batch in the series form (${SERIES_MEDIA_TYPE})`, details);
  }
  const envelope = parsed.data;
  const start = parseTimestampNs(envelope.time0);
  if (typeof start !== 'string') {
    return malformed('time0 of the series form is not a timestamp', [{ loc: ['body', 'time0'], msg: start.msg, type: start.type }]);
  }
  const scale = UNITS[envelope.time_unit];
  const time0 = BigInt(start);
  const readings: unknown[] = [];
  for (let s = 0; s < envelope.series.length; s++) {
    const { ship_id, cargo_id, times, values } = envelope.series[s]!;
    let time = time0;
    for (let k = 0; k < times.length; k++) {
      time += BigInt(times[k]!) * scale;
      if (time < 0n || time >= END_NS) {
        return malformed('A time of the series form lies outside 1970 to 2261', [
          {
            loc: ['body', 'series', s, 'times', k],
            msg: 'Timestamp must be between 1970-01-01T00:00:00Z and 2261-12-31T23:59:59.999999999Z',
            type: 'datetime_range',
          },
        ]);
      }
      readings.push({ time: formatTimestampNs(time.toString()), ship_id, cargo_id, value: values[k] });
    }
  }
  return { ok: true, readings };
}

/** How many readings a body's series hold, as far as it has the envelope's shape. */
function countReadings(body: unknown): number {
  const series = (body as { series?: unknown } | null)?.series;
  if (!Array.isArray(series)) return 0;
  let count = 0;
  for (const s of series) {
    const times = (s as { times?: unknown } | null)?.times;
    if (Array.isArray(times)) count += times.length;
  }
  return count;
}

/** A batch in the series form: laid out as its plain batch, then judged as that batch is (`parseBatch`). */
export function parseSeriesBatch(body: unknown, validator: Validator, maxReadings: number): ParseResult {
  const laid = layOutSeries(body, maxReadings);
  return laid.ok ? parseBatch(laid.readings, validator, maxReadings) : laid;
}
