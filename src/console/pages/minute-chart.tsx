import type { FC } from 'hono/jsx';
import { formatCount } from './format.js';

const WIDTH = 640;
const HEIGHT = 170;
const LEFT = 48;
const RIGHT = 8;
const TOP = 10;
const BOTTOM = 140;

/** The axis top: 1, 2 or 5 times a power of ten, at or above the largest count. */
export function niceMax(max: number): number {
  if (max <= 0) return 1;
  const power = 10 ** Math.floor(Math.log10(max));
  for (const step of [1, 2, 5, 10]) if (step * power >= max) return step * power;
  return 10 * power;
}

/**
 * Readings per minute over the last hour as bars, drawn on the server as SVG (no script, no
 * library); the newest bar is the current, unfinished minute. Screen readers get the figures in words.
 */
export const MinuteChart: FC<{ counts: readonly number[] }> = ({ counts }) => {
  const top = niceMax(Math.max(0, ...counts));
  const slot = (WIDTH - LEFT - RIGHT) / counts.length;
  const total = counts.reduce((a, b) => a + b, 0);
  const finished = counts.slice(0, -1);
  const peak = Math.max(0, ...finished);
  const summary = `Readings per minute over the last hour: ${formatCount(total)} in all, at most ${formatCount(peak)} in one minute, ${formatCount(counts.at(-1) ?? 0)} so far this minute.`;
  return (
    <figure class="chart">
      <svg viewBox={`0 0 ${WIDTH} ${HEIGHT}`} role="img" aria-label={summary}>
        <line class="axis" x1={LEFT} y1={BOTTOM + 0.5} x2={WIDTH - RIGHT} y2={BOTTOM + 0.5} />
        <line class="axis" x1={LEFT - 0.5} y1={TOP} x2={LEFT - 0.5} y2={BOTTOM} />
        <text x={LEFT - 6} y={TOP + 4} text-anchor="end">
          {formatCount(top)}
        </text>
        <text x={LEFT - 6} y={BOTTOM} text-anchor="end">
          0
        </text>
        {counts.map((count, i) => {
          const height = (count / top) * (BOTTOM - TOP);
          return (
            <rect
              class={i === counts.length - 1 ? 'now' : 'bar'}
              x={(LEFT + i * slot + 0.5).toFixed(1)}
              y={(BOTTOM - height).toFixed(1)}
              width={Math.max(1, slot - 1.5).toFixed(1)}
              height={height.toFixed(1)}
            />
          );
        })}
        <text x={LEFT} y={BOTTOM + 18}>
          60 min ago
        </text>
        <text x={(LEFT + WIDTH - RIGHT) / 2} y={BOTTOM + 18} text-anchor="middle">
          30 min ago
        </text>
        <text x={WIDTH - RIGHT} y={BOTTOM + 18} text-anchor="end">
          now
        </text>
      </svg>
      <figcaption class="muted">{summary}</figcaption>
    </figure>
  );
};
