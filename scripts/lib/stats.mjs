// Pure statistics for the benchmark harness: kept free of I/O so a unit test can pin them down.

/**
 * The p-th percentile (0–100) of `values` by linear interpolation between closest ranks, so the
 * 50th of an even count is the mean of the middle two. Undefined for an empty list.
 * @param {readonly number[]} values
 * @param {number} p
 * @returns {number | undefined}
 */
export function percentile(values, p) {
  if (values.length === 0) return undefined;
  if (!(p >= 0 && p <= 100)) throw new RangeError(`percentile must be within 0..100, got ${p}`);
  const sorted = [...values].sort((a, b) => a - b);
  const rank = (p / 100) * (sorted.length - 1);
  const low = Math.floor(rank);
  const high = Math.ceil(rank);
  const a = /** @type {number} */ (sorted[low]);
  const b = /** @type {number} */ (sorted[high]);
  return a + (b - a) * (rank - low);
}

/**
 * @param {readonly number[]} values
 * @returns {number | undefined}
 */
export const median = (values) => percentile(values, 50);

/**
 * Median, spread and count of the finite values among `values` (runs that produced no figure are
 * left out, and counted apart).
 * @param {readonly (number | null | undefined)[]} values
 * @returns {{ median: number | null, min: number | null, max: number | null, n: number, missing: number }}
 */
export function summarize(values) {
  /** @type {number[]} */
  const finite = [];
  for (const v of values) if (typeof v === 'number' && Number.isFinite(v)) finite.push(v);
  if (finite.length === 0) return { median: null, min: null, max: null, n: 0, missing: values.length };
  return {
    median: /** @type {number} */ (median(finite)),
    min: Math.min(...finite),
    max: Math.max(...finite),
    n: finite.length,
    missing: values.length - finite.length,
  };
}

/**
 * Least-squares slope of y over x (units of y per unit of x); 0 for fewer than two distinct x.
 * @param {readonly { x: number, y: number }[]} points
 * @returns {number}
 */
export function slope(points) {
  const n = points.length;
  if (n < 2) return 0;
  let sx = 0;
  let sy = 0;
  for (const { x, y } of points) {
    sx += x;
    sy += y;
  }
  const mx = sx / n;
  const my = sy / n;
  let num = 0;
  let den = 0;
  for (const { x, y } of points) {
    num += (x - mx) * (y - my);
    den += (x - mx) * (x - mx);
  }
  return den === 0 ? 0 : num / den;
}

/**
 * Whether a queue depth series stayed bounded while readings arrived at `rate` per second. The
 * flusher runs on a timer, so the depth saws by up to `sawSeconds` of readings between flushes; the
 * queue counts as bounded when its trend (least-squares slope) grows by less than
 * `maxGrowthShare` of the rate per second, or by less than one saw over the whole series when that
 * is more (a short series cannot tell a saw from growth), and its last sample is below
 * `maxDepthSeconds` worth of readings.
 * @param {readonly { t: number, depth: number }[]} samples  t in seconds
 * @param {number} rate  readings per second offered
 * @param {{ maxGrowthShare?: number, maxDepthSeconds?: number, sawSeconds?: number }} [limits]
 * @returns {{ bounded: boolean, growthPerSecond: number, allowedGrowthPerSecond: number, lastDepth: number, maxDepth: number }}
 */
export function queueBounded(samples, rate, limits = {}) {
  const maxGrowthShare = limits.maxGrowthShare ?? 0.02;
  const maxDepthSeconds = limits.maxDepthSeconds ?? 5;
  const sawSeconds = limits.sawSeconds ?? 1;
  const first = samples[0];
  const last = samples[samples.length - 1];
  const span = first !== undefined && last !== undefined ? last.t - first.t : 0;
  const growthPerSecond = slope(samples.map((s) => ({ x: s.t, y: s.depth })));
  const allowedGrowthPerSecond = Math.max(maxGrowthShare * rate, span > 0 ? (sawSeconds * rate) / span : 0);
  const lastDepth = last?.depth ?? 0;
  const maxDepth = samples.reduce((m, s) => Math.max(m, s.depth), 0);
  const bounded = samples.length >= 2 && growthPerSecond <= allowedGrowthPerSecond && lastDepth <= maxDepthSeconds * rate;
  return { bounded, growthPerSecond, allowedGrowthPerSecond, lastDepth, maxDepth };
}

/**
 * This build's figure against another's, over runs paired by their number (run n of each build,
 * measured one after the other): the summary of the pairwise ratios current ÷ reference. Pairs
 * with a figure missing on either side, or a reference of 0, are left out.
 * @template {{ run: number }} T
 * @param {readonly T[]} reference
 * @param {readonly T[]} current
 * @param {(run: T) => number | null | undefined} pick
 */
export function pairedRatios(reference, current, pick) {
  return summarize(
    current.map((run) => {
      const pair = reference.find((r) => r.run === run.run);
      const x = pair === undefined ? null : pick(pair);
      const y = pick(run);
      return typeof x === 'number' && typeof y === 'number' && x > 0 ? y / x : null;
    }),
  );
}

/**
 * '↑' when the whole spread of the ratios is better, '↓' when it is all worse, '' otherwise (or
 * with fewer than two pairs).
 * @param {{ min: number | null, max: number | null, n: number }} ratio
 * @param {boolean} higherIsBetter
 */
export function ratioMark(ratio, higherIsBetter) {
  if (ratio.min === null || ratio.max === null || ratio.n < 2) return '';
  if (higherIsBetter ? ratio.min > 1 : ratio.max < 1) return '↑';
  if (higherIsBetter ? ratio.max < 1 : ratio.min > 1) return '↓';
  return '';
}

/**
 * How long each answered request's readings waited, in seconds, from its answer until its sink's
 * delivery: both in queue order, each delivery covers the requests up to its readings so far.
 * @param {{ atMs: number, readings: number }[]} answered @param {{ atMs: number, readings: number }[]} delivered
 */
export function waitsSeconds(answered, delivered) {
  let d = 0;
  return answered.map((a) => {
    while (d < delivered.length && /** @type {{ readings: number }} */ (delivered[d]).readings < a.readings) d += 1;
    const by = delivered[d];
    if (by === undefined) throw new Error(`readings up to ${a.readings} were never delivered`);
    return Math.max(0, by.atMs - a.atMs) / 1000;
  });
}
