import { Worker } from 'node:worker_threads';
import type { Logger } from 'pino';
import type { QueueWriter } from '../queue/queue-writer.js';
import type { GatewayStats } from '../stats.js';
import type { DeliveryWorkerData, FromDelivery, ToDelivery } from './delivery-worker.js';
import { AppendSignal } from './append-signal.js';
import { SinkWakes } from './sink-wakes.js';

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
  #pressing = false;
  /** Ingest refuses for a full disk: told again to a delivery thread started meanwhile. */
  #diskFull = false;
  /** Each sink is woken by a whole batch of its own waiting since its last read. */
  readonly #wakes: SinkWakes;
  /** Some sink has the drop_oldest policy, so a nearly full queue can be made room in. */
  readonly #drops: boolean;
  #stopped: (() => void) | undefined;
  /** Wakes the sinks that found nothing to deliver (they sleep instead of polling the queue). */
  readonly #appended = new AppendSignal();
  private readonly data: DeliveryWorkerData;

  constructor(
    private readonly script: URL | string,
    data: DeliveryWorkerData,
    private readonly queue: QueueWriter,
    private readonly stats: GatewayStats,
    private readonly log: Logger,
  ) {
    this.#wakes = new SinkWakes(data.sinks.map((s) => s.batchReadings));
    this.data = {
      ...data,
      appended: this.#appended.buffer,
      wakes: this.#wakes.buffer,
      checkpoints: { state: queue.checkpointState, files: queue.checkpointFiles },
    };
    for (const spec of data.sinks) stats.sink(spec.name);
    this.#drops = data.sinks.some((s) => s.policy === 'drop_oldest');
    queue.onCommitted(() => this.notifyAppended());
    queue.onDiskFull((full) => {
      this.#diskFull = full;
      this.#post({ type: 'disk', full });
    });
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
    if (this.#diskFull) this.#post({ type: 'disk', full: true });
    worker.on('error', (error) => this.log.error({ event: 'delivery_crashed', err: error }, 'delivery thread failed'));
    worker.on('exit', (code) => {
      this.#worker = undefined;
      this.#pressing = false;
      this.#stopped?.();
      if (this.#stopping) return;
      this.log.error({ event: 'delivery_exited', code }, `delivery thread exited; restarting in ${RESTART_DELAY_MS} ms`);
      setTimeout(() => this.#stopping || this.start(), RESTART_DELAY_MS).unref();
    });
  }

  /**
   * Called after each ingest commit (and a re-queue from the console): a sink with a whole batch of
   * its own appended since its last read is woken once (a sink backing off stays asleep); a nearly
   * full queue asks the dropping sinks for room.
   */
  notifyAppended(): void {
    const queue = this.queue;
    this.#appended.appended();
    // Runs after every request: read the counters in place, allocate nothing.
    if (this.#drops && !this.#pressing && queue.bytes >= queue.maxBytes * PRESSURE_HIGH) {
      this.#pressing = true;
      this.#post({ type: 'pressure', bytes: Math.ceil(queue.bytes - queue.maxBytes * PRESSURE_LOW) });
    }
    const due = this.#wakes.appended(queue.appendedReadings);
    if (due !== undefined) this.#post({ type: 'wake', sinks: due });
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
    if (message.type === 'queue_sync_lost') {
      this.queue.checkpointFailedElsewhere(message.message);
      return;
    }
    if (message.type === 'heap') {
      this.stats.deliveryHeap = { usedBytes: message.usedBytes, totalBytes: message.totalBytes };
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
    if (message.type === 'passed') {
      sink.taken += message.readings;
      return;
    }
    if (message.type === 'waiting') {
      sink.waitingSinceMs = message.sinceMs;
      return;
    }
    if (message.type === 'clock') {
      sink.clockAheadMs = message.aheadMs ?? undefined;
      return;
    }
    sink.waitingSinceMs = undefined;
    if (message.type === 'delivered') {
      this.queue.refresh();
      sink.deliveries += 1;
      sink.delivered += message.delivered;
      sink.expired += message.expired;
      sink.thinned += message.thinned;
      sink.sentBytes += message.sentBytes;
      sink.deadLettered += message.deadLettered;
      sink.taken += message.taken;
      sink.consecutiveFailures = 0;
      sink.failingSinceMs = undefined;
      sink.last = { at, ok: true, readings: message.delivered, durationMs: message.durationMs };
    } else {
      sink.failures += 1;
      if (sink.consecutiveFailures === 0) sink.failingSinceMs = Date.now() - message.durationMs;
      sink.consecutiveFailures += 1;
      sink.last = { at, ok: false, readings: message.readings, durationMs: message.durationMs, error: message.message };
      sink.lastError = { at, message: message.message };
    }
  }
}
