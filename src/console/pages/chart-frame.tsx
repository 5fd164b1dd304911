import type { Child, FC } from 'hono/jsx';

/** The drawing's own units: the SVG stretches to its box, so these are proportions, not pixels. */
export const PLOT_WIDTH = 1000;
export const PLOT_HEIGHT = 100;

/**
 * A chart's frame: the shapes in an SVG that stretches to the width of the page, and its labels in
 * HTML beside and under it, so they keep the page's type size on a phone as on a desktop (text
 * inside a scaled SVG shrinks with it). Screen readers get the summary instead of the drawing.
 */
export const ChartFrame: FC<{ top: string; bottom: string; xLabels: readonly string[]; summary: string; children?: Child }> = ({
  top,
  bottom,
  xLabels,
  summary,
  children,
}) => (
  <figure class="chart">
    <div class="plot">
      <div class="y-axis" aria-hidden="true">
        <span class="axis-label">{top}</span>
        <span class="axis-label">{bottom}</span>
      </div>
      <svg viewBox={`0 0 ${PLOT_WIDTH} ${PLOT_HEIGHT}`} preserveAspectRatio="none" role="img" aria-label={summary}>
        <line class="axis" x1={0} y1={PLOT_HEIGHT} x2={PLOT_WIDTH} y2={PLOT_HEIGHT} vector-effect="non-scaling-stroke" />
        <line class="axis" x1={0} y1={0} x2={0} y2={PLOT_HEIGHT} vector-effect="non-scaling-stroke" />
        {children}
      </svg>
      <div class="x-axis" aria-hidden="true">
        {xLabels.map((label) => (
          <span class="axis-label">{label}</span>
        ))}
      </div>
    </div>
    <figcaption class="muted">{summary}</figcaption>
  </figure>
);
