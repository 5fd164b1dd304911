/**
 * Bounds the request bytes held in memory at once. A parsed JSON body takes several times its
 * size, so without a bound many concurrent large bodies could exhaust a Pi's memory; requests
 * that do not fit are refused at once with 503 and Retry-After instead of being read.
 */
export class InflightBudget {
  #used = 0;

  constructor(readonly maxBytes: number) {}

  /** Reserves `bytes`; false when they do not fit. A request larger than the whole budget still fits an idle gateway. */
  tryReserve(bytes: number): boolean {
    if (this.#used > 0 && this.#used + bytes > this.maxBytes) return false;
    this.#used += bytes;
    return true;
  }

  release(bytes: number): void {
    this.#used -= bytes;
  }

  get used(): number {
    return this.#used;
  }
}
