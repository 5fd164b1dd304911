// The ingest side of the series form (series-form.ts): its envelope checked with zod and laid out
// as the plain batch it stands for.
import * as z from 'zod';
import { formatTimestampNs } from './format-timestamp.js';
import { MAX_REPORTED_PROBLEMS, parseBatch, type ParseResult, type Validator } from './parse-readings.js';
import type { ReadingIssue } from './reading-issues.js';
import { SERIES_MEDIA_TYPE, UNITS } from './series-form.js';
import { MAX_EPOCH_SECONDS, parseTimestampNs } from './timestamp.js';

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
