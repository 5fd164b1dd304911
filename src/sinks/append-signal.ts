/**
 * Ingest's commits, counted in memory both threads share, so that a sink with nothing to deliver
 * sleeps until there is something instead of reading the queue file every interval: a quiet
 * gateway then wakes for its own timers only. Waking goes through `Atomics.waitAsync`, and only
 * while a sink waits does a commit pay for the notify.
 */
export class AppendSignal {
  readonly buffer: SharedArrayBuffer;
  /** [0]: commits so far (wraps; only compared for equality); [1]: sinks waiting now. */
  readonly #cells: Int32Array;

  constructor(buffer: SharedArrayBuffer = new SharedArrayBuffer(8)) {
    this.buffer = buffer;
    this.#cells = new Int32Array(buffer);
  }

  /** Ingest committed readings (or re-queued some): wakes the sinks that wait. */
  appended(): void {
    Atomics.add(this.#cells, 0, 1);
    if (Atomics.load(this.#cells, 1) > 0) Atomics.notify(this.#cells, 0);
  }

  /** The count to hand to `changed`, taken before the queue is read. */
  get count(): number {
    return Atomics.load(this.#cells, 0);
  }

  /**
   * Resolves once the count is no longer `seen` (at once when it changed since), after `ms`, or when
   * `interrupt` resolves.
   */
  async changed(seen: number, ms: number, interrupt: Promise<void>): Promise<void> {
    Atomics.add(this.#cells, 1, 1);
    try {
      const wait = Atomics.waitAsync(this.#cells, 0, seen, ms);
      if (wait.async) await Promise.race([wait.value, interrupt]);
    } finally {
      Atomics.sub(this.#cells, 1, 1);
    }
  }
}
