/** Minutes kept: the last hour. */
export const MINUTES = 60;
const MINUTE_MS = 60_000;

/**
 * Counts per minute over the last hour in a fixed ring: 60 numbers, whatever the load. A slot is
 * cleared when its minute comes round again, so reading and counting cost the same at any age.
 */
export class MinuteCounts {
  readonly #counts = new Uint32Array(MINUTES);
  /** The minute (since the epoch) the newest slot belongs to. */
  #minute = 0;

  add(count: number, now: number): void {
    this.#advance(Math.floor(now / MINUTE_MS));
    this.#counts[this.#minute % MINUTES]! += count;
  }

  /** The last hour oldest first, the current (unfinished) minute last. */
  series(now: number): number[] {
    this.#advance(Math.floor(now / MINUTE_MS));
    const out = new Array<number>(MINUTES);
    for (let i = 0; i < MINUTES; i++) out[i] = this.#counts[(this.#minute + 1 + i) % MINUTES]!;
    return out;
  }

  /** The sum over the last hour. */
  total(now: number): number {
    this.#advance(Math.floor(now / MINUTE_MS));
    let sum = 0;
    for (const count of this.#counts) sum += count;
    return sum;
  }

  #advance(minute: number): void {
    if (minute <= this.#minute) return;
    const gap = Math.min(minute - this.#minute, MINUTES);
    for (let i = 1; i <= gap; i++) this.#counts[(this.#minute + i) % MINUTES] = 0;
    this.#minute = minute;
  }
}

/**
 * Readings per minute of the whole gateway, taken from the ingest path's own running total
 * (`GatewayStats.acceptedReadings`) by sampling it, so counting them costs ingest nothing.
 */
export class CounterMinutes {
  readonly #counts = new MinuteCounts();
  #last: number | undefined;

  constructor(private readonly read: () => number) {}

  /** Moves what the counter gained since the last sample into the current minute. */
  sample(now: number): void {
    const value = this.read();
    if (this.#last !== undefined && value > this.#last) this.#counts.add(value - this.#last, now);
    this.#last = value;
  }

  series(now: number): number[] {
    this.sample(now);
    return this.#counts.series(now);
  }
}
