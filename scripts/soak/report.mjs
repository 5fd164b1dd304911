// The soak's outputs: its samples as CSV, one SVG chart per watched figure, and the verdict.
import { median } from '../lib/stats.mjs';

/**
 * @typedef {object} Sample
 * @property {number} seconds        since the load started
 * @property {number} rssMb          the gateway's resident memory
 * @property {number} anonMb         of it, the process's own (heaps, stacks: RssAnon)
 * @property {number} fileMb         of it, mapped files (Node's code, libraries: RssFile), shared and reclaimable
 * @property {number} heapMb         its HTTP thread's V8 heap in use (from /status)
 * @property {number} deliveryHeapMb its delivery thread's V8 heap in use (from /status)
 * @property {number} heapsCommittedMb both V8 heaps as committed (V8 keeps pages it may use again)
 * @property {number} fds            its open file descriptors other than sockets (files, pipes, event fds)
 * @property {number} sockets        its open sockets: to QuestDB, and the load's connections
 * @property {number} queueFileMb    queue.db with its WAL
 * @property {number} queuedReadings readings waiting for QuestDB
 * @property {number | null} p50Ms   latency of the requests answered since the last sample
 * @property {number | null} p99Ms
 * @property {number} requests       requests answered since the last sample
 * @property {boolean} questdbUp
 * @property {number} load1          the machine's 1-minute load average
 */

/** @type {(keyof Sample)[]} */
const COLUMNS = [
  'seconds',
  'rssMb',
  'anonMb',
  'fileMb',
  'heapMb',
  'deliveryHeapMb',
  'heapsCommittedMb',
  'fds',
  'sockets',
  'queueFileMb',
  'queuedReadings',
  'p50Ms',
  'p99Ms',
  'requests',
  'questdbUp',
  'load1',
];

/** @param {Sample[]} samples */
export function toCsv(samples) {
  const rows = samples.map((s) =>
    COLUMNS.map((c) => (s[c] === null ? '' : typeof s[c] === 'number' ? Number(s[c].toFixed(3)) : String(s[c]))).join(','),
  );
  return `${COLUMNS.join(',')}\n${rows.join('\n')}\n`;
}

/**
 * The rule: after the first third of the run (warm-up: heaps, caches and QuestDB's tables grow to
 * their working size), a figure is flat when
 * - the median of the last third exceeds the median of the middle third by no more than the
 *   allowance, the larger of (ratio - 1) × that median and `slack`, and
 * - its trend over the last two thirds (least squares), continued for an hour, grows it by no more
 *   than the allowance either.
 * Medians of thirds see through the spikes every QuestDB restart causes; the trend catches a steady
 * climb that is still small in absolute terms (as in a short run).
 */
export const FLAT_RULES = /** @type {const} */ ([
  { key: 'rssMb', label: 'resident memory', unit: 'MB', ratio: 1.1, slack: 8 },
  { key: 'anonMb', label: 'resident memory of its own', unit: 'MB', ratio: 1.1, slack: 8 },
  { key: 'heapMb', label: 'V8 heap in use, HTTP thread', unit: 'MB', ratio: 1.2, slack: 4 },
  { key: 'deliveryHeapMb', label: 'V8 heap in use, delivery thread', unit: 'MB', ratio: 1.2, slack: 4 },
  { key: 'fds', label: 'file descriptors other than sockets', unit: '', ratio: 1, slack: 2 },
  // The load's connections come and go with the latency of the moment; a leak of one per QuestDB
  // restart still shows in the trend.
  { key: 'sockets', label: 'open sockets', unit: '', ratio: 1.25, slack: 10 },
  { key: 'queueFileMb', label: 'queue file size', unit: 'MB', ratio: 1.25, slack: 2 },
  { key: 'p99Ms', label: 'p99 latency', unit: 'ms', ratio: 1.5, slack: 5 },
]);

/**
 * Growth per hour of the least-squares line through (seconds, value).
 * @param {[number, number][]} points
 */
function slopePerHour(points) {
  if (points.length < 2) return 0;
  const mx = points.reduce((a, [x]) => a + x, 0) / points.length;
  const my = points.reduce((a, [, y]) => a + y, 0) / points.length;
  const sxy = points.reduce((a, [x, y]) => a + (x - mx) * (y - my), 0);
  const sxx = points.reduce((a, [x]) => a + (x - mx) ** 2, 0);
  return sxx === 0 ? 0 : (sxy / sxx) * 3600;
}

/**
 * @param {Sample[]} samples
 * @returns {{ key: string, label: string, unit: string, middle: number | null, last: number | null, allowance: number | null, trendPerHour: number, flat: boolean }[]}
 */
export function flatness(samples) {
  const third = Math.floor(samples.length / 3);
  const middle = samples.slice(third, 2 * third);
  const last = samples.slice(2 * third);
  return FLAT_RULES.map(({ key, label, unit, ratio, slack }) => {
    /** @param {Sample[]} part */
    const points = (part) =>
      part.flatMap((s) => (typeof s[key] === 'number' ? [/** @type {[number, number]} */ ([s.seconds, s[key]])] : []));
    const m = median(points(middle).map(([, v]) => v)) ?? null;
    const l = median(points(last).map(([, v]) => v)) ?? null;
    const allowance = m === null ? null : Math.max(m * (ratio - 1), slack);
    const trendPerHour = slopePerHour(points(samples.slice(third)));
    const flat = m !== null && l !== null && allowance !== null && l - m <= allowance && trendPerHour <= allowance;
    return { key, label, unit, middle: m, last: l, allowance, trendPerHour, flat };
  });
}

const escapeXml = (/** @type {string} */ s) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;');

/**
 * A line chart of one figure over the run; the spans where QuestDB was down are shaded.
 * @param {Sample[]} samples
 * @param {{ from: number, to: number }[]} outages  seconds since the load started
 * @param {{ key: keyof Sample, title: string, unit: string }} chart
 */
export function toSvg(samples, outages, { key, title, unit }) {
  const width = 720;
  const height = 240;
  const left = 60;
  const right = 20;
  const top = 30;
  const bottom = 40;
  const points = samples.filter((s) => typeof s[key] === 'number');
  const maxX = Math.max(1, ...samples.map((s) => s.seconds));
  const maxY = Math.max(1e-9, ...points.map((s) => /** @type {number} */ (s[key]))) * 1.1;
  const x = (/** @type {number} */ seconds) => left + (seconds / maxX) * (width - left - right);
  const y = (/** @type {number} */ value) => top + (1 - value / maxY) * (height - top - bottom);
  const down = outages.map(
    ({ from, to }) =>
      `<rect x="${x(from).toFixed(1)}" y="${top}" width="${(x(Math.min(to, maxX)) - x(from)).toFixed(1)}" height="${height - top - bottom}" fill="#f3d6d6"/>`,
  );
  const line = points
    .map((s, i) => `${i === 0 ? 'M' : 'L'}${x(s.seconds).toFixed(1)},${y(/** @type {number} */ (s[key])).toFixed(1)}`)
    .join(' ');
  const ticksY = [0, 0.25, 0.5, 0.75, 1].map((f) => {
    const value = (maxY / 1.1) * f;
    return `<line x1="${left}" x2="${width - right}" y1="${y(value).toFixed(1)}" y2="${y(value).toFixed(1)}" stroke="#e4e4e4"/><text x="${left - 6}" y="${(y(value) + 4).toFixed(1)}" text-anchor="end">${Number(value.toPrecision(3))}</text>`;
  });
  const ticksX = [0, 0.25, 0.5, 0.75, 1].map((f) => {
    const minutes = (maxX * f) / 60;
    return `<text x="${x(maxX * f).toFixed(1)}" y="${height - bottom + 16}" text-anchor="middle">${Number(minutes.toFixed(1))}</text>`;
  });
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="11">
<rect width="${width}" height="${height}" fill="white"/>
${down.join('\n')}
${ticksY.join('\n')}
${ticksX.join('\n')}
<text x="${left}" y="18" font-size="13">${escapeXml(title)}${unit ? ` (${escapeXml(unit)})` : ''}</text>
<text x="${width - right}" y="18" text-anchor="end" fill="#a04040">shaded: QuestDB down</text>
<text x="${(left + width - right) / 2}" y="${height - 6}" text-anchor="middle">minutes</text>
<path d="${line}" fill="none" stroke="#2060a0" stroke-width="1.5"/>
</svg>
`;
}

export const CHARTS = /** @type {const} */ ([
  { file: 'rss.svg', key: 'rssMb', title: 'Gateway resident memory', unit: 'MB' },
  { file: 'rss-anon.svg', key: 'anonMb', title: 'Gateway resident memory of its own (RssAnon)', unit: 'MB' },
  { file: 'rss-file.svg', key: 'fileMb', title: 'Gateway resident mapped files (RssFile)', unit: 'MB' },
  { file: 'heap.svg', key: 'heapMb', title: 'Gateway V8 heap in use, HTTP thread', unit: 'MB' },
  { file: 'heap-delivery.svg', key: 'deliveryHeapMb', title: 'Gateway V8 heap in use, delivery thread', unit: 'MB' },
  { file: 'heaps-committed.svg', key: 'heapsCommittedMb', title: 'Gateway V8 heaps committed, both threads', unit: 'MB' },
  { file: 'fds.svg', key: 'fds', title: 'Gateway file descriptors other than sockets', unit: '' },
  { file: 'sockets.svg', key: 'sockets', title: 'Gateway open sockets', unit: '' },
  { file: 'queue-file.svg', key: 'queueFileMb', title: 'Queue file with its WAL', unit: 'MB' },
  { file: 'latency-p50.svg', key: 'p50Ms', title: 'Ingest latency p50', unit: 'ms' },
  { file: 'latency-p99.svg', key: 'p99Ms', title: 'Ingest latency p99', unit: 'ms' },
]);
