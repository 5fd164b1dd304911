import { Worker } from 'node:worker_threads';
import type { Logger } from 'pino';
import type { QueueWriter } from '../queue/queue-writer.js';
import type { GatewayStats } from '../stats.js';
import type { DeliveryWorkerData, FromDelivery, ToDelivery } from './delivery-worker.js';

const RESTART_DELAY_MS = 1000;
/** A full queue past this share of QUEUE_MAX_BYTES asks the dropping sinks to make room down to the next. */
const PRESSURE_HIGH = 0.9;
const PRESSURE_LOW = 0.8;

/**
 * The ingest thread's handle on the delivery thread: starts it (again, if it dies), wakes it for a
 * large backlog, asks `drop_oldest` sinks for room when the queue is nearly full, turns its reports
 * into status counters, and stops it at shutdown.
 */
export class DeliveryThread {
  #worker: Worker | undefined;
  #stopping = false;
  #woken = false;
  #pressing = false;
  #stopped: (() => void) | undefined;

  constructor(
    private readonly script: URL | string,
    private readonly data: DeliveryWorkerData,
    private readonly queue: QueueWriter,
    private readonly stats: GatewayStats,
    private readonly log: Logger,
  ) {
    for (const spec of data.sinks) stats.sink(spec.name);
  }

  start(): void {
    const worker = new Worker(this.script, {
      workerData: this.data,
      // Each sink holds one batch at a time (a few MB) and lets go of it at once: a young
      // generation that holds a batch's garbage, a small old one.
      resourceLimits: { maxYoungGenerationSizeMb: 16, maxOldGenerationSizeMb: 32 + 16 * (this.data.sinks.length - 1) },
    });
    this.#worker = worker;
    worker.on('message', (message: FromDelivery) => this.#receive(message));
    worker.on('error', (error) => this.log.error({ event: 'delivery_crashed', err: error }, 'delivery thread failed'));
    worker.on('exit', (code) => {
      this.#worker = undefined;
      this.#woken = false;
      this.#pressing = false;
      this.#stopped?.();
      if (this.#stopping) return;
      this.log.error({ event: 'delivery_exited', code }, `delivery thread exited; restarting in ${RESTART_DELAY_MS} ms`);
      setTimeout(() => this.#stopping || this.start(), RESTART_DELAY_MS).unref();
    });
  }

  /** Called after ingest commits: a backlog of a whole batch wakes the sinks once; a nearly full queue asks for room. */
  notifyAppended(): void {
    const queue = this.queue;
    if (
      !this.#pressing &&
      queue.stats().bytes >= queue.maxBytes * PRESSURE_HIGH &&
      this.data.sinks.some((s) => s.policy === 'drop_oldest')
    ) {
      this.#pressing = true;
      this.#post({ type: 'pressure', bytes: Math.ceil(queue.stats().bytes - queue.maxBytes * PRESSURE_LOW) });
    }
    if (this.#woken || queue.readings < Math.min(...this.data.sinks.map((s) => s.batchReadings))) return;
    this.#woken = true;
    this.#post({ type: 'wake' });
  }

  /** Asks every sink to deliver what it can until `deadline`, then waits for the thread to end. */
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

  #post(message: ToDelivery): void {
    this.#worker?.postMessage(message);
  }

  #receive(message: FromDelivery): void {
    if (message.type === 'pressure_handled') {
      this.#pressing = false;
      this.queue.refresh();
      return;
    }
    const stats = this.stats;
    const sink = stats.sink(message.sink);
    const at = new Date().toISOString();
    if (message.type === 'dropped') {
      sink.dropped += message.readings;
      sink.taken += message.readings;
      return;
    }
    this.#woken = false;
    if (message.type === 'delivered') {
      this.queue.refresh();
      sink.deliveries += 1;
      sink.delivered += message.delivered;
      sink.deadLettered += message.deadLettered;
      sink.taken += message.taken;
      sink.consecutiveFailures = 0;
      sink.last = { at, ok: true, readings: message.delivered, durationMs: message.durationMs };
    } else {
      sink.failures += 1;
      sink.consecutiveFailures += 1;
      sink.last = { at, ok: false, readings: message.readings, durationMs: message.durationMs, error: message.message };
      sink.lastError = { at, message: message.message };
    }
  }
}
