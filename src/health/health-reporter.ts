import type { Logger } from 'pino';
import { escapeIlp, ilpString } from '../questdb/ilp-escape.js';
import type { QuestDbHttp } from '../questdb/questdb-http.js';
import { createEventsTable, encodeEvents, EVENTS_TABLE, type GatewayEvent } from './gateway-events.js';
import { describeGatewayState, describeStop, formatDuration, OutageWatch, type GatewayState } from './gateway-state.js';
import { createSinkHealthTable, encodeSinkHealth, sinkHealthRow } from './sink-health.js';
import type { GatewaySnapshot } from './snapshot.js';

export const HEALTH_TABLE = 'gateway_health';
export const KEY_HEALTH_TABLE = 'gateway_key_health';

/** Columns added after the table's first release, each `[name, type]`: tables of older gateways gain them at start. */
const ADDED_COLUMNS = [
  ['clock_synced', 'BOOLEAN'],
  // clock_synced cannot say "unknown" (QuestDB booleans have no null); this can, for the clock alert.
  ['clock', 'SYMBOL'],
  ['queue_max_bytes', 'LONG'],
  ['state', 'SYMBOL'],
  ['state_text', 'VARCHAR'],
  ['outage_s', 'DOUBLE'],
] as const;

export const createHealthTable = (table: string): string => `CREATE TABLE IF NOT EXISTS ${table} (
  time TIMESTAMP, gateway SYMBOL, ready BOOLEAN, queue_readings LONG, queue_bytes LONG, oldest_age_s DOUBLE,
  dead_letters LONG, flush_failures LONG, consecutive_flush_failures LONG, accepted_readings LONG,
  flushed_readings LONG, refused_requests LONG, ${ADDED_COLUMNS.map(([name, type]) => `${name} ${type}`).join(', ')}
) TIMESTAMP(time) PARTITION BY DAY TTL 30 DAYS WAL`;

export const createKeyHealthTable = (table: string): string => `CREATE TABLE IF NOT EXISTS ${table} (
  time TIMESTAMP, gateway SYMBOL, key SYMBOL, ship_prefix VARCHAR, accepted_requests LONG, accepted_readings LONG,
  refused_requests LONG, last_seen TIMESTAMP
) TIMESTAMP(time) PARTITION BY DAY TTL 30 DAYS WAL`;
/** QuestDB adds one column per statement on WAL tables. */
const addColumns = (table: string): string[] =>
  ADDED_COLUMNS.map(([name, type]) => `ALTER TABLE ${table} ADD COLUMN IF NOT EXISTS ${name} ${type}`);

/** Events kept for a QuestDB that does not answer; beyond this the oldest are dropped. */
const MAX_PENDING_EVENTS = 50;

/**
 * Writes the gateway's own health into QuestDB next to the readings, so the dashboard can show
 * queue depth, the age of the oldest queued reading and flush errors, one row per device key and
 * one per sink (its backlog and oldest undelivered reading), and its events (starts, stops,
 * outages) for the dashboards' annotations. These rows are best effort: they bypass the queue and
 * are skipped while QuestDB is away (events wait for the next report that gets through).
 */
export class HealthReporter {
  #tableReady = false;
  #failing = false;
  readonly #outage = new OutageWatch();
  #outageSince: number | undefined;
  #pending: GatewayEvent[] = [];

  constructor(
    private readonly questdb: QuestDbHttp,
    private readonly gateway: string,
    private readonly log: Logger,
    private readonly table = HEALTH_TABLE,
    private readonly eventsTable = EVENTS_TABLE,
  ) {}

  /** Sends events with the next write that gets through. */
  event(...events: GatewayEvent[]): void {
    this.#pending.push(...events);
    this.#pending.splice(0, this.#pending.length - MAX_PENDING_EVENTS);
  }

  /**
   * Creates the tables the dashboards read and sends the pending events: at start, before
   * anything else, so the dashboards and alerts find empty tables rather than none.
   */
  prepare(): Promise<boolean> {
    return this.#write(() => []);
  }

  async report(snapshot: GatewaySnapshot, now = Date.now()): Promise<boolean> {
    // Watched on every report, written or not, so an outage of QuestDB is timed from its start.
    const outageSince = this.#outage.observe(snapshot, now);
    if (outageSince === undefined && this.#outageSince !== undefined) {
      const text = `QuestDB unreachable for ${formatDuration((now - this.#outageSince) / 1000)}`;
      this.event({ time: this.#outageSince, until: now, event: 'outage', reason: 'questdb', text, version: snapshot.version });
    }
    this.#outageSince = outageSince;
    const state = describeGatewayState(snapshot, outageSince, now);
    return this.#write(() => [
      encode(this.table, this.gateway, snapshot, state, now),
      encodeKeys(this.gateway, snapshot, now),
      encodeSinkHealth(this.gateway, snapshot.sinks.map(sinkHealthRow), now),
    ]);
  }

  /** The last row of a run: the gateway stopped, and why; with the `stopped` event. */
  reportStopped(snapshot: GatewaySnapshot, reason: { code: string; text: string }, now = Date.now()): Promise<boolean> {
    const state = describeStop(snapshot, reason.text);
    this.event({ time: now, event: 'stopped', reason: reason.code, text: state.text, version: snapshot.version });
    return this.#write(() => [encode(this.table, this.gateway, snapshot, state, now)]);
  }

  async #write(rows: () => Buffer[]): Promise<boolean> {
    const events = [...this.#pending];
    try {
      if (!this.#tableReady) {
        await this.questdb.exec(createHealthTable(this.table));
        for (const statement of addColumns(this.table)) await this.questdb.exec(statement);
        await this.questdb.exec(createKeyHealthTable(KEY_HEALTH_TABLE));
        await this.questdb.exec(createSinkHealthTable());
        await this.questdb.exec(createEventsTable(this.eventsTable));
        this.#tableReady = true;
      }
      const body = Buffer.concat([...rows(), encodeEvents(this.eventsTable, this.gateway, events)]);
      if (body.length > 0) {
        const outcome = await this.questdb.write(body);
        if (!outcome.ok) throw new Error(outcome.message);
      }
      this.#pending = this.#pending.filter((e) => !events.includes(e));
      this.#failing = false;
      return true;
    } catch (error) {
      this.#tableReady = false;
      if (!this.#failing) this.log.debug({ event: 'health_report_failed', error: (error as Error).message }, 'health report not written');
      this.#failing = true;
      return false;
    }
  }
}

/** One ILP line; integers carry ILP's `i` suffix, the row time is in nanoseconds. */
function encode(table: string, gateway: string, s: GatewaySnapshot, state: GatewayState, now: number): Buffer {
  const columns = [
    `state_text=${ilpString(state.text)}`,
    `ready=${s.ready ? 't' : 'f'}`,
    `queue_readings=${s.queue.readings}i`,
    `queue_bytes=${s.queue.bytes}i`,
    `queue_max_bytes=${s.queue.maxBytes}i`,
    `dead_letters=${s.deadLetters}i`,
    `flush_failures=${s.totals.flushFailures}i`,
    `consecutive_flush_failures=${s.flush.consecutiveFailures}i`,
    `accepted_readings=${s.totals.acceptedReadings}i`,
    `flushed_readings=${s.totals.flushedReadings}i`,
    `refused_requests=${s.totals.refusedRequests}i`,
  ];
  if (s.queue.oldestAgeSeconds !== null) columns.push(`oldest_age_s=${s.queue.oldestAgeSeconds}`);
  if (s.clockSynchronized !== null) columns.push(`clock_synced=${s.clockSynchronized ? 't' : 'f'}`);
  if (state.outageSeconds !== null) columns.push(`outage_s=${state.outageSeconds}`);
  const clock = s.clockSynchronized === null ? '' : `,clock=${s.clockSynchronized ? 'synchronised' : 'unsynchronised'}`;
  return Buffer.from(`${table},gateway=${escapeIlp(gateway)},state=${state.code}${clock} ${columns.join(',')} ${now}000000n\n`);
}

/** One ILP line per key with its counters, so a site manager sees which device is failing. */
function encodeKeys(gateway: string, s: GatewaySnapshot, now: number): Buffer {
  const lines = s.keys.map((k) => {
    const columns = [
      `accepted_requests=${k.acceptedRequests}i`,
      `accepted_readings=${k.acceptedReadings}i`,
      `refused_requests=${k.refusedRequests}i`,
    ];
    if (k.shipPrefix !== null) columns.push(`ship_prefix=${JSON.stringify(k.shipPrefix)}`);
    if (k.lastSeen !== null) columns.push(`last_seen=${Date.parse(k.lastSeen)}000t`);
    return `${KEY_HEALTH_TABLE},gateway=${escapeIlp(gateway)},key=${escapeIlp(k.name)} ${columns.join(',')} ${now}000000n\n`;
  });
  return Buffer.from(lines.join(''));
}
