import type { Progress } from '../../queue/queue-file.js';
import type { QueueRecord } from '../../queue/queue-reader.js';
import { RecordCorruptError, scanRecord } from '../../queue/record-codec.js';
import { compareMarks } from '../../queue/sink-marks.js';
import { isSummaryRule, RuleBook, SUMMARY_FIELDS, type ThinningRule } from './thinning-rules.js';

/**
 * A forwarding sink's thinning: which readings of its records it sends, decided from the records
 * alone, in queue order, and from the state left by the records before them. Nothing else goes in
 * (no wall clock, no batch boundary, no answer of the destination), so the same records after the
 * same state give the same readings to send, however they are cut into batches and however often
 * they are sent again: the sink keeps the state with its progress mark, in one transaction.
 *
 * - Deadband: a reading goes when no reading of its series went before, when its value differs from
 *   the last one that went by more than the deadband, or when its time is `maxIntervalMs` or more
 *   after that one's.
 * - Summary: each series' readings are gathered per interval of `summaryMs` aligned to the epoch
 *   (by reading time). An interval is closed, and its summary sent, when the sink passes a reading
 *   of the series at or after the interval's end plus `latenessMs`; when it passes a record received
 *   (by the gateway's receive clock, `received_ms`) `summaryMs + latenessMs` or more after the
 *   series' last reading was received (a series that stopped); and, for the backlog of a
 *   current-first sink, at the backlog's end. A reading of an interval already closed is late: not
 *   sent (the local QuestDB has it), counted.
 *
 * Records re-queued for this sink (dead letters it refused) go whole: they were chosen once.
 * A record that cannot be decoded goes whole too, and becomes a dead letter at the target.
 */

/** A series' state: the last reading a deadband forwarded, or a summary's open intervals. */
export type SeriesState = DeadbandState | SummaryState;

export interface DeadbandState {
  k: 'd';
  /** The value and time (ms) of the last reading forwarded. */
  last: number;
  lastMs: number;
}

export interface SummaryState {
  k: 's';
  /** The rule's interval and lateness it was gathered by: a closing needs them after a rule changed. */
  i: number;
  l: number;
  /** Intervals starting before this are closed: a reading of one is late. */
  closedUntil: number;
  /** When the series' last reading was received (ms, the record's `received_ms`). */
  recv: number;
  /** Open intervals, by start. */
  open: Interval[];
  /** Whose readings: the record's site and own-site id, for the summaries' records. */
  site?: string;
  own?: number;
}

export interface Interval {
  start: number;
  min: number;
  max: number;
  sum: number;
  count: number;
  last: number;
  /** The time (ns, text) of `last`: the latest reading of the interval (the later in queue order on a tie). */
  lastNs: string;
}

/** Rules from a position on: they apply to records after `from` (all records when absent). */
export interface RuleVersion {
  from?: Progress;
  rules: readonly ThinningRule[];
}

/**
 * Which intervals a stream of a current-first sink owns: the backlog those that start before the
 * split (`splitMs` aligned down to the interval), the head those from it on. A reading of the other
 * stream's intervals is late in this one.
 */
export interface StreamSplit {
  role: 'head' | 'backlog';
  splitMs: number;
}

/** What a batch's records come to. */
export interface ThinnedBatch {
  /** The records to send: each record's readings that go, and records of summaries. */
  records: QueueRecord[];
  /** Readings of the batch not sent as themselves (held back by a deadband, gathered into a summary, or late). */
  thinned: number;
  /** Of those, readings of intervals already closed. */
  late: number;
  /** Summary readings among those to send. */
  summaries: number;
}

/** At most this many open intervals per series; a reading that opens one more closes the oldest. */
const MAX_OPEN = 32;

const formatValue = (value: number): string => (Object.is(value, -0) ? '-0' : String(value));

/** A reading's time in whole milliseconds (floor), from its text in nanoseconds. */
export const timeMsOf = (timeNs: string): number => (timeNs.length <= 6 ? 0 : Number(timeNs.slice(0, -6)));

/** `a` later than `b`, both epoch nanoseconds as digits without leading zeros. */
const laterNs = (a: string, b: string): boolean => a.length > b.length || (a.length === b.length && a > b);

/** The key of a record's origin: its own-site id, the site it relays, or neither (own readings of an early release). */
const originKey = (record: QueueRecord): string =>
  record.ownSite !== undefined ? `o${record.ownSite}` : record.site === undefined ? 'o' : `r${record.site}`;

export class Thinning {
  readonly #versions: { from: Progress | undefined; book: RuleBook }[];
  readonly #state: Map<string, SeriesState>;
  readonly #split: StreamSplit | undefined;
  /** The states of the series touched since `begin`, as they were then (undefined: none). */
  #undo = new Map<string, SeriesState | undefined>();
  /** Summary series with open intervals, and the earliest receive time that closes one of them for silence. */
  #openSeries = new Set<string>();
  #nextIdleMs = Number.POSITIVE_INFINITY;
  readonly #sinkName: string;

  constructor(options: { sink: string; versions: readonly RuleVersion[]; state?: Map<string, SeriesState>; split?: StreamSplit }) {
    this.#sinkName = options.sink;
    this.#versions = options.versions.map((v) => ({ from: v.from, book: new RuleBook(v.rules) }));
    if (this.#versions.length === 0) this.#versions.push({ from: undefined, book: new RuleBook([]) });
    this.#state = options.state ?? new Map();
    this.#split = options.split;
    for (const [key, state] of this.#state) this.#noteOpen(key, state);
  }

  /** The state of every series, as the last `commit` left it (and the batch since, until then). */
  get state(): ReadonlyMap<string, SeriesState> {
    return this.#state;
  }

  /**
   * The readings to send of `records` (read in queue order after the last batch), and the state
   * after them, kept until `commit` or `rollback`. `endOfBacklog`: the batch ends a current-first
   * sink's backlog, which closes every interval still open.
   */
  thin(records: readonly QueueRecord[], endOfBacklog = false): ThinnedBatch {
    const out: QueueRecord[] = [];
    const counts = { thinned: 0, late: 0, summaries: 0 };
    /** Summary lines waiting to be sent, by origin: they go in a record of their own after the record that closed them. */
    const closed = new Map<string, { site: string | undefined; own: number | undefined; lines: string[] }>();
    const emit = (key: string, state: SummaryState, interval: Interval): void => {
      const origin = key.slice(0, key.indexOf('\t'));
      let group = closed.get(origin);
      if (group === undefined) {
        group = { site: state.site, own: state.own, lines: [] };
        closed.set(origin, group);
      }
      const [, ship, cargo] = key.split('\t');
      const ns = `${interval.start}000000`;
      const values = [interval.min, interval.max, interval.sum / interval.count, interval.last, interval.count];
      for (let f = 0; f < SUMMARY_FIELDS.length; f++) {
        group.lines.push(`${ns === '0000000' ? '0' : ns}\t${ship}\t${cargo}:${SUMMARY_FIELDS[f]}\t${formatValue(values[f]!)}`);
      }
      counts.summaries += SUMMARY_FIELDS.length;
    };
    const flush = (after: QueueRecord): void => {
      for (const group of closed.values()) {
        const payload = group.lines.join('\n');
        const record: QueueRecord = {
          segment: after.segment,
          id: after.id,
          receivedMs: after.receivedMs,
          readings: group.lines.length,
          bytes: Buffer.byteLength(payload),
          payload,
        };
        if (group.site !== undefined) record.site = group.site;
        if (group.own !== undefined) record.ownSite = group.own;
        out.push(record);
      }
      closed.clear();
    };

    for (const record of records) {
      if (record.sink === this.#sinkName) {
        out.push(record);
        continue;
      }
      const book = this.#bookAt({ segment: record.segment, lastId: record.id });
      if (record.receivedMs >= this.#nextIdleMs) this.#closeIdle(record.receivedMs, emit);
      const origin = originKey(record);
      const kept: string[] = [];
      let all = true;
      try {
        scanRecord(record.payload, (text, time, tab1, tab2, tab3, value, end) => {
          const cargo = text.slice(tab2 + 1, tab3);
          const rule = book.ruleFor(cargo);
          const line = text.slice(time, end);
          const key = `${origin}\t${text.slice(tab1 + 1, tab2)}\t${cargo}`;
          const before = this.#state.get(key);
          if (rule === undefined) {
            if (before !== undefined) this.#retire(key, before, emit);
            kept.push(line);
            return;
          }
          const timeNs = text.slice(time, tab1);
          const forwarded = isSummaryRule(rule)
            ? this.#gather(key, before, rule.summaryMs, rule.latenessMs, record, timeNs, value, emit, counts)
            : this.#deadband(key, before, rule.deadband, rule.maxIntervalMs, timeNs, value, emit);
          if (forwarded) kept.push(line);
          else {
            all = false;
            counts.thinned += 1;
          }
        });
      } catch (error) {
        if (!(error instanceof RecordCorruptError)) throw error;
        out.push(record);
        continue;
      }
      if (all) out.push(record);
      else if (kept.length > 0) {
        const payload = kept.join('\n');
        out.push({ ...record, readings: kept.length, bytes: Buffer.byteLength(payload), payload });
      }
      flush(record);
    }
    const last = records.at(-1);
    if (endOfBacklog && last !== undefined) {
      for (const key of [...this.#openSeries].sort()) {
        const state = this.#state.get(key);
        if (state?.k === 's') this.#closeBefore(key, state, Number.POSITIVE_INFINITY, emit);
      }
      flush(last);
    }
    return { records: out, ...counts };
  }

  /** The series the batch changed, as they are now (undefined: removed), without committing them. */
  changes(): Map<string, SeriesState | undefined> {
    const changes = new Map<string, SeriesState | undefined>();
    for (const key of this.#undo.keys()) changes.set(key, this.#state.get(key));
    return changes;
  }

  /** Forgets the states as they were before the batch: they are now the sink's. Returns the series changed, undefined for one removed. */
  commit(): Map<string, SeriesState | undefined> {
    const changes = this.changes();
    this.#undo = new Map();
    return changes;
  }

  /** The batch was not delivered: every series as it was at the last commit. */
  rollback(): void {
    for (const [key, state] of this.#undo) {
      if (state === undefined) this.#state.delete(key);
      else this.#state.set(key, state);
      this.#openSeries.delete(key);
      if (state !== undefined) this.#noteOpen(key, state);
    }
    this.#undo = new Map();
  }

  #bookAt(position: Progress): RuleBook {
    const versions = this.#versions;
    for (let v = versions.length - 1; v > 0; v--) {
      const from = versions[v]!.from;
      if (from === undefined || compareMarks(position, from) > 0) return versions[v]!.book;
    }
    return versions[0]!.book;
  }

  /** A series' state, made its own for this batch (the one before kept for a rollback). */
  #own<T extends SeriesState>(key: string, state: T | undefined): T | undefined {
    if (!this.#undo.has(key)) {
      this.#undo.set(key, state);
      if (state === undefined) return undefined;
      const copy = state.k === 's' ? { ...state, open: state.open.map((i) => ({ ...i })) } : { ...state };
      this.#state.set(key, copy);
      return copy as T;
    }
    return state;
  }

  #set(key: string, state: SeriesState | undefined): void {
    if (!this.#undo.has(key)) this.#undo.set(key, this.#state.get(key));
    if (state === undefined) this.#state.delete(key);
    else this.#state.set(key, state);
  }

  #noteOpen(key: string, state: SeriesState): void {
    if (state.k !== 's' || state.open.length === 0) {
      this.#openSeries.delete(key);
      return;
    }
    this.#openSeries.add(key);
    this.#nextIdleMs = Math.min(this.#nextIdleMs, state.recv + state.i + state.l);
  }

  /** A series no rule covers any more: its open intervals are sent and its state let go. */
  #retire(key: string, before: SeriesState, emit: (key: string, state: SummaryState, interval: Interval) => void): void {
    if (before.k === 's') {
      const state = this.#own(key, before)!;
      this.#closeBefore(key, state, Number.POSITIVE_INFINITY, emit);
    }
    this.#set(key, undefined);
    this.#openSeries.delete(key);
  }

  #deadband(
    key: string,
    before: SeriesState | undefined,
    deadband: number,
    maxIntervalMs: number | undefined,
    timeNs: string,
    value: number,
    emit: (key: string, state: SummaryState, interval: Interval) => void,
  ): boolean {
    if (before?.k === 's') this.#retire(key, before, emit);
    const timeMs = timeMsOf(timeNs);
    const last = before?.k === 'd' ? before : undefined;
    const goes =
      last === undefined ||
      Math.abs(value - last.last) > deadband ||
      (maxIntervalMs !== undefined && timeMs - last.lastMs >= maxIntervalMs);
    if (goes) this.#set(key, { k: 'd', last: value, lastMs: timeMs });
    return goes;
  }

  /** Adds a reading to its series' interval; false: it is not sent as itself. */
  #gather(
    key: string,
    before: SeriesState | undefined,
    i: number,
    l: number,
    record: QueueRecord,
    timeNs: string,
    value: number,
    emit: (key: string, state: SummaryState, interval: Interval) => void,
    counts: { late: number },
  ): false {
    let state: SummaryState;
    if (before?.k === 's' && before.i === i && before.l === l) state = this.#own(key, before)!;
    else {
      let closedUntil = Number.NEGATIVE_INFINITY;
      if (before?.k === 's') {
        const old = this.#own(key, before)!;
        this.#closeBefore(key, old, Number.POSITIVE_INFINITY, emit);
        closedUntil = old.closedUntil;
      }
      state = { k: 's', i, l, closedUntil, recv: record.receivedMs, open: [] };
      if (record.site !== undefined) state.site = record.site;
      if (record.ownSite !== undefined) state.own = record.ownSite;
      this.#set(key, state);
    }
    const timeMs = timeMsOf(timeNs);
    state.recv = record.receivedMs;
    // Intervals that end, with their lateness, at or before this reading are complete.
    this.#closeBefore(key, state, timeMs - l - i + 1, emit);
    const start = Math.floor(timeMs / i) * i;
    if (start < state.closedUntil || !this.#owns(start, i)) {
      counts.late += 1;
      this.#noteOpen(key, state);
      return false;
    }
    const interval = state.open.find((o) => o.start === start);
    if (interval === undefined) {
      if (state.open.length >= MAX_OPEN) this.#closeBefore(key, state, state.open[0]!.start + 1, emit);
      state.open.push({ start, min: value, max: value, sum: value, count: 1, last: value, lastNs: timeNs });
      state.open.sort((a, b) => a.start - b.start);
    } else {
      // -0 below 0 and 0 above -0: the extremes of what was received, bit for bit.
      if (value < interval.min || (value === interval.min && Object.is(value, -0))) interval.min = value;
      if (value > interval.max || (value === interval.max && Object.is(interval.max, -0))) interval.max = value;
      interval.sum += value;
      interval.count += 1;
      if (!laterNs(interval.lastNs, timeNs)) {
        interval.last = value;
        interval.lastNs = timeNs;
      }
    }
    this.#noteOpen(key, state);
    return false;
  }

  /** Whether this stream of a current-first sink owns intervals starting at `start`. */
  #owns(start: number, i: number): boolean {
    const split = this.#split;
    if (split === undefined) return true;
    const boundary = Math.floor(split.splitMs / i) * i;
    return split.role === 'head' ? start >= boundary : start < boundary;
  }

  /** Sends and closes the open intervals that start before `limit`. */
  #closeBefore(
    key: string,
    state: SummaryState,
    limit: number,
    emit: (key: string, state: SummaryState, interval: Interval) => void,
  ): void {
    while (state.open.length > 0 && state.open[0]!.start < limit) {
      const interval = state.open.shift()!;
      emit(key, state, interval);
      state.closedUntil = Math.max(state.closedUntil, interval.start + state.i);
    }
  }

  /** Closes the intervals of series silent since `summaryMs + latenessMs` before `receivedMs`. */
  #closeIdle(receivedMs: number, emit: (key: string, state: SummaryState, interval: Interval) => void): void {
    this.#nextIdleMs = Number.POSITIVE_INFINITY;
    // In the order of their keys: the same after a start, whatever order the series were met in.
    for (const key of [...this.#openSeries].sort()) {
      const before = this.#state.get(key);
      if (before?.k !== 's' || before.open.length === 0) {
        this.#openSeries.delete(key);
        continue;
      }
      if (receivedMs >= before.recv + before.i + before.l) {
        const state = this.#own(key, before)!;
        this.#closeBefore(key, state, Number.POSITIVE_INFINITY, emit);
        this.#openSeries.delete(key);
      } else {
        this.#nextIdleMs = Math.min(this.#nextIdleMs, before.recv + before.i + before.l);
      }
    }
  }
}
