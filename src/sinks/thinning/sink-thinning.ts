import type { Progress } from '../../queue/queue-file.js';
import type { QueueRecord } from '../../queue/queue-reader.js';
import { compareMarks } from '../../queue/sink-marks.js';
import type { SinkStateChanges } from '../../queue/sink-state.js';
import { decodeSeriesState, encodeSeriesState } from './series-state-codec.js';
import { Thinning, type SeriesState } from './thinning.js';
import type { ThinningRule } from './thinning-rules.js';

/**
 * A sink loop's thinning (thinning.ts) with the state kept in the queue file beside the sink's mark
 * (queue/sink-state.ts), in the transaction that moves it, so the records after the mark are thinned
 * the same way after a crash.
 *
 * A sink that keeps delivered records for a replay window sends them again from its kept mark: its
 * state on disk is the state at the kept mark, written with it, and a replay starts from that. The
 * changes of each batch delivered since are held in memory until the kept mark passes them.
 */
export class SinkThinning {
  readonly #sink: string;
  readonly #rules: readonly ThinningRule[];
  readonly #keeps: boolean;
  /** The state the file holds (at the progress mark, or at the kept mark for a sink that keeps). */
  readonly #stored: Map<string, string>;
  #engine: Thinning;
  /** For a sink that keeps: each delivered batch's end and the series it changed, oldest first. */
  #pending: { to: Progress; changes: Map<string, string | undefined> }[] = [];

  constructor(options: { sink: string; rules: readonly ThinningRule[]; stored: ReadonlyMap<string, string>; keeps: boolean }) {
    this.#sink = options.sink;
    this.#rules = options.rules;
    this.#keeps = options.keeps;
    this.#stored = new Map(options.stored);
    this.#engine = this.#fromStored();
  }

  /** The records to send of a batch read after the last one; `thinned`: readings not sent as themselves. */
  thin(records: readonly QueueRecord[]): { records: QueueRecord[]; thinned: number; summaries: number } {
    const batch = this.#engine.thin(records);
    return { records: batch.records, thinned: batch.thinned, summaries: batch.summaries };
  }

  /** What to write with the progress mark for the batch just thinned (nothing for a sink that keeps). */
  changes(): SinkStateChanges | undefined {
    return this.#keeps ? undefined : encoded(this.#engine.changes());
  }

  /** The batch ending at `end` is recorded as delivered. */
  delivered(end: Progress): void {
    const changes = encoded(this.#engine.commit());
    if (!this.#keeps) {
      apply(this.#stored, changes);
      return;
    }
    const last = this.#pending.at(-1);
    if (changes.size > 0 && (last === undefined || compareMarks(end, last.to) > 0)) this.#pending.push({ to: end, changes });
  }

  /** The batch was not delivered, or its delivery not recorded: it is thinned again from the same state. */
  failed(): void {
    this.#engine.rollback();
  }

  /** Everything kept is sent again from the kept mark: so is the thinning. */
  replaying(): void {
    this.#pending = [];
    this.#engine = this.#fromStored();
  }

  /** What to write with the kept mark moved to `to`: the changes of the batches up to it. */
  keptChanges(to: Progress): SinkStateChanges | undefined {
    if (!this.#keeps) return undefined;
    const merged = new Map<string, string | undefined>();
    for (const batch of this.#pending) {
      if (compareMarks(batch.to, to) > 0) break;
      for (const [key, state] of batch.changes) merged.set(key, state);
    }
    return merged;
  }

  /** The kept mark moved to `to`, with `keptChanges(to)` written. */
  kept(to: Progress): void {
    while (this.#pending.length > 0 && compareMarks(this.#pending[0]!.to, to) <= 0) apply(this.#stored, this.#pending.shift()!.changes);
  }

  #fromStored(): Thinning {
    const state = new Map<string, SeriesState>();
    for (const [key, text] of this.#stored) state.set(key, decodeSeriesState(text));
    return new Thinning({ sink: this.#sink, versions: [{ rules: this.#rules }], state });
  }
}

const encoded = (changes: ReadonlyMap<string, SeriesState | undefined>): Map<string, string | undefined> =>
  new Map([...changes].map(([key, state]) => [key, state === undefined ? undefined : encodeSeriesState(state)]));

function apply(stored: Map<string, string>, changes: ReadonlyMap<string, string | undefined>): void {
  for (const [key, state] of changes) {
    if (state === undefined) stored.delete(key);
    else stored.set(key, state);
  }
}
