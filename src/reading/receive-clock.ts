const ZEROS = '000000';
/**
 * The nanoseconds of a millisecond are split into eras of 125,000: the clock starts in era 0 and
 * moves to the next era when it follows the wall clock back, so the times it gives after a step
 * back can never be ones it gave before the step, however the milliseconds overlap.
 */
const ERA_NS = 125_000;
const ERAS = 8;
/** A wall clock behind the times given by at most this much is jitter: the clock holds instead of following it. */
const HOLD_MS = 1_000;
/** At a start, a queue's newest receive time at most this far ahead of the wall clock is held to. */
const RESUME_HOLD_MAX_MS = 24 * 60 * 60 * 1000;

/**
 * The receive times one request was given: `count` consecutive ones from nanosecond `pos` of the
 * era that starts at `eraNs` in millisecond `ms` (carrying into the next milliseconds of that era).
 */
export class RequestTimes {
  constructor(
    readonly ms: number,
    readonly eraNs: number,
    readonly pos: number,
    readonly count: number,
  ) {}

  /** The `offset`-th receive time (0 .. count - 1) in epoch nanoseconds. */
  ns(offset = 0): string {
    const at = this.pos + offset;
    const ms = at < ERA_NS ? this.ms : this.ms + Math.floor(at / ERA_NS);
    const sub = String(this.eraNs + (at % ERA_NS));
    return `${ms}${ZEROS.slice(sub.length)}${sub}`;
  }
}

/** What the clock tells about the wall clock, for the log. */
export type ClockNotice =
  /** It stepped back by `stepMs`: times follow it, in era `era`. */
  | { kind: 'stepped_back'; stepMs: number; era: number }
  /** It is behind the times given by `aheadMs` and the clock holds: times follow the last one given until it caught up. */
  | { kind: 'held'; aheadMs: number }
  /** At the start, the queue's newest receive time was `aheadMs` ahead, too far to wait for: times follow the wall clock in the last era. */
  | { kind: 'resumed_behind'; aheadMs: number };

/**
 * Receive times for readings sent without one: wall-clock milliseconds plus a nanosecond
 * tie-breaker. The clock never hands out a time twice in a run. It holds over a wall clock jittering
 * back by up to a second; after a larger step back (NTP correcting a clock that ran ahead) it follows
 * the wall clock, in the next era of nanoseconds, so times stay accurate and distinct; after the
 * last of 8 eras it holds. `after` is the newest receive time (epoch ms) the queue holds from earlier
 * runs: a start on a clock behind it (a board without a real-time clock, before NTP) holds until
 * the wall clock passes it, unless it is more than a day ahead (then the last era).
 */
export class ReceiveClock {
  #ms = 0;
  /** The next free nanosecond of `#ms` in the current era. */
  #pos = 0;
  #era = 0;
  /** The newest millisecond any time was given in, in any era. */
  #highMs = 0;
  /** A hold was reported and the wall clock has not caught up since. */
  #held = false;
  /** Holding to the newest receive time of earlier runs, whose eras are unknown: no step into another era. */
  #resuming = false;

  constructor(
    private readonly now: () => number = Date.now,
    after?: number,
    private readonly notice: (notice: ClockNotice) => void = () => undefined,
  ) {
    if (after === undefined) return;
    const aheadMs = after - now();
    this.#highMs = after;
    if (aheadMs < 0) return;
    if (aheadMs <= RESUME_HOLD_MAX_MS) {
      this.#ms = after;
      this.#pos = ERA_NS;
      this.#resuming = true;
    } else {
      this.#era = ERAS - 1;
      notice({ kind: 'resumed_behind', aheadMs });
    }
  }

  /** Reserves `count` (at least 1) consecutive receive times for one request. */
  reserve(count = 1): RequestTimes {
    const now = this.now();
    if (now > this.#ms) {
      this.#ms = now;
      this.#pos = 0;
      this.#held = false;
      this.#resuming = false;
    } else if (this.#ms - now > HOLD_MS && this.#era < ERAS - 1 && !this.#resuming) {
      this.#era += 1;
      this.notice({ kind: 'stepped_back', stepMs: this.#ms - now, era: this.#era });
      this.#ms = now;
      this.#pos = 0;
    } else if (this.#ms - now > HOLD_MS && !this.#held) {
      this.#held = true;
      this.notice({ kind: 'held', aheadMs: this.#ms - now });
    }
    if (this.#pos === ERA_NS) {
      this.#ms += 1;
      this.#pos = 0;
    }
    const times = new RequestTimes(this.#ms, this.#era * ERA_NS, this.#pos, count);
    const end = this.#pos + count;
    this.#ms += Math.floor((end - 1) / ERA_NS);
    this.#pos = ((end - 1) % ERA_NS) + 1;
    if (this.#ms > this.#highMs) this.#highMs = this.#ms;
    return times;
  }

  /** The newest millisecond any time was given in, or the wall clock's when later: what the queue records as received. */
  receivedMs(): number {
    return Math.max(this.now(), this.#highMs);
  }

  /** One receive time of its own: `reserve(1).ns()`. */
  nextNs(): string {
    return this.reserve(1).ns();
  }
}
