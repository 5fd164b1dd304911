import { SenderBufferV2 } from '@questdb/nodejs-client';
import type { Logger } from 'pino';
import type { QuestDbHttp } from '../flusher/questdb-http.js';
import type { GatewaySnapshot } from './snapshot.js';

export const HEALTH_TABLE = 'gateway_health';

const CREATE = `CREATE TABLE IF NOT EXISTS ${HEALTH_TABLE} (
  time TIMESTAMP, gateway SYMBOL, ready BOOLEAN, queue_readings LONG, queue_bytes LONG, oldest_age_s DOUBLE,
  dead_letters LONG, flush_failures LONG, consecutive_flush_failures LONG, accepted_readings LONG,
  flushed_readings LONG, refused_requests LONG
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

  async report(snapshot: GatewaySnapshot, now = Date.now()): Promise<boolean> {
    try {
      if (!this.#tableReady) {
        await this.questdb.exec(CREATE);
        this.#tableReady = true;
      }
      const outcome = await this.questdb.write(encode(this.gateway, snapshot, now));
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

function encode(gateway: string, s: GatewaySnapshot, now: number): Buffer {
  const row = new SenderBufferV2({ protocol: 'http', init_buf_size: 1024 })
    .table(HEALTH_TABLE)
    .symbol('gateway', gateway)
    .booleanColumn('ready', s.ready)
    .intColumn('queue_readings', s.queue.readings)
    .intColumn('queue_bytes', s.queue.bytes)
    .intColumn('dead_letters', s.deadLetters)
    .intColumn('flush_failures', s.totals.flushFailures)
    .intColumn('consecutive_flush_failures', s.flush.consecutiveFailures)
    .intColumn('accepted_readings', s.totals.acceptedReadings)
    .intColumn('flushed_readings', s.totals.flushedReadings)
    .intColumn('refused_requests', s.totals.refusedRequests);
  if (s.queue.oldestAgeSeconds !== null) row.floatColumn('oldest_age_s', s.queue.oldestAgeSeconds);
  row.at(now, 'ms');
  return row.toBufferNew() ?? Buffer.alloc(0);
}
