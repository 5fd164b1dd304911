import type { Logger } from 'pino';
import { escapeIlp } from '../questdb/ilp-escape.js';
import type { QuestDbHttp } from '../questdb/questdb-http.js';
import type { GatewaySnapshot } from './snapshot.js';

export const HEALTH_TABLE = 'gateway_health';

const CREATE = `CREATE TABLE IF NOT EXISTS ${HEALTH_TABLE} (
  time TIMESTAMP, gateway SYMBOL, ready BOOLEAN, queue_readings LONG, queue_bytes LONG, oldest_age_s DOUBLE,
  dead_letters LONG, flush_failures LONG, consecutive_flush_failures LONG, accepted_readings LONG,
  flushed_readings LONG, refused_requests LONG, clock_synced BOOLEAN
) TIMESTAMP(time) PARTITION BY DAY TTL 30 DAYS WAL`;

/**
 * Writes the gateway's own health into QuestDB next to the readings, so the dashboard can show
 * queue depth, the age of the oldest queued reading and flush errors. These rows are best effort:
 * they bypass the queue and are skipped while QuestDB is away.
 */
export class HealthReporter {
  #tableReady = false;
  #failing = false;

  constructor(
    private readonly questdb: QuestDbHttp,
    private readonly gateway: string,
    private readonly log: Logger,
  ) {}

  async report(snapshot: GatewaySnapshot): Promise<boolean> {
    try {
      if (!this.#tableReady) {
        await this.questdb.exec(CREATE);
        this.#tableReady = true;
      }
      const outcome = await this.questdb.write(encode(this.gateway, snapshot, Date.now()));
      if (!outcome.ok) throw new Error(outcome.message);
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
function encode(gateway: string, s: GatewaySnapshot, now: number): Buffer {
  const columns = [
    `ready=${s.ready ? 't' : 'f'}`,
    `queue_readings=${s.queue.readings}i`,
    `queue_bytes=${s.queue.bytes}i`,
    `dead_letters=${s.deadLetters}i`,
    `flush_failures=${s.totals.flushFailures}i`,
    `consecutive_flush_failures=${s.flush.consecutiveFailures}i`,
    `accepted_readings=${s.totals.acceptedReadings}i`,
    `flushed_readings=${s.totals.flushedReadings}i`,
    `refused_requests=${s.totals.refusedRequests}i`,
  ];
  if (s.queue.oldestAgeSeconds !== null) columns.push(`oldest_age_s=${s.queue.oldestAgeSeconds}`);
  if (s.clockSynchronized !== null) columns.push(`clock_synced=${s.clockSynchronized ? 't' : 'f'}`);
  return Buffer.from(`${HEALTH_TABLE},gateway=${escapeIlp(gateway)} ${columns.join(',')} ${now}000000n\n`);
}
