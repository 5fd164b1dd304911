interface Failures {
  count: number;
  lastMs: number;
}

/** Delay of an address's first wrong key; each further one doubles it up to the cap. */
const FIRST_DELAY_MS = 100;

/**
 * Slows down wrong-key answers per client address: the delay doubles with each failure, up to
 * `maxDelayMs`, and is forgotten `forgetAfterMs` after the address's last failure. It never
 * refuses anything: a request with a valid key is answered at once whatever its address did.
 * Memory is bounded: past `maxTracked` addresses the least recently failing one is forgotten.
 */
export class FailureDelay {
  readonly #failures = new Map<string, Failures>();
  /** Wrong or missing keys since start, all addresses together. */
  total = 0;

  constructor(
    readonly maxDelayMs: number,
    readonly forgetAfterMs: number,
    readonly maxTracked = 10_000,
    private readonly now: () => number = Date.now,
  ) {}

  /** Records a wrong key from the address; returns how long to wait before answering it. */
  recordFailure(address: string): number {
    const now = this.now();
    this.total += 1;
    let failures = this.#failures.get(address);
    if (failures !== undefined) this.#failures.delete(address);
    if (failures === undefined || now - failures.lastMs >= this.forgetAfterMs) failures = { count: 0, lastMs: now };
    failures.count += 1;
    failures.lastMs = now;
    // Re-inserting keeps the map in order of last failure, so the first entry is the one to forget.
    this.#failures.set(address, failures);
    if (this.#failures.size > this.maxTracked) this.#failures.delete(this.#failures.keys().next().value!);
    return this.delayOf(failures.count);
  }

  /** True when the address's answers are already delayed by the cap. */
  atCap(address: string): boolean {
    const failures = this.#failures.get(address);
    return failures !== undefined && this.delayOf(failures.count) >= this.maxDelayMs;
  }

  get tracked(): number {
    return this.#failures.size;
  }

  private delayOf(count: number): number {
    return Math.min(this.maxDelayMs, FIRST_DELAY_MS * 2 ** Math.min(count - 1, 30));
  }
}
