import type { FC } from 'hono/jsx';
import { ChartFrame, PLOT_HEIGHT, PLOT_WIDTH } from './chart-frame.js';
import { formatCount } from './format.js';

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
  const slot = PLOT_WIDTH / counts.length;
  const total = counts.reduce((a, b) => a + b, 0);
  const finished = counts.slice(0, -1);
  const peak = Math.max(0, ...finished);
  const summary = `Readings per minute over the last hour: ${formatCount(total)} in all, at most ${formatCount(peak)} in one minute, ${formatCount(counts.at(-1) ?? 0)} so far this minute.`;
  return (
    <ChartFrame top={formatCount(top)} bottom="0" xLabels={['60 min ago', '30 min ago', 'now']} summary={summary}>
      {counts.map((count, i) => {
        const height = (count / top) * PLOT_HEIGHT;
        return (
          <rect
            class={i === counts.length - 1 ? 'now' : 'bar'}
            x={(i * slot + slot * 0.1).toFixed(1)}
            y={(PLOT_HEIGHT - height).toFixed(2)}
            width={(slot * 0.8).toFixed(1)}
            height={height.toFixed(2)}
          />
        );
      })}
    </ChartFrame>
  );
};
