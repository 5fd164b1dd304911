/**
 * A sink's bandwidth budget: bytes a second on average. A batch goes whole when its turn comes; the
 * sink then waits as long as the budget needs to pay for its bytes before it sends the next one, so
 * over any stretch of deliveries the average stays within the budget (bursts of one batch).
 *
 * The bytes counted are the readings' as queued (their record text), which is what the sink sends
 * whatever its encoding: the wire carries the encoding's framing beside them (JSON keys, headers),
 * or fewer bytes when it compresses.
 */
export class SinkBudget {
  readonly bytesPerS: number;
  /** When the bytes sent so far are paid for (ms, monotonic). */
  #paidAt = Number.NEGATIVE_INFINITY;

  constructor(bytesPerS: number) {
    if (!(bytesPerS > 0)) throw new RangeError('a budget must be above 0 bytes a second');
    this.bytesPerS = bytesPerS;
  }

  /** `bytes` went at `now`. */
  spent(bytes: number, now = performance.now()): void {
    this.#paidAt = Math.max(this.#paidAt, now) + (bytes / this.bytesPerS) * 1000;
  }

  /** How long the next batch must wait (ms). */
  waitMs(now = performance.now()): number {
    return Math.max(0, Math.ceil(this.#paidAt - now));
  }

  /** Seconds to send `bytes` at the budget. */
  secondsFor(bytes: number): number {
    return bytes / this.bytesPerS;
  }
}
