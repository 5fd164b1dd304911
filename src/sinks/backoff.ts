/**
 * Exponential backoff with jitter: the n-th wait is uniform in [c/2, c), c = min(max, base * 2^n),
 * so retries spread out without ever spinning.
 */
export class Backoff {
  #attempt = 0;

  constructor(
    readonly baseMs: number,
    readonly maxMs: number,
    private readonly random: () => number = Math.random,
  ) {}

  get attempts(): number {
    return this.#attempt;
  }

  next(): number {
    const ceiling = Math.min(this.maxMs, this.baseMs * 2 ** Math.min(this.#attempt, 30));
    this.#attempt += 1;
    return Math.floor(ceiling / 2 + (this.random() * ceiling) / 2);
  }

  reset(): void {
    this.#attempt = 0;
  }
}
