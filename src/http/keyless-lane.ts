/**
 * Where HTTP requests without an `X-API-Key` (console pages and logins, scrapes, health checks) wait
 * for their turn: one starts each turn of the event loop, so whatever arrives at once, the devices'
 * requests ready meanwhile are read, committed and answered between two of them. A request whose
 * body has arrived runs to its answer in its turn (its awaits resolve before the loop turns); one
 * that waits for more of its body gives its turn up until then.
 *
 * Bounded without a limit of its own: a connection holds at most one request in the lane (Node reads
 * the next one on a connection after the current one's answer), and connections are bounded by
 * `MAX_CONNECTIONS`.
 */
export class KeylessLane {
  /** Waiting starts, the first at `#head`; the array is compacted when it is half spent. */
  #waiting: (() => void)[] = [];
  #head = 0;
  #scheduled = false;

  constructor(private readonly schedule: (turn: () => void) => void = setImmediate) {}

  /** Requests waiting for their turn now. */
  get waiting(): number {
    return this.#waiting.length - this.#head;
  }

  /** Runs `start` at a later turn of the event loop, after those enqueued before it. */
  enqueue(start: () => void): void {
    this.#waiting.push(start);
    this.#next();
  }

  #next(): void {
    if (this.#scheduled || this.waiting === 0) return;
    this.#scheduled = true;
    // A callback of setImmediate that schedules another runs it at the next turn, after that turn's
    // I/O: so one start a turn, however many wait.
    this.schedule(this.#turn);
  }

  readonly #turn = (): void => {
    this.#scheduled = false;
    const start = this.#waiting[this.#head]!;
    this.#head += 1;
    if (this.#head * 2 >= this.#waiting.length) {
      this.#waiting = this.#waiting.slice(this.#head);
      this.#head = 0;
    }
    this.#next();
    start();
  };
}
