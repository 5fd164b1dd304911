/**
 * Which sink has a whole batch of its own waiting, so it delivers before its interval ends: the
 * readings ingest appended, and each sink's count of them when it last read the queue, in memory
 * both threads share. A sink is woken once per read, when its own batch size has been appended
 * since, and never by another sink's smaller batch: a sink that gathers readings for a long
 * interval (a metered link's) sends requests that full, and no sooner.
 */
export class SinkWakes {
  readonly buffer: SharedArrayBuffer;
  /** [0]: readings appended (wraps: only differences count); [1 + i]: that count at sink i's last read. */
  readonly #cells: Int32Array;
  readonly #batches: readonly number[];
  /** The read each sink was last woken after: one wake per read. */
  readonly #wokenAfter: number[];

  /** `batches`: each sink's batch size, in the order of its index. */
  constructor(batches: readonly number[], buffer = new SharedArrayBuffer(4 * (1 + batches.length))) {
    this.buffer = buffer;
    this.#cells = new Int32Array(buffer);
    this.#batches = batches;
    this.#wokenAfter = batches.map(() => Number.NaN);
  }

  /**
   * Ingest side, after each commit: `total` readings appended so far. The indices of the sinks to
   * wake now, or undefined; runs after every request, so it allocates nothing when none is due.
   */
  appended(total: number): number[] | undefined {
    const now = total | 0;
    Atomics.store(this.#cells, 0, now);
    let due: number[] | undefined;
    for (let i = 0; i < this.#batches.length; i++) {
      const readAt = Atomics.load(this.#cells, i + 1);
      if (((now - readAt) | 0) < this.#batches[i]! || this.#wokenAfter[i] === readAt) continue;
      this.#wokenAfter[i] = readAt;
      due ??= [];
      due.push(i);
    }
    return due;
  }

  /** Delivery side: sink `index` reads the queue now; what was appended so far waits no longer. */
  reading(index: number): void {
    Atomics.store(this.#cells, index + 1, Atomics.load(this.#cells, 0));
  }
}
