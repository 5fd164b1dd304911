import { escapeIlp } from '../questdb/ilp-escape.js';
import type { SinkSnapshot } from './snapshot.js';

export const SINK_HEALTH_TABLE = 'gateway_sink_health';

/** One sink's row: how far behind it is and what it did since the gateway started. */
export interface SinkHealthRow {
  sink: string;
  /** Readings still queued for this sink (past its progress mark). */
  backlogReadings: number;
  /** Age of the oldest reading the sink has not delivered; null when it is up to date. */
  oldestAgeSeconds: number | null;
  deliveredReadings: number;
  failedDeliveries: number;
  deadLettered: number;
  /** Readings the sink skipped under `drop_oldest` while the queue was full. */
  droppedReadings: number;
  /**
   * `failing` while its latest attempts failed, `waiting` while the attempt under way has had no
   * answer for seconds, `behind` while its oldest waiting reading is older than its flush interval
   * and a minute, else `up to date`.
   */
  state: string;
}

/** A backlog whose oldest reading is older than this beyond the sink's own flush interval is behind. */
export const BEHIND_AFTER_SECONDS = 60;

/**
 * The sink's oldest waiting reading is within its own flush interval and a minute: readings that
 * arrived since its last send, or a sink that sends every ten minutes holding them that long by design.
 */
export const withinInterval = (sink: SinkSnapshot): boolean =>
  (sink.oldestAgeSeconds ?? 0) <= BEHIND_AFTER_SECONDS + sink.flushIntervalMs / 1000;

/** A sink of the /status snapshot as its health row. */
export function sinkHealthRow(sink: SinkSnapshot): SinkHealthRow {
  const state =
    sink.consecutiveFailures > 0
      ? 'failing'
      : sink.waitingSeconds !== null
        ? 'waiting'
        : sink.backlog > 0 && !withinInterval(sink)
          ? 'behind'
          : 'up to date';
  return {
    sink: sink.name,
    backlogReadings: sink.backlog,
    oldestAgeSeconds: sink.oldestAgeSeconds,
    deliveredReadings: sink.delivered,
    failedDeliveries: sink.failures,
    deadLettered: sink.deadLettered,
    droppedReadings: sink.dropped,
    state,
  };
}

export const createSinkHealthTable = (table = SINK_HEALTH_TABLE): string => `CREATE TABLE IF NOT EXISTS ${table} (
  time TIMESTAMP, gateway SYMBOL, sink SYMBOL, state SYMBOL, backlog_readings LONG, oldest_age_s DOUBLE,
  delivered_readings LONG, failed_deliveries LONG, dead_lettered LONG, dropped_readings LONG
) TIMESTAMP(time) PARTITION BY DAY TTL 30 DAYS WAL`;

/** A sink's counters as ILP columns (integers with ILP's `i` suffix): its health row's, and its part of a site's report to the centre. */
export function sinkColumns(row: Omit<SinkHealthRow, 'sink' | 'state'>): string {
  const columns = [
    `backlog_readings=${row.backlogReadings}i`,
    `delivered_readings=${row.deliveredReadings}i`,
    `failed_deliveries=${row.failedDeliveries}i`,
    `dead_lettered=${row.deadLettered}i`,
    `dropped_readings=${row.droppedReadings}i`,
  ];
  if (row.oldestAgeSeconds !== null) columns.push(`oldest_age_s=${row.oldestAgeSeconds}`);
  return columns.join(',');
}

/** One ILP line per sink; the row time is in nanoseconds. */
export function encodeSinkHealth(gateway: string, rows: readonly SinkHealthRow[], now: number, table = SINK_HEALTH_TABLE): Buffer {
  const lines = rows.map(
    (row) =>
      `${table},gateway=${escapeIlp(gateway)},sink=${escapeIlp(row.sink)},state=${escapeIlp(row.state)} ${sinkColumns(row)} ${now}000000n\n`,
  );
  return Buffer.from(lines.join(''));
}
