import { formatDuration } from '../../health/gateway-state.js';

export { formatDuration };

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];

/** "512 B", "3.4 MiB": binary units, as the settings take them. */
export function formatBytes(bytes: number): string {
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(value < 10 ? 1 : 0)} ${UNITS[unit]}`;
}

/** "12,345": thousands separated, the same in every locale a browser may have. */
export const formatCount = (n: number): string =>
  Math.round(n)
    .toString()
    .replace(/\B(?=(\d{3})+(?!\d))/g, ',');

/** "3 min ago", for times the page shows next to their ISO form. */
export const formatAgo = (ms: number, now: number): string => `${formatDuration((now - ms) / 1000)} ago`;

/** ISO 8601 in UTC to the second: what logs, QuestDB and the CLI show. */
export const formatTime = (ms: number): string => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');

/** A reading's value as JSON would carry it. */
export const formatValue = (value: number): string => (Object.is(value, -0) ? '-0' : String(value));
