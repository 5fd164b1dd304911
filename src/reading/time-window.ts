import { MAX_EPOCH_SECONDS, MIN_EPOCH_SECONDS, type TimeBounds, type TimestampProblem } from './timestamp.js';

export interface TimeWindowSettings {
  /** How far ahead of the gateway's clock a reading's time may be, in seconds. */
  maxAheadS: number;
  /** How far back, in seconds; undefined: as far as 1970. */
  maxAgeS: number | undefined;
  /** What sets the past bound, for the message (e.g. "RETENTION_DAYS=365"). */
  ageReason?: string;
}

const iso = (seconds: number): string => new Date(seconds * 1000).toISOString().replace('.000Z', 'Z');

function duration(seconds: number): string {
  if (seconds % 86_400 === 0) return `${seconds / 86_400} day${seconds === 86_400 ? '' : 's'}`;
  if (seconds % 3600 === 0) return `${seconds / 3600} h`;
  return `${seconds} s`;
}

/**
 * The times a reading may carry right now: no earlier than the local table keeps (its TTL), no later
 * than `maxAheadS` past the gateway's clock. A time far ahead would be the table's newest and so the
 * reference of QuestDB's TTL, which would then drop current partitions; a time before the TTL
 * would be answered 2xx and dropped by QuestDB at once.
 *
 * `refresh()` reads the clock once per request: the hand-written check and the zod schema that
 * explains its refusals then judge by the same bounds.
 */
export class TimeWindow implements TimeBounds {
  minSeconds = MIN_EPOCH_SECONDS;
  maxSeconds = MAX_EPOCH_SECONDS - 1;
  readonly #settings: TimeWindowSettings;
  readonly #now: () => number;
  #nowSeconds = 0;

  constructor(settings: TimeWindowSettings, now: () => number = Date.now) {
    this.#settings = settings;
    this.#now = now;
    this.refresh();
  }

  refresh(): void {
    const nowSeconds = Math.floor(this.#now() / 1000);
    const { maxAheadS, maxAgeS } = this.#settings;
    this.#nowSeconds = nowSeconds;
    this.maxSeconds = Math.min(MAX_EPOCH_SECONDS - 1, nowSeconds + maxAheadS);
    this.minSeconds = maxAgeS === undefined ? MIN_EPOCH_SECONDS : Math.max(MIN_EPOCH_SECONDS, nowSeconds - maxAgeS);
  }

  get tooEarly(): TimestampProblem {
    const why = this.#settings.ageReason === undefined ? '' : ` (${this.#settings.ageReason})`;
    return {
      type: 'datetime_past',
      msg: `Timestamp is before the retention window, which starts at ${iso(this.minSeconds)}${why}: it would not be kept. Is the device clock set?`,
    };
  }

  get tooLate(): TimestampProblem {
    return {
      type: 'datetime_future',
      msg: `Timestamp is more than ${duration(this.#settings.maxAheadS)} ahead of the gateway's clock (${iso(this.#nowSeconds)}; MAX_TIME_AHEAD_S). Is the device clock set?`,
    };
  }
}
