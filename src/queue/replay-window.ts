/**
 * When a destination acknowledged each batch of this run, so that a sink keeps its delivered
 * readings for `windowMs` before it lets them go: a destination on the same power as the gateway
 * (QuestDB on the appliance) may lose what it acknowledged within the kernel's writeback age when
 * the power fails, and the readings kept are sent again after such a cut.
 *
 * Only acknowledgements seen while this process ran count: time the board spent without power
 * wrote nothing back, so after a start every kept reading is sent again and its clock starts anew.
 * Holds one entry per acknowledged batch of the last `windowMs`.
 *
 * The window is a duration, so it is timed by the monotonic clock: a step of the wall clock (NTP
 * setting a board's clock at boot, an operator's `date -s`) neither lets every kept reading go at
 * once nor holds them past the window.
 */
export class ReplayWindow<Position> {
  readonly #windowMs: number;
  readonly #now: () => number;
  #acknowledged: { position: Position; at: number }[] = [];

  constructor(windowMs: number, now: () => number = () => performance.now()) {
    this.#windowMs = windowMs;
    this.#now = now;
  }

  /** The destination acknowledged everything up to `position`, now. */
  acknowledged(position: Position): void {
    this.#acknowledged.push({ position, at: this.#now() });
  }

  /** Some acknowledged readings are still kept. */
  get holds(): boolean {
    return this.#acknowledged.length > 0;
  }

  /** When (by `now`) the newest acknowledgement kept was made, if any is kept. */
  get newestAcknowledgedAt(): number | undefined {
    return this.#acknowledged.at(-1)?.at;
  }

  /** When (by `now`) the oldest acknowledgement kept reaches `windowMs`, if any is kept. */
  get nextExpiry(): number | undefined {
    const oldest = this.#acknowledged[0];
    return oldest === undefined ? undefined : oldest.at + this.#windowMs;
  }

  /** The newest position acknowledged, if any: what may be let go when the window must be cut short. */
  newest(): Position | undefined {
    return this.#acknowledged.at(-1)?.position;
  }

  /** The newest position acknowledged at least `windowMs` ago, if any: what may be let go. */
  expired(): Position | undefined {
    const limit = this.#now() - this.#windowMs;
    let last: Position | undefined;
    for (const entry of this.#acknowledged) {
      if (entry.at > limit) break;
      last = entry.position;
    }
    return last;
  }

  /** The kept mark moved to `position` (one `expired()` gave): forgets the acknowledgements up to it. */
  released(position: Position): void {
    const index = this.#acknowledged.findIndex((entry) => entry.position === position);
    if (index >= 0) this.#acknowledged = this.#acknowledged.slice(index + 1);
  }

  /** Everything kept is being sent again: its acknowledgements count from the new ones. */
  replaying(): void {
    this.#acknowledged = [];
  }
}
