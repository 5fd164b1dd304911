import type { Logger } from 'pino';
import type { Progress } from '../queue/queue-file.js';
import type { Completion, QueueReader, QueueRecord } from '../queue/queue-reader.js';
import { ReplayWindow } from '../queue/replay-window.js';
import { Backoff } from './backoff.js';
import type { Recovery, SinkTarget } from './sink.js';

export interface SinkLoopOptions {
  intervalMs: number;
  batchReadings: number;
  batchBytes: number;
  backoffMaxMs: number;
}

/** What a sink loop tells the rest of the gateway. */
export interface SinkEvents {
  delivered(result: Completion & { delivered: number; expired: number; durationMs: number }): void;
  failed(result: { message: string; readings: number; durationMs: number }): void;
}

/** What a sink loop uses of its sink's side of the queue. */
export type SinkQueue = Pick<QueueReader, 'readOldest' | 'complete'>;

/** A sink that keeps its delivered readings for `windowMs` and sends them again after a recovery. */
export interface ReplaySettings {
  windowMs: number;
  queue: Pick<QueueReader, 'cursor' | 'keep' | 'replay'>;
}

/** `full`: a whole batch went, so more is probably waiting. */
type Outcome = 'empty' | 'delivered' | 'full' | 'failed';

const BACKOFF_BASE_MS = 250;
/** Longest wait a destination's Retry-After can ask for: a wrong header must not park a sink for days. */
const RETRY_AFTER_MAX_MS = 10 * 60 * 1000;
/** How often the destination of a sink with a replay window is checked (and kept readings let go). */
const KEEP_CHECK_MS = 5_000;

/**
 * Delivers a sink's readings on a timer, one batch in flight at a time, in queue order, and moves
 * the sink's progress mark past a batch only after the destination confirmed it. Failures back off
 * with jitter (or as long as the destination asked) and leave the queue intact.
 */
export class SinkLoop {
  readonly #reader: SinkQueue;
  readonly #target: SinkTarget;
  readonly #events: SinkEvents;
  readonly #log: Logger;
  readonly #options: SinkLoopOptions;
  readonly #backoff: Backoff;
  #stopping = false;
  /** Set when shutdown gave up waiting: a late answer must not touch the queue any more. */
  #abandoned = false;
  #backingOff = false;
  #wake: (() => void) | undefined;
  #loop: Promise<void> | undefined;
  /** The next batch, read while the previous one was on its way. */
  #readAhead: QueueRecord[] | undefined;
  readonly #replay: (ReplaySettings & { window: ReplayWindow<Progress> }) | undefined;
  /** The destination is checked (and the kept readings sent again) before the next delivery. */
  #mustRecover = true;
  #lastKeepCheck = Number.NEGATIVE_INFINITY;

  constructor(deps: {
    reader: SinkQueue;
    target: SinkTarget;
    events: SinkEvents;
    logger: Logger;
    options: SinkLoopOptions;
    replay?: ReplaySettings;
  }) {
    this.#reader = deps.reader;
    this.#replay =
      deps.replay === undefined || deps.replay.windowMs <= 0
        ? undefined
        : { ...deps.replay, window: new ReplayWindow(deps.replay.windowMs) };
    this.#target = deps.target;
    this.#events = deps.events;
    this.#log = deps.logger;
    this.#options = deps.options;
    this.#backoff = new Backoff(BACKOFF_BASE_MS, deps.options.backoffMaxMs);
  }

  get name(): string {
    return this.#target.name;
  }

  start(): void {
    this.#loop ??= this.#run();
  }

  /** A large backlog starts a delivery before the interval ends (but never cuts a backoff short). */
  wake(): void {
    if (!this.#backingOff) this.#wake?.();
  }

  /** Stops the timer and delivers what it can until `deadline` (epoch ms); the rest stays queued. */
  async stop(deadline: number): Promise<void> {
    this.#stopping = true;
    this.#wake?.();
    const loop = this.#loop ?? Promise.resolve();
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<'expired'>((resolve) => {
      timer = setTimeout(() => resolve('expired'), Math.max(0, deadline - Date.now()));
    });
    const result = await Promise.race([loop.then(() => 'done' as const), expired]);
    clearTimeout(timer);
    if (result === 'expired') {
      this.#abandoned = true;
      this.#log.warn({ event: 'delivery_abandoned', sink: this.name }, 'shutdown deadline reached; undelivered readings stay queued');
    }
    await this.#target.close().catch(() => undefined);
  }

  async #run(): Promise<void> {
    let delay = this.#options.intervalMs;
    while (!this.#stopping) {
      await this.#sleep(delay);
      if (this.#stopping) break;
      const { outcome, retryAfterMs } = await this.#deliverOnce();
      this.#backingOff = outcome === 'failed';
      if (outcome === 'failed') delay = Math.max(this.#backoff.next(), Math.min(retryAfterMs ?? 0, RETRY_AFTER_MAX_MS));
      else if (outcome === 'full') delay = 0;
      else delay = this.#options.intervalMs;
    }
    // Last delivery: drain while the destination answers, until the queue is empty or stop() gives up.
    for (
      let { outcome } = await this.#deliverOnce();
      !this.#abandoned && (outcome === 'delivered' || outcome === 'full');
      { outcome } = await this.#deliverOnce()
    ) {
      /* keep draining */
    }
  }

  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.#wake = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.#wake = done;
    });
  }

  #read(from?: Progress): QueueRecord[] {
    return this.#reader.readOldest(this.#options.batchReadings, this.#options.batchBytes, from);
  }

  #isFull(records: readonly QueueRecord[]): boolean {
    let readings = 0;
    let bytes = 0;
    for (const r of records) {
      readings += r.readings;
      bytes += r.bytes;
    }
    return readings >= this.#options.batchReadings || bytes >= this.#options.batchBytes;
  }

  /**
   * Before the first delivery and after a failure: the destination is brought back (a suspended
   * table resumed) and everything kept is sent again, since a power cut may have taken what the
   * destination acknowledged last. Then the kept readings acknowledged a whole window ago, in this
   * run, are let go, if the destination still applies writes.
   */
  async #recoverAndRelease(): Promise<(Recovery & { ok: false }) | undefined> {
    const replay = this.#replay;
    if (replay === undefined || this.#target.recover === undefined) return undefined;
    const expired = replay.window.expired();
    // Checked every few seconds, not only when something is to be let go: a destination that comes
    // back from a cut may stop applying writes a while after it answered the first check.
    // Monotonic: a step of the wall clock back must not stop the checks until it catches up.
    if (!this.#mustRecover && performance.now() - this.#lastKeepCheck < KEEP_CHECK_MS) return undefined;
    this.#lastKeepCheck = performance.now();
    const recovery = await this.#target.recover();
    if (!recovery.ok) {
      this.#mustRecover = true;
      return recovery;
    }
    if (this.#mustRecover || recovery.resumed) {
      this.#mustRecover = false;
      this.#readAhead = undefined;
      replay.window.replaying();
      const readings = replay.queue.replay();
      if (readings > 0) {
        this.#log.info(
          { event: 'replay', sink: this.name, readings, resumed: recovery.resumed },
          `sending the kept readings to ${this.name} again`,
        );
      }
      return undefined;
    }
    if (expired !== undefined) {
      try {
        replay.queue.keep(expired);
        replay.window.released(expired);
      } catch (error) {
        // The queue file could not record it (an fsync failed, a full disk): the readings stay
        // kept a while longer; the next check lets them go.
        this.#log.warn({ event: 'keep_failed', sink: this.name, error: (error as Error).message }, 'could not let kept readings go');
      }
    }
    return undefined;
  }

  async #deliverOnce(): Promise<{ outcome: Outcome; retryAfterMs?: number }> {
    if (this.#abandoned) return { outcome: 'failed' };
    const started = performance.now();
    const ready = (await this.#target.ready?.()) ?? { ok: true };
    if (!ready.ok) return this.#failed(ready, 0, started);
    if (this.#abandoned) return { outcome: 'failed' };
    const unrecovered = await this.#recoverAndRelease();
    if (unrecovered !== undefined) return this.#failed(unrecovered, 0, started);
    if (this.#abandoned) return { outcome: 'failed' };
    const records = this.#readAhead ?? this.#read();
    this.#readAhead = undefined;
    if (records.length === 0) return { outcome: 'empty' };
    const full = this.#isFull(records);
    const delivering = this.#target.deliver(records);
    // While the destination works on it, read the batch after this one.
    if (full) {
      const last = records.at(-1)!;
      this.#readAhead = this.#read({ segment: last.segment, lastId: last.id });
    }
    let delivery: Awaited<typeof delivering>;
    try {
      delivery = await delivering;
    } catch (error) {
      delivery = { ok: false, message: (error as Error).message, level: 'error' };
    }
    if (this.#abandoned) return { outcome: 'failed' };
    const readings = records.reduce((sum, r) => sum + r.readings, 0);
    if (!delivery.ok) {
      this.#readAhead = undefined;
      this.#mustRecover = true;
      return this.#failed(delivery, readings, started);
    }
    const durationMs = Math.round(performance.now() - started);
    let completion: Completion;
    try {
      completion = this.#reader.complete(records, delivery.deadLetters);
    } catch (error) {
      // The destination has the batch but the queue file could not record it (an fsync failed, a
      // full disk): it is sent again later, which deduplication stores once.
      this.#readAhead = undefined;
      return this.#failed(
        { message: `delivered, but the queue could not record it: ${(error as Error).message}`, level: 'error' },
        readings,
        started,
      );
    }
    if (this.#replay !== undefined) this.#replay.window.acknowledged(this.#replay.queue.cursor);
    this.#backoff.reset();
    // A replayed batch was counted when it was first delivered.
    const expired = completion.readings === 0 ? 0 : (delivery.expired ?? 0);
    const delivered =
      completion.readings === 0
        ? 0
        : completion.readings - expired - delivery.deadLetters.reduce((sum, d) => sum + d.line.split('\n').length, 0);
    this.#events.delivered({ ...completion, delivered, expired, durationMs });
    this.#log.info(
      {
        event: 'delivered',
        sink: this.name,
        readings: delivered,
        records: records.length,
        requests: delivery.requests,
        deadLettered: delivery.deadLetters.length,
        durationMs,
      },
      `delivered readings to ${this.name}`,
    );
    if (expired > 0) {
      this.#log.warn(
        { event: 'expired', sink: this.name, readings: expired },
        `readings older than ${this.name} keeps were not sent to it; counted as expired, not delivered`,
      );
    }
    if (delivery.deadLetters.length > 0) {
      this.#log.error(
        { event: 'dead_letters', sink: this.name, count: delivery.deadLetters.length, reason: delivery.deadLetters[0]!.reason },
        `${this.name} refused readings; kept as dead letters`,
      );
    }
    return { outcome: full ? 'full' : 'delivered' };
  }

  #failed(
    failure: { message: string; level?: 'warn' | 'error'; retryAfterMs?: number },
    readings: number,
    started: number,
  ): { outcome: Outcome; retryAfterMs?: number } {
    const durationMs = Math.round(performance.now() - started);
    this.#events.failed({ message: failure.message, readings, durationMs });
    this.#log[failure.level ?? 'warn'](
      { event: 'delivery_failed', sink: this.name, error: failure.message, attempt: this.#backoff.attempts + 1 },
      `delivery to ${this.name} failed; readings stay queued`,
    );
    return { outcome: 'failed', ...(failure.retryAfterMs === undefined ? {} : { retryAfterMs: failure.retryAfterMs }) };
  }
}
