import type { DailyWindow } from '../config/daily-windows.js';
import { msUntilWindow, withinWindows } from './cheap-hours.js';

/**
 * A sink's bandwidth budget: bytes a second on average. A batch goes whole when its turn comes; the
 * sink then waits as long as the budget needs to pay for its bytes before it sends the next one, so
 * over any stretch of deliveries the average stays within the budget (bursts of one batch).
 *
 * The bytes counted are the readings' as queued (their record text), which is what the sink sends
 * whatever its encoding: the wire carries the encoding's framing beside them (JSON keys, headers),
 * or fewer bytes when it compresses.
 *
 * In its cheap hours (times of day on the gateway's clock when the link costs less) the budget does
 * not apply: nothing is counted, a wait ends when they begin, and the budget starts afresh after.
 */
export class SinkBudget {
  readonly bytesPerS: number;
  readonly cheapHours: readonly DailyWindow[];
  /** When the bytes sent so far are paid for (ms, monotonic). */
  #paidAt = Number.NEGATIVE_INFINITY;
  readonly #clock: () => Date;

  constructor(bytesPerS: number, cheapHours: readonly DailyWindow[] = [], clock: () => Date = () => new Date()) {
    if (!(bytesPerS > 0)) throw new RangeError('a budget must be above 0 bytes a second');
    this.bytesPerS = bytesPerS;
    this.cheapHours = cheapHours;
    this.#clock = clock;
  }

  /** Whether the budget is lifted now. */
  get cheapNow(): boolean {
    return withinWindows(this.cheapHours, this.#clock());
  }

  /** `bytes` went at `now`. */
  spent(bytes: number, now = performance.now()): void {
    if (this.cheapNow) {
      this.#paidAt = Number.NEGATIVE_INFINITY;
      return;
    }
    this.#paidAt = Math.max(this.#paidAt, now) + (bytes / this.bytesPerS) * 1000;
  }

  /** How long the next batch must wait (ms): until its bytes are paid for, or the cheap hours begin. */
  waitMs(now = performance.now()): number {
    const owed = Math.max(0, Math.ceil(this.#paidAt - now));
    return owed === 0 ? 0 : Math.min(owed, msUntilWindow(this.cheapHours, this.#clock()));
  }

  /** Seconds to send `bytes` at the budget. */
  secondsFor(bytes: number): number {
    return bytes / this.bytesPerS;
  }
}
