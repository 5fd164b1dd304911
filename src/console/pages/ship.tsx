import type { FC } from 'hono/jsx';
import type { CargoEntry } from '../../catalogue/catalogue.js';
import type { ShipView } from '../activity/ship-table.js';
import { type CargoHistory, type HistoryPoint, SPANS, type SpanHours } from '../cargo-history.js';
import { ChartFrame, PLOT_HEIGHT, PLOT_WIDTH } from './chart-frame.js';
import { formatAgo, formatCount, formatTime, formatValue } from './format.js';
import { Section, Table } from './layout.js';

/** A cargo id as the page shows it: its catalogue entry's name and unit when it has one. */
export interface CargoLabel {
  cargoId: string;
  /** The catalogue's name ("Reefer 4 temperature", or "Temperature (temp_hold_2)" for a pattern), else the id. */
  name: string;
  entry: CargoEntry | undefined;
}

export interface ShipModel {
  shipId: string;
  /** The ship's name in the site's catalogue. */
  name: string | undefined;
  /** What the Devices table knows of it; undefined when it does not list the ship. */
  seen: ShipView | undefined;
  history: CargoHistory;
  span: SpanHours;
  /** The cargo ids on the page (latest values and history together), each with its catalogue entry. */
  cargo: CargoLabel[];
  /** Readings queued for the local QuestDB and not yet in it: the charts lag by as much. */
  questdbBacklog: number | undefined;
  now: number;
}

/** A value with the decimals and unit the catalogue gives its cargo. */
export function formatCargoValue(value: number, entry: CargoEntry | undefined): string {
  const digits = entry?.decimals === undefined ? formatValue(value) : value.toFixed(entry.decimals);
  return entry?.unit === undefined ? digits : `${digits} ${entry.unit}`;
}

const outOfRange = (value: number, entry: CargoEntry | undefined): boolean =>
  (entry?.min !== undefined && value < entry.min) || (entry?.max !== undefined && value > entry.max);

const spanWords = (span: SpanHours): string => (span === 1 ? 'the last hour' : `the last ${span} hours`);

export const Ship: FC<ShipModel> = (model) => {
  const { shipId, seen, span, cargo, now } = model;
  const latest = new Map(seen?.lastValues.map((v) => [v.cargoId, v.value]));
  return (
    <>
      <Section
        name="ship"
        heading={
          <>
            Now
            {model.name === undefined ? null : (
              <span class="muted">
                {' '}
                · ship id <span class="mono">{shipId}</span>
              </span>
            )}
          </>
        }
      >
        {seen === undefined ? (
          <p class="muted" id="ship-not-listed">
            The Devices table does not list this ship: no readings of it since that table began, or it was left out.
          </p>
        ) : (
          <dl class="facts">
            <dt>Last seen</dt>
            <dd>
              <time datetime={new Date(seen.lastSeenMs).toISOString()}>{formatAgo(seen.lastSeenMs, now)}</time>{' '}
              {seen.stale ? <span class="badge badge-stale">stale</span> : <span class="badge badge-live">live</span>}
            </dd>
            <dt>Key</dt>
            <dd>{seen.key}</dd>
          </dl>
        )}
        {latest.size === 0 ? null : (
          <Table label="Latest values" id="latest-values" columns={['Cargo', 'Latest value']}>
            {cargo
              .filter((c) => latest.has(c.cargoId))
              .map((c) => {
                const value = latest.get(c.cargoId)!;
                return (
                  <tr>
                    <th scope="row">
                      {c.name}
                      {c.name === c.cargoId ? null : <span class="hint mono">{c.cargoId}</span>}
                    </th>
                    <td data-label="Latest value">
                      {formatCargoValue(value, c.entry)}
                      {outOfRange(value, c.entry) ? (
                        <>
                          {' '}
                          <span class="badge badge-bad">out of range</span>
                        </>
                      ) : null}
                    </td>
                  </tr>
                );
              })}
          </Table>
        )}
      </Section>
      <Section name="history" heading={`Cargo over ${spanWords(span)}`}>
        <nav aria-label="Span" class="actions">
          {(Object.keys(SPANS).map(Number) as SpanHours[]).map((hours) =>
            hours === span ? <strong aria-current="true">{hours} h</strong> : <a href={`?hours=${hours}`}>{hours} h</a>,
          )}
        </nav>
        <History {...model} />
      </Section>
    </>
  );
};

const History: FC<ShipModel> = ({ history, span, cargo, questdbBacklog }) => {
  if (history.kind === 'off')
    return (
      <p class="notice" id="history-state">
        This gateway writes to no local QuestDB, so it keeps no history to chart: the latest values above are all it has. The readings go to
        the destinations on the Overview.
      </p>
    );
  if (history.kind === 'unreachable')
    return (
      <p class="error" id="history-state">
        QuestDB at {history.url} did not answer ({history.message}): no history to chart now. The latest values above are the gateway's own;
        the readings wait in the queue until QuestDB takes them.
      </p>
    );
  const charted = cargo.filter((c) => (history.byCargo.get(c.cargoId)?.length ?? 0) > 0);
  return (
    <>
      {charted.length === 0 ? (
        <p class="muted" id="history-state">
          QuestDB at {history.url} has no readings of this ship from this site over {spanWords(span)}.
        </p>
      ) : (
        <div class="charts" id="history-state">
          {charted.map((c) => (
            <div class="cargo-chart" data-cargo={c.cargoId}>
              <h3>
                {c.name}
                {c.entry?.unit === undefined ? null : <span class="muted"> ({c.entry.unit})</span>}
              </h3>
              <CargoChart label={c} points={history.byCargo.get(c.cargoId)!} fromMs={history.fromMs} toMs={history.toMs} span={span} />
            </div>
          ))}
        </div>
      )}
      <p class="hint">
        From QuestDB at {history.url}: each point the average of {bucketWords(history.bucketMs)} of readings, the band their least and
        largest value
        {cargo.some((c) => c.entry?.min !== undefined || c.entry?.max !== undefined) ? ', green the normal range the catalogue gives' : ''}.
        {questdbBacklog !== undefined && questdbBacklog > 0
          ? ` ${formatCount(questdbBacklog)} readings wait in the queue for QuestDB: the charts show them once it has taken them.`
          : ''}
      </p>
    </>
  );
};

const bucketWords = (ms: number): string => `${ms / 60_000} ${ms === 60_000 ? 'minute' : 'minutes'}`;

/** Where a value lies on the axis (0 at the top), within the drawing. */
const scaleY = (value: number, low: number, high: number): number => PLOT_HEIGHT - ((value - low) / (high - low)) * PLOT_HEIGHT;

/** The axis bounds: every point and the normal range inside, a little room above and below, never a zero span. */
function bounds(points: readonly HistoryPoint[], entry: CargoEntry | undefined): [number, number] {
  let low = Math.min(...points.map((p) => p.min), entry?.min ?? Number.POSITIVE_INFINITY);
  let high = Math.max(...points.map((p) => p.max), entry?.max ?? Number.NEGATIVE_INFINITY);
  if (low === high) {
    low -= Math.abs(low) * 0.1 || 1;
    high += Math.abs(high) * 0.1 || 1;
  }
  const room = (high - low) * 0.05;
  return [low - room, high + room];
}

/** Runs of points without a gap longer than two buckets, so a silence shows as a break in the line. */
function runsOf(points: readonly HistoryPoint[], gapMs: number): HistoryPoint[][] {
  const runs: HistoryPoint[][] = [];
  for (const point of points) {
    const run = runs.at(-1);
    if (run !== undefined && point.ms - run.at(-1)!.ms <= gapMs) run.push(point);
    else runs.push([point]);
  }
  return runs;
}

const CargoChart: FC<{ label: CargoLabel; points: HistoryPoint[]; fromMs: number; toMs: number; span: SpanHours }> = ({
  label,
  points,
  fromMs,
  toMs,
  span,
}) => {
  const { entry } = label;
  const [low, high] = bounds(points, entry);
  const x = (ms: number) => (((ms - fromMs) / (toMs - fromMs)) * PLOT_WIDTH).toFixed(1);
  const y = (value: number) => scaleY(value, low, high).toFixed(2);
  const bucketMs = SPANS[span].bucketMs;
  const last = points.at(-1)!;
  const averages = points.map((p) => p.avg);
  const value = (v: number) => formatCargoValue(v, entry);
  const normal =
    entry?.min === undefined && entry?.max === undefined
      ? ''
      : `; normal range ${entry.min === undefined ? 'up to' : value(entry.min)}${entry.min !== undefined && entry.max !== undefined ? ' to ' : ' '}${entry.max === undefined ? 'and up' : value(entry.max)}`;
  const summary =
    `${label.name} over ${spanWords(span)}: ${points.length} averages of ${bucketWords(bucketMs)}, from ${value(Math.min(...averages))} ` +
    `to ${value(Math.max(...averages))}, the latest ${value(last.avg)} at ${formatTime(last.ms)}${normal}.`;
  const normalTop = entry?.max === undefined ? 0 : Number(y(Math.min(entry.max, high)));
  const normalBottom = entry?.min === undefined ? PLOT_HEIGHT : Number(y(Math.max(entry.min, low)));
  return (
    <ChartFrame top={value(high)} bottom={value(low)} xLabels={[`${span} h ago`, `${span / 2} h ago`, 'now']} summary={summary}>
      {normal === '' ? null : (
        <rect class="normal" x={0} y={normalTop.toFixed(2)} width={PLOT_WIDTH} height={Math.max(0, normalBottom - normalTop).toFixed(2)} />
      )}
      {runsOf(points, 2 * bucketMs).map((run) => (
        <>
          <polygon
            class="range"
            points={[...run.map((p) => `${x(p.ms)},${y(p.max)}`), ...[...run].reverse().map((p) => `${x(p.ms)},${y(p.min)}`)].join(' ')}
          />
          {run.length === 1 ? (
            <line
              class="dot"
              x1={x(run[0]!.ms)}
              y1={y(run[0]!.avg)}
              x2={x(run[0]!.ms)}
              y2={y(run[0]!.avg)}
              vector-effect="non-scaling-stroke"
            />
          ) : (
            <polyline class="line" points={run.map((p) => `${x(p.ms)},${y(p.avg)}`).join(' ')} vector-effect="non-scaling-stroke" />
          )}
        </>
      ))}
    </ChartFrame>
  );
};
