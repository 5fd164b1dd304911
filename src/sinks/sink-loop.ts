import type { Logger } from 'pino';
import type { Progress } from '../queue/queue-file.js';
import type { Completion, QueueReader, QueueRecord } from '../queue/queue-reader.js';
import { ReplayWindow } from '../queue/replay-window.js';
import { compareMarks } from '../queue/sink-marks.js';
import type { AppendSignal } from './append-signal.js';
import { Backoff } from './backoff.js';
import type { Delivery, Recovery, SinkTarget } from './sink.js';
import type { SinkBudget } from './sink-budget.js';
import type { SinkThinning } from './thinning/sink-thinning.js';

export interface SinkLoopOptions {
  intervalMs: number;
  batchReadings: number;
  batchBytes: number;
  backoffMaxMs: number;
}

/** What a sink loop tells the rest of the gateway. */
export interface SinkEvents {
  /**
   * `passed`: readings of records re-queued for another sink, which this one passed without
   * delivering; `expired`: readings the destination would not keep, not sent; `thinned`: readings
   * the thinning held back or gathered into a summary, not sent as themselves; `sentBytes`: the
   * bytes of the readings sent, as queued (what a budget counts).
   */
  delivered(
    result: Completion & { delivered: number; passed: number; expired: number; thinned: number; sentBytes: number; durationMs: number },
  ): void;
  failed(result: { message: string; readings: number; durationMs: number }): void;
  /** Only records of other sinks were read, and passed. */
  passed?(readings: number): void;
  /** An attempt has had no outcome for STALL_NOTICE_MS: it began at `sinceMs` (epoch ms). */
  waiting?(sinceMs: number): void;
  /** What the destination told of this site's clock changed (see SinkTarget.clockAheadMs). */
  clock?(aheadMs: number | undefined): void;
}

/** What a sink loop uses of its sink's side of the queue. */
export type SinkQueue = Pick<QueueReader, 'readOldest' | 'complete'>;

/** A current-first sink's side of the queue: its newest records, and those it delivered ahead of its mark. */
export type AheadQueue = Pick<QueueReader, 'readHead' | 'readNewest' | 'completeAhead' | 'ahead'>;

/** A sink that keeps its delivered readings for `windowMs` and sends them again after a recovery. */
export interface ReplaySettings {
  windowMs: number;
  queue: Pick<QueueReader, 'cursor' | 'keep' | 'replay'>;
  /** How often the destination is checked while readings are kept: KEEP_CHECK_MS unless given. */
  checkMs?: number;
}

/** `full`: a whole batch went, so more is probably waiting. */
type Outcome = 'empty' | 'delivered' | 'full' | 'failed';

const BACKOFF_BASE_MS = 250;
/** Longest wait a destination's Retry-After can ask for: a wrong header must not park a sink for days. */
const RETRY_AFTER_MAX_MS = 10 * 60 * 1000;
/** How soon after a delivery the destination of a sink with a replay window is checked (and kept readings let go). */
const KEEP_CHECK_MS = 5_000;
/**
 * With nothing delivered since the last check, the next one waits until kept readings may be let
 * go, but no longer than this: a quiet gateway then asks its destination once a window, not every
 * KEEP_CHECK_MS, and a table suspended meanwhile is still found within a minute.
 */
const QUIET_CHECK_MAX_MS = 60_000;
/**
 * How long a sink with nothing to deliver and nothing kept sleeps when no commit wakes it: records
 * re-queued by the command line, another process, are found this late at most. Such a wake-up is one
 * read of the queue file, about 8 µs.
 */
export const IDLE_POLL_MS = 5_000;
/**
 * An attempt without an outcome this long is reported as waiting, so a destination that went
 * silent (a dead broker the client keeps retrying, an address that drops packets) shows in
 * /status within seconds, not after the sink's timeout.
 */
export const STALL_NOTICE_MS = 3_000;

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
  /**
   * A wake came while the loop was not asleep (a delivery under way) or while it waited for a
   * commit: the next sleep is skipped, so the batch that woke it does not wait a whole interval.
   */
  #woken = false;
  #loop: Promise<void> | undefined;
  /** The next batch, read while the previous one was on its way. */
  #readAhead: QueueRecord[] | undefined;
  readonly #replay: (ReplaySettings & { window: ReplayWindow<Progress>; checkMs: number }) | undefined;
  /** The destination is checked (and the kept readings sent again) before the next delivery. */
  #mustRecover = true;
  #lastKeepCheck = Number.NEGATIVE_INFINITY;
  /**
   * Ingest refuses for a full disk: what the replay window keeps holds segments the disk needs, so
   * everything the destination acknowledged is let go at once, after a check of the destination.
   */
  #shortOfDisk = false;
  /** The replay window was cut short in this spell of a full disk (logged once). */
  #windowCut = false;
  /** The clock offset last reported, so a change is reported once. */
  #clockAhead: number | undefined;
  readonly #appended: AppendSignal | undefined;
  /** Called before each read of the queue (sink-wakes.ts: the wake for a whole batch counts from there). */
  readonly #reading: (() => void) | undefined;
  /** The commit count before the last read of the queue: an idle sink sleeps until it changes. */
  #seenAppended = 0;
  /** Times everything kept was sent again: a read made before a replay is not delivered. */
  #replays = 0;
  /** What of each batch goes to the destination (thinning/): undefined, all of it. */
  readonly #thinning: SinkThinning | undefined;
  /** Current first: with a backlog, the newest records go first and the backlog behind them. */
  readonly #currentFirst: AheadQueue | undefined;
  /** The batch in flight was read ahead of the mark (the newest records), not from the backlog. */
  #sendingAhead = false;
  readonly #budget: SinkBudget | undefined;

  constructor(deps: {
    reader: SinkQueue;
    target: SinkTarget;
    events: SinkEvents;
    logger: Logger;
    options: SinkLoopOptions;
    replay?: ReplaySettings;
    /** Ingest's commits: without it the sink reads the queue every interval even when it is empty. */
    appended?: AppendSignal;
    /** Told before each read of the queue, so ingest wakes the sink for a whole batch appended after it. */
    reading?: () => void;
    thinning?: SinkThinning;
    /** Current first after an outage (sink-ahead.ts); never with a replay window or thinning, which decide in queue order. */
    currentFirst?: AheadQueue;
    /** Bytes a second on average (sink-budget.ts). */
    budget?: SinkBudget;
  }) {
    this.#budget = deps.budget;
    this.#reader = deps.reader;
    this.#thinning = deps.thinning;
    this.#currentFirst = deps.currentFirst;
    this.#appended = deps.appended;
    this.#reading = deps.reading;
    this.#replay =
      deps.replay === undefined || deps.replay.windowMs <= 0
        ? undefined
        : { ...deps.replay, window: new ReplayWindow(deps.replay.windowMs), checkMs: deps.replay.checkMs ?? KEEP_CHECK_MS };
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

  /** Ingest started (true) or stopped (false) refusing for a full disk. */
  shortOfDisk(short: boolean): void {
    this.#shortOfDisk = short;
    this.#windowCut = false;
    if (short) this.wake();
  }

  /** A large backlog starts a delivery before the interval ends (but never cuts a backoff short). */
  wake(): void {
    if (this.#backingOff) return;
    this.#woken = true;
    this.#wake?.();
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
      // No sleep to cut short while an attempt is under way: a wake meanwhile is kept for after it.
      this.#backingOff = false;
      const { outcome, retryAfterMs } = await this.#attempt();
      if (outcome === 'failed') delay = Math.max(this.#backoff.next(), Math.min(retryAfterMs ?? 0, RETRY_AFTER_MAX_MS));
      else if (outcome === 'full') delay = 0;
      else delay = this.#options.intervalMs;
      // The budget's wait, like a backoff, is never cut short by a wake.
      const budgetWait = outcome === 'failed' ? 0 : (this.#budget?.waitMs() ?? 0);
      delay = Math.max(delay, budgetWait);
      this.#backingOff = outcome === 'failed' || budgetWait > 0;
      // A wake during a delivery that failed, or that the budget holds back, waits like the rest.
      if (this.#backingOff) this.#woken = false;
      // Nothing to deliver: sleep until ingest commits, then gather readings for an interval. With
      // readings kept, no longer than until the next check of the destination is due.
      if (outcome === 'empty' && this.#appended !== undefined) {
        if (!this.#keepsAny()) await this.#idle(this.#appended, IDLE_POLL_MS);
        else if (!this.#mustRecover) await this.#idle(this.#appended, this.#untilCheckMs() - delay);
      }
    }
    // Last delivery: drain while the destination answers, until the queue is empty or stop() gives up.
    for (
      let { outcome } = await this.#attempt();
      !this.#abandoned && (outcome === 'delivered' || outcome === 'full');
      { outcome } = await this.#attempt()
    ) {
      /* keep draining */
    }
  }

  #sleep(ms: number): Promise<void> {
    if (this.#woken) {
      this.#woken = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.#wake = undefined;
        this.#woken = false;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.#wake = done;
    });
  }

  /** Until ingest commits after the last read, `wake()` or `stop()`, or `ms`. */
  #idle(appended: AppendSignal, ms: number): Promise<void> {
    if (this.#stopping || this.#woken || ms <= 0) return Promise.resolve();
    const interrupt = new Promise<void>((resolve) => {
      this.#wake = () => {
        this.#wake = undefined;
        resolve();
      };
    });
    return appended.changed(this.#seenAppended, ms, interrupt).finally(() => {
      this.#wake = undefined;
    });
  }

  /**
   * Until the next check of the destination is due (see #recoverAndRelease), and a millisecond more:
   * a timer may fire up to a millisecond before its time by the monotonic clock.
   */
  #untilCheckMs(): number {
    return Math.ceil(this.#nextCheckAt() - performance.now()) + 1;
  }

  /**
   * When the next check is due, by the monotonic clock: `checkMs` after the last one when something
   * was delivered since (a table dropped under that delivery must be found soon); otherwise when
   * the oldest kept readings may be let go, within QUIET_CHECK_MAX_MS.
   */
  #nextCheckAt(): number {
    const checkMs = this.#replay?.checkMs ?? KEEP_CHECK_MS;
    const window = this.#replay?.window;
    if (this.#shortOfDisk && window?.holds === true) return Number.NEGATIVE_INFINITY;
    const soon = this.#lastKeepCheck + checkMs;
    // The window's acknowledgements and the checks are timed by the same monotonic clock.
    if ((window?.newestAcknowledgedAt ?? Number.NEGATIVE_INFINITY) >= this.#lastKeepCheck) return soon;
    const release = window?.nextExpiry ?? Number.POSITIVE_INFINITY;
    return Math.max(soon, Math.min(release, this.#lastKeepCheck + Math.max(checkMs, QUIET_CHECK_MAX_MS)));
  }

  /** Readings delivered and kept for the replay window, or a check owed: the sink keeps its timer. */
  #keepsAny(): boolean {
    return this.#replay !== undefined && (this.#mustRecover || this.#replay.window.holds);
  }

  #read(from?: Progress): QueueRecord[] {
    this.#reading?.();
    if (from === undefined && this.#appended !== undefined) this.#seenAppended = this.#appended.count;
    const ahead = this.#currentFirst;
    if (ahead === undefined || from !== undefined)
      return this.#reader.readOldest(this.#options.batchReadings, this.#options.batchBytes, from);
    const { batchReadings, batchBytes } = this.#options;
    // What came after the records sent ahead goes first, so the destination stays current.
    const head = ahead.readHead(batchReadings, batchBytes);
    this.#sendingAhead = head.length > 0;
    if (this.#sendingAhead) return head;
    const backlog = this.#reader.readOldest(batchReadings, batchBytes);
    if (ahead.ahead !== undefined || !this.#isFull(backlog)) return backlog;
    // More than a batch behind: the newest batch first, when it lies beyond the oldest one.
    const newest = ahead.readNewest(batchReadings, batchBytes);
    const first = newest[0];
    const last = backlog.at(-1)!;
    this.#sendingAhead =
      first !== undefined && compareMarks({ segment: first.segment, lastId: first.id }, { segment: last.segment, lastId: last.id }) > 0;
    if (this.#sendingAhead) {
      this.#log.info(
        { event: 'current_first', sink: this.name, readings: newest.reduce((sum, r) => sum + r.readings, 0) },
        `${this.name} is behind: its newest readings go first, the backlog behind them`,
      );
      return newest;
    }
    return backlog;
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
    const expired = this.#shortOfDisk ? replay.window.newest() : replay.window.expired();
    // Checked a few seconds after each delivery, not only when something is to be let go: a
    // destination that comes back from a cut may stop applying writes a while after it answered the
    // first check. Monotonic: a step of the wall clock back must not stop the checks until it catches up.
    if (!this.#mustRecover && performance.now() < this.#nextCheckAt()) return undefined;
    this.#lastKeepCheck = performance.now();
    const recovery = await this.#target.recover();
    if (!recovery.ok) {
      this.#mustRecover = true;
      return recovery;
    }
    if (this.#mustRecover || recovery.resumed) {
      this.#mustRecover = false;
      this.#readAhead = undefined;
      this.#replays += 1;
      replay.window.replaying();
      this.#thinning?.replaying();
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
        replay.queue.keep(expired, this.#thinning?.keptChanges(expired));
        this.#thinning?.kept(expired);
        replay.window.released(expired);
        if (this.#shortOfDisk && !this.#windowCut) {
          this.#windowCut = true;
          this.#log.warn(
            { event: 'replay_window_cut', sink: this.name },
            `the disk is full: ${this.name} lets go of the readings it kept for its replay window, so their room can be given back`,
          );
        }
      } catch (error) {
        // The queue file could not record it (an fsync failed, a full disk): the readings stay
        // kept a while longer; the next check lets them go.
        this.#log.warn({ event: 'keep_failed', sink: this.name, error: (error as Error).message }, 'could not let kept readings go');
      }
    }
    return undefined;
  }

  /** One attempt, reported as waiting when it takes longer than STALL_NOTICE_MS, and what it told of the clock. */
  async #attempt(): Promise<{ outcome: Outcome; retryAfterMs?: number }> {
    const startedMs = Date.now();
    const notice = setTimeout(() => this.#events.waiting?.(startedMs), STALL_NOTICE_MS);
    try {
      return await this.#deliverOnce();
    } finally {
      clearTimeout(notice);
      const ahead = this.#target.clockAheadMs?.();
      if (ahead !== this.#clockAhead) {
        this.#clockAhead = ahead;
        this.#events.clock?.(ahead);
      }
    }
  }

  async #deliverOnce(): Promise<{ outcome: Outcome; retryAfterMs?: number }> {
    if (this.#abandoned) return { outcome: 'failed' };
    const started = performance.now();
    const ready = (await this.#target.ready?.()) ?? { ok: true };
    if (!ready.ok) return this.#failed(ready, 0, started);
    if (this.#abandoned) return { outcome: 'failed' };
    // With nothing kept and no check owed, the destination is checked only when there is something
    // for it: a quiet gateway sends it no queries.
    let records = this.#readAhead;
    if (records === undefined && this.#replay !== undefined && !this.#keepsAny()) {
      records = this.#read();
      if (records.length === 0) return { outcome: 'empty' };
    }
    const replays = this.#replays;
    const unrecovered = await this.#recoverAndRelease();
    if (unrecovered !== undefined) return this.#failed(unrecovered, 0, started);
    if (this.#abandoned) return { outcome: 'failed' };
    if (this.#replays !== replays) records = undefined;
    records = this.#readAhead ?? records ?? this.#read();
    this.#readAhead = undefined;
    if (records.length === 0) return { outcome: 'empty' };
    const full = this.#isFull(records);
    const mine = this.#mine(records);
    if (mine.length === 0) return this.#passOthers(records, full);
    const thinned = this.#thinning?.thin(mine);
    const sending = thinned?.records ?? mine;
    // Everything held back by the thinning: nothing to send, the mark moves all the same.
    const delivering: Promise<Delivery> =
      sending.length === 0 ? Promise.resolve({ ok: true, requests: 0, deadLetters: [] }) : this.#target.deliver(sending);
    // While the destination works on it, read the batch after this one (in queue order only).
    if (full && this.#currentFirst === undefined) {
      const last = records.at(-1)!;
      this.#readAhead = this.#read({ segment: last.segment, lastId: last.id });
    }
    let delivery: Delivery;
    try {
      delivery = await delivering;
    } catch (error) {
      delivery = { ok: false, message: (error as Error).message, level: 'error' };
    }
    if (this.#abandoned) return { outcome: 'failed' };
    const readings = mine.reduce((sum, r) => sum + r.readings, 0);
    if (!delivery.ok) {
      this.#readAhead = undefined;
      this.#mustRecover = true;
      this.#thinning?.failed();
      return this.#failed(delivery, readings, started);
    }
    const durationMs = Math.round(performance.now() - started);
    let completion: Completion;
    try {
      completion = this.#sendingAhead
        ? this.#currentFirst!.completeAhead(records, delivery.deadLetters)
        : this.#reader.complete(records, delivery.deadLetters, this.#thinning?.changes());
    } catch (error) {
      // The destination has the batch but the queue file could not record it (an fsync failed, a
      // full disk): it is sent again later, which deduplication stores once.
      this.#readAhead = undefined;
      this.#thinning?.failed();
      return this.#failed(
        { message: `delivered, but the queue could not record it: ${(error as Error).message}`, level: 'error' },
        readings,
        started,
      );
    }
    const last = records.at(-1)!;
    this.#thinning?.delivered({ segment: last.segment, lastId: last.id });
    const bytes = sending.reduce((sum, r) => sum + r.bytes, 0);
    // A replayed batch goes over the link again, but was counted when it first went.
    this.#budget?.spent(bytes);
    const sentBytes = completion.readings === 0 ? 0 : bytes;
    if (this.#replay !== undefined) this.#replay.window.acknowledged(this.#replay.queue.cursor);
    this.#backoff.reset();
    // A replayed batch was counted when it was first delivered.
    const expired = completion.readings === 0 ? 0 : (delivery.expired ?? 0);
    const passed = completion.readings === 0 ? 0 : completion.readings - readings;
    const thinnedReadings = completion.readings === 0 ? 0 : (thinned?.thinned ?? 0);
    const delivered =
      completion.readings === 0
        ? 0
        : completion.readings -
          passed -
          expired -
          thinnedReadings -
          delivery.deadLetters.reduce((sum, d) => sum + d.line.split('\n').length, 0);
    this.#events.delivered({ ...completion, delivered, passed, expired, thinned: thinnedReadings, sentBytes, durationMs });
    this.#log.info(
      {
        event: 'delivered',
        sink: this.name,
        readings: delivered,
        ...(thinned === undefined ? {} : { thinned: thinned.thinned, summaries: thinned.summaries }),
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
    // With records sent ahead, the backlog behind them goes on at once.
    return { outcome: full || this.#currentFirst?.ahead !== undefined ? 'full' : 'delivered' };
  }

  /** The records this sink delivers: all of them, but those re-queued for another sink alone. */
  #mine(records: QueueRecord[]): QueueRecord[] {
    const name = this.name;
    return records.some((r) => r.sink !== undefined && r.sink !== name)
      ? records.filter((r) => r.sink === undefined || r.sink === name)
      : records;
  }

  /** A batch only of records re-queued for other sinks: the mark moves past them, nothing is sent or counted as delivered. */
  #passOthers(records: QueueRecord[], full: boolean): { outcome: Outcome } {
    let completion: Completion;
    try {
      completion = this.#sendingAhead ? this.#currentFirst!.completeAhead(records) : this.#reader.complete(records);
    } catch (error) {
      // The queue file could not record it (an fsync failed, a full disk): passed again later.
      this.#log.warn({ event: 'pass_failed', sink: this.name, error: (error as Error).message }, 'could not pass records of other sinks');
      return { outcome: 'failed' };
    }
    if (this.#replay !== undefined) this.#replay.window.acknowledged(this.#replay.queue.cursor);
    if (completion.readings > 0) this.#events.passed?.(completion.readings);
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
