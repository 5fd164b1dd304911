import type { Logger } from 'pino';
import type { HealthReporter } from './health-reporter.js';
import { FAILED_START, readRunRecord, startEvents, writeRunRecord, type RunRecord } from './run-record.js';
import type { GatewaySnapshot } from './snapshot.js';
import { stopReason } from './stop-reason.js';

/** The least time the last row gets at a stop whose drain used up the deadline. */
const LAST_ROW_MIN_MS = 1000;

export interface HealthLifecycleOptions {
  dataDir: string;
  gateway: string;
  version: string;
  reporter: HealthReporter;
  logger: Logger;
  /** Epoch ms the start began. */
  startedAt: number;
}

/**
 * A run of the gateway as its health rows tell it: at start the tables the dashboards read are
 * created before anything else and the `started` event says what came before (an upgrade, a
 * restart, a crash); every housekeeping run writes a health row; at a clean stop the last row
 * says `stopped` and why, so the dashboard never shows a stopped gateway as delivering.
 */
export class HealthLifecycle {
  /** Settles once the tables were created (true) or QuestDB did not answer (false); never rejects. */
  readonly prepared: Promise<boolean>;
  readonly #options: HealthLifecycleOptions;
  readonly #record: RunRecord;

  constructor(options: HealthLifecycleOptions) {
    this.#options = options;
    const { dataDir, gateway, version, reporter, startedAt } = options;
    reporter.event(...startEvents(readRunRecord(dataDir), { gateway, version, at: startedAt }));
    this.#record = { gateway, version, started: startedAt, stopped: null, stopReason: null };
    this.prepared = reporter.prepare();
  }

  /** Marks this run as running in the data directory: once the queue is open, never before. */
  recordStart(): void {
    this.#writeRecord(this.#record);
  }

  report(snapshot: GatewaySnapshot): Promise<boolean> {
    return this.#options.reporter.report(snapshot);
  }

  /**
   * A start that failed after the tables (a port in use): its `stopped` event says so and why, so
   * the dashboards show it stopped rather than starting, and the next start knows what came before.
   */
  failedStart(message: string, now = Date.now()): Promise<boolean> {
    const { reporter, version } = this.#options;
    reporter.event({ time: now, event: 'stopped', reason: FAILED_START, text: `failed to start — ${message}`, version });
    this.#writeRecord({ ...this.#record, stopped: now, stopReason: FAILED_START });
    return reporter.prepare();
  }

  /** Writes the last row (within the deadline, or a second) and records the clean stop. */
  async stopped(snapshot: () => GatewaySnapshot, signal: NodeJS.Signals | undefined, deadline: number): Promise<void> {
    const { dataDir, reporter, startedAt, logger } = this.#options;
    const why = await stopReason({ dataDir, signal, startedAt, env: process.env });
    const written = await within(reporter.reportStopped(snapshot(), why), Math.max(deadline - Date.now(), LAST_ROW_MIN_MS));
    logger.info({ event: 'stop_reason', reason: why.code, text: why.text, reported: written === true }, `stopping: ${why.text}`);
    this.#writeRecord({ ...this.#record, stopped: Date.now(), stopReason: why.code });
  }

  #writeRecord(record: RunRecord): void {
    try {
      writeRunRecord(this.#options.dataDir, record);
    } catch (error) {
      this.#options.logger.warn({ event: 'run_record_failed', error: (error as Error).message }, 'could not record this run');
    }
  }
}

/** The promise's value, or undefined once `ms` passed. */
export async function within<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
