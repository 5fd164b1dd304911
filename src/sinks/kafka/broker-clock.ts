/** A clock step larger than this means the site's clock was set (NTP came back): what was learnt of the broker's clock no longer holds. */
const STEP_MS = 60_000;
/** Offsets smaller than this are the ordinary drift of two clocks and a round trip, not worth correcting. */
const NEGLIGIBLE_MS = 1_000;

/**
 * The broker's clock as the site knows it: the site's own, shifted by what the broker's last
 * timestamp refusal told. A step of the site's clock since then (read against the monotonic
 * clock) forgets the shift, so a site whose clock was put right stamps with its own clock again.
 */
export class BrokerClock {
  #offsetMs = 0;
  /** The site's wall and monotonic clocks when the offset was learnt. */
  #learntAt: { wallMs: number; monoMs: number } | undefined;

  constructor(private readonly now: () => number) {}

  /** The broker's time now, as well as the site knows it. */
  brokerNow(): number {
    const wallMs = this.now();
    const at = this.#learntAt;
    if (at !== undefined && Math.abs(wallMs - at.wallMs - (performance.now() - at.monoMs)) > STEP_MS) {
      this.#offsetMs = 0;
      this.#learntAt = undefined;
    }
    return wallMs + this.#offsetMs;
  }

  /** Takes the broker's time from its refusal; false when it tells nothing new (the refusal has another cause). */
  learn(brokerNowMs: number): boolean {
    const wallMs = this.now();
    const offsetMs = brokerNowMs - wallMs;
    if (Math.abs(offsetMs - this.#offsetMs) < NEGLIGIBLE_MS) return false;
    this.#offsetMs = offsetMs;
    this.#learntAt = { wallMs, monoMs: performance.now() };
    return true;
  }

  /** How far the site's clock is ahead of the broker's, while a shift is in use. */
  aheadMs(): number | undefined {
    return this.#learntAt === undefined ? undefined : -this.#offsetMs;
  }
}
