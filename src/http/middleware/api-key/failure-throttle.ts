interface Window {
  startedMs: number;
  failures: number;
}

/**
 * Counts failed authentications per client address in fixed windows. An address that reaches the
 * limit is refused until its window ends; other addresses are unaffected. Memory is bounded: past
 * `maxTracked` addresses the oldest entries are forgotten.
 */
export class FailureThrottle {
  readonly #windows = new Map<string, Window>();

  constructor(
    readonly limit: number,
    readonly windowMs: number,
    readonly maxTracked = 10_000,
    private readonly now: () => number = Date.now,
  ) {}

  /** Milliseconds the address must still wait; 0 when it may try. */
  blockedForMs(address: string): number {
    const window = this.#current(address);
    if (window === undefined || window.failures < this.limit) return 0;
    return window.startedMs + this.windowMs - this.now();
  }

  /** Records a failure; returns true when this failure made the address blocked. */
  recordFailure(address: string): boolean {
    let window = this.#current(address);
    if (window === undefined) {
      if (this.#windows.size >= this.maxTracked) this.#evictOldest();
      window = { startedMs: this.now(), failures: 0 };
      this.#windows.set(address, window);
    }
    window.failures += 1;
    return window.failures === this.limit;
  }

  get tracked(): number {
    return this.#windows.size;
  }

  #current(address: string): Window | undefined {
    const window = this.#windows.get(address);
    if (window !== undefined && this.now() - window.startedMs >= this.windowMs) {
      this.#windows.delete(address);
      return undefined;
    }
    return window;
  }

  #evictOldest(): void {
    const now = this.now();
    for (const [address, window] of this.#windows) {
      if (now - window.startedMs >= this.windowMs) this.#windows.delete(address);
    }
    if (this.#windows.size >= this.maxTracked) {
      const oldest = this.#windows.keys().next();
      if (!oldest.done) this.#windows.delete(oldest.value);
    }
  }
}
