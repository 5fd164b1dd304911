const ZEROS = '000000000';

/**
 * Receive times for readings sent without one: wall-clock milliseconds plus a nanosecond
 * tie-breaker, so readings of one device received in the same millisecond (a batch, or fast
 * single pushes) stay distinct rows instead of collapsing under deduplication.
 */
export class ReceiveClock {
  #ms = 0;
  #sub = 0;

  constructor(private readonly now: () => number = Date.now) {}

  /** Next receive time in epoch nanoseconds, strictly after the previous one unless the clock stepped back. */
  nextNs(): string {
    const now = this.now();
    // Follow the wall clock forward, and back when it steps back by more than a second (NTP).
    if (now > this.#ms || now < this.#ms - 1000) {
      this.#ms = now;
      this.#sub = 0;
    } else if (++this.#sub === 1_000_000) {
      this.#ms += 1;
      this.#sub = 0;
    }
    const sub = String(this.#sub);
    return `${this.#ms}${ZEROS.slice(3 + sub.length)}${sub}`;
  }
}
