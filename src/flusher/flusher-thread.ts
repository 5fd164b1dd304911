import { Worker } from 'node:worker_threads';
import type { Logger } from 'pino';
import type { QueueWriter } from '../queue/queue-writer.js';
import type { GatewayStats } from '../stats.js';
import type { FlusherWorkerData, FromFlusher, ToFlusher } from './flusher-worker.js';

const RESTART_DELAY_MS = 1000;

/**
 * The ingest thread's handle on the flusher thread: starts it (again, if it dies), wakes it for a
 * large backlog, turns its reports into status counters, and stops it at shutdown.
 */
export class FlusherThread {
  #worker: Worker | undefined;
  #stopping = false;
  #woken = false;
  #stopped: (() => void) | undefined;

  constructor(
    private readonly script: URL | string,
    private readonly data: FlusherWorkerData,
    private readonly queue: QueueWriter,
    private readonly stats: GatewayStats,
    private readonly log: Logger,
  ) {}

  start(): void {
    const worker = new Worker(this.script, {
      workerData: this.data,
      // The flusher holds one batch at a time (a few MB) and lets go of it at once: a young
      // generation that holds a batch's garbage, a small old one.
      resourceLimits: { maxYoungGenerationSizeMb: 16, maxOldGenerationSizeMb: 32 },
    });
    this.#worker = worker;
    worker.on('message', (message: FromFlusher) => this.#receive(message));
    worker.on('error', (error) => this.log.error({ event: 'flusher_crashed', err: error }, 'flusher thread failed'));
    worker.on('exit', (code) => {
      this.#worker = undefined;
      this.#stopped?.();
      if (this.#stopping) return;
      this.log.error({ event: 'flusher_exited', code }, `flusher thread exited; restarting in ${RESTART_DELAY_MS} ms`);
      setTimeout(() => this.#stopping || this.start(), RESTART_DELAY_MS).unref();
    });
  }

  /** Called after ingest commits: a backlog of a whole batch wakes the flusher once. */
  notifyBacklog(readings: number): void {
    if (this.#woken || readings < this.data.options.batchReadings) return;
    this.#woken = true;
    this.#post({ type: 'wake' });
  }

  /** Asks the flusher to flush what it can until `deadline`, then waits for the thread to end. */
  stop(deadline: number): Promise<void> {
    this.#stopping = true;
    const worker = this.#worker;
    if (worker === undefined) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(() => void worker.terminate(), Math.max(0, deadline - Date.now()) + 1000);
      this.#stopped = () => {
        clearTimeout(timer);
        resolve();
      };
      this.#post({ type: 'stop', deadline });
    });
  }

  #post(message: ToFlusher): void {
    this.#worker?.postMessage(message);
  }

  #receive(message: FromFlusher): void {
    const stats = this.stats;
    const at = new Date().toISOString();
    if (message.type === 'flushed') {
      this.#woken = false;
      this.queue.refresh();
      stats.flushes += 1;
      stats.flushedReadings += message.flushed;
      stats.deadLettered += message.deadLettered;
      stats.consecutiveFlushFailures = 0;
      stats.lastFlush = { at, ok: true, readings: message.flushed, durationMs: message.durationMs };
    } else if (message.type === 'failed') {
      this.#woken = false;
      stats.flushFailures += 1;
      stats.consecutiveFlushFailures += 1;
      stats.lastFlush = { at, ok: false, readings: message.readings, durationMs: message.durationMs, error: message.message };
      stats.lastFlushError = { at, message: message.message };
    }
  }
}
