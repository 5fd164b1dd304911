import { escapeIlp, ilpString } from '../questdb/ilp-escape.js';
import type { QuestDbClient } from '../questdb/questdb-http.js';
import type { FleetReport } from './fleet-report.js';
import { sinkColumns } from './sink-health.js';

export const FLEET_SITE_TABLE = 'fleet_site_health';
export const FLEET_SINK_TABLE = 'fleet_sink_health';
export const FLEET_CONFLICT_TABLE = 'fleet_site_conflicts';

/**
 * One row per report: `time` is the centre's clock when the report arrived (the central gateway's,
 * or the central QuestDB's for a site writing to it directly), `site_time` the site's when it sent
 * it, so the difference is the site's clock offset (plus the report's transit, milliseconds).
 */
export const createFleetSiteTable = (table = FLEET_SITE_TABLE): string => `CREATE TABLE IF NOT EXISTS ${table} (
  time TIMESTAMP, site SYMBOL, instance SYMBOL, gateway SYMBOL, version SYMBOL, state SYMBOL, state_text VARCHAR, ready BOOLEAN,
  clock SYMBOL, site_time TIMESTAMP, uptime_s LONG, queue_readings LONG, queue_bytes LONG, queue_max_bytes LONG,
  oldest_age_s DOUBLE, dead_letters LONG, accepted_readings LONG
) TIMESTAMP(time) PARTITION BY DAY TTL 30 DAYS WAL`;

/** One row per sink of each report: its backlog and the age of its oldest undelivered reading. */
export const createFleetSinkTable = (table = FLEET_SINK_TABLE): string => `CREATE TABLE IF NOT EXISTS ${table} (
  time TIMESTAMP, site SYMBOL, sink SYMBOL, state SYMBOL, backlog_readings LONG, oldest_age_s DOUBLE,
  delivered_readings LONG, failed_deliveries LONG, dead_lettered LONG, dropped_readings LONG
) TIMESTAMP(time) PARTITION BY DAY TTL 30 DAYS WAL`;

/**
 * One row per site claimed by two gateway instances, at every housekeeping run of the centre while
 * the claimant is refused (claims/site-claims.ts): the owner, the claimant, and how many of its
 * requests were refused. What the Fleet dashboard's alert on two gateways with one site id reads.
 */
export const createFleetConflictTable = (table = FLEET_CONFLICT_TABLE): string => `CREATE TABLE IF NOT EXISTS ${table} (
  time TIMESTAMP, site SYMBOL, owner_instance SYMBOL, owner_gateway SYMBOL, claimant_instance SYMBOL, claimant_gateway SYMBOL,
  refused_since TIMESTAMP, refused_requests LONG
) TIMESTAMP(time) PARTITION BY DAY TTL 30 DAYS WAL`;

/** A site two instances claim, as its conflict row tells it. */
export interface SiteConflictRow {
  site: string;
  owner: { instance: string; gateway: string | null } | undefined;
  instance: string;
  gateway: string | null;
  firstMs: number;
  refusedRequests: number;
}

/** The conflicts as ILP rows at `atMs`, the centre's clock. */
export function encodeSiteConflicts(conflicts: readonly SiteConflictRow[], atMs: number, table = FLEET_CONFLICT_TABLE): Buffer {
  const tag = (name: string, value: string | null | undefined) =>
    value === null || value === undefined ? '' : `,${name}=${escapeIlp(value)}`;
  return Buffer.from(
    conflicts
      .map(
        (c) =>
          `${table},site=${escapeIlp(c.site)}${tag('owner_instance', c.owner?.instance)}${tag('owner_gateway', c.owner?.gateway)}` +
          `${tag('claimant_instance', c.instance)}${tag('claimant_gateway', c.gateway)} ` +
          `refused_since=${c.firstMs}000t,refused_requests=${c.refusedRequests}i ${atMs}000000n\n`,
      )
      .join(''),
  );
}

/** The tables a report's rows go to. */
export interface FleetTables {
  site: string;
  sink: string;
}

const FLEET_TABLES: FleetTables = { site: FLEET_SITE_TABLE, sink: FLEET_SINK_TABLE };

/**
 * A report as ILP rows. `receivedMs`: the centre's clock at receipt; undefined leaves the row time
 * to the QuestDB that takes it (a site writing straight into the central QuestDB).
 */
export function encodeFleetReport(report: FleetReport, receivedMs: number | undefined, tables = FLEET_TABLES): Buffer {
  const at = receivedMs === undefined ? '' : ` ${receivedMs}000000n`;
  const site = escapeIlp(report.site);
  const clock = report.clockSynchronized === null ? '' : `,clock=${report.clockSynchronized ? 'synchronised' : 'unsynchronised'}`;
  const columns = [
    `state_text=${ilpString(report.stateText)}`,
    `ready=${report.ready ? 't' : 'f'}`,
    `site_time=${Date.parse(report.sentAt)}000t`,
    `uptime_s=${report.uptimeSeconds}i`,
    `queue_readings=${report.queue.readings}i`,
    `queue_bytes=${report.queue.bytes}i`,
    `queue_max_bytes=${report.queue.maxBytes}i`,
    `dead_letters=${report.deadLetters}i`,
    `accepted_readings=${report.acceptedReadings}i`,
  ];
  if (report.queue.oldestAgeSeconds !== null) columns.push(`oldest_age_s=${report.queue.oldestAgeSeconds}`);
  const instance = report.instance === undefined ? '' : `,instance=${escapeIlp(report.instance)}`;
  const lines = [
    `${tables.site},site=${site}${instance},gateway=${escapeIlp(report.gateway)},version=${escapeIlp(report.version)},state=${report.state}${clock} ${columns.join(',')}${at}\n`,
  ];
  for (const sink of report.sinks) {
    lines.push(`${tables.sink},site=${site},sink=${escapeIlp(sink.sink)},state=${escapeIlp(sink.state)} ${sinkColumns(sink)}${at}\n`);
  }
  return Buffer.from(lines.join(''));
}

/**
 * Writes sites' reports into a QuestDB: the central gateway's, for the reports sites send it, or
 * a central QuestDB a site writes to directly. Best effort, beside the readings and not through the
 * queue: a report is about now, and the next one follows at the site's next report interval.
 */
export class FleetRecorder {
  #tablesReady = false;
  #conflictTableReady = false;

  constructor(
    private readonly questdb: Pick<QuestDbClient, 'exec' | 'write'>,
    private readonly tables = FLEET_TABLES,
  ) {}

  /** Writes the conflicts' rows (the centre's claims); false when QuestDB did not take them. */
  async recordConflicts(conflicts: readonly SiteConflictRow[], atMs: number): Promise<{ ok: true } | { ok: false; message: string }> {
    if (conflicts.length === 0) return { ok: true };
    try {
      if (!this.#conflictTableReady) {
        await this.questdb.exec(createFleetConflictTable());
        this.#conflictTableReady = true;
      }
      const outcome = await this.questdb.write(encodeSiteConflicts(conflicts, atMs));
      if (outcome.ok) return { ok: true };
      this.#conflictTableReady = false;
      return { ok: false, message: outcome.message };
    } catch (error) {
      this.#conflictTableReady = false;
      return { ok: false, message: (error as Error).message };
    }
  }

  /** Writes the report's rows; false when QuestDB did not take them. */
  async record(report: FleetReport, receivedMs: number | undefined): Promise<{ ok: true } | { ok: false; message: string }> {
    try {
      if (!this.#tablesReady) {
        await this.questdb.exec(createFleetSiteTable(this.tables.site));
        await this.questdb.exec(createFleetSinkTable(this.tables.sink));
        this.#tablesReady = true;
      }
      const outcome = await this.questdb.write(encodeFleetReport(report, receivedMs, this.tables));
      if (outcome.ok) return { ok: true };
      this.#tablesReady = false;
      return { ok: false, message: outcome.message };
    } catch (error) {
      this.#tablesReady = false;
      return { ok: false, message: (error as Error).message };
    }
  }
}
