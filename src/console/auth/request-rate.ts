/**
 * A token bucket: `perSecond` requests a second on average, `burst` at once. Deterministic with an
 * injected clock; a refused request costs a subtraction and a comparison.
 */
export class RequestRate {
  #tokens: number;
  #lastMs: number;

  constructor(
    readonly perSecond: number,
    readonly burst: number,
    private readonly now: () => number = Date.now,
  ) {
    this.#tokens = burst;
    this.#lastMs = now();
  }

  /** Takes a token; false when there is none now. */
  take(): boolean {
    const now = this.now();
    this.#tokens = Math.min(this.burst, this.#tokens + ((now - this.#lastMs) * this.perSecond) / 1000);
    this.#lastMs = now;
    if (this.#tokens < 1) return false;
    this.#tokens -= 1;
    return true;
  }
}
