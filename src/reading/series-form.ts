import { formatTimestampNs } from './format-timestamp.js';

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

/** Nanoseconds in each unit the form's times may count in. */
export const UNITS = { s: 1_000_000_000n, ms: 1_000_000n, us: 1_000n, ns: 1n } as const;
type TimeUnit = keyof typeof UNITS;
const COARSEST_FIRST: readonly TimeUnit[] = ['s', 'ms', 'us', 'ns'];

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
