import { detached, scanEncodedRecord } from '../../queue/record-codec.js';
import { MinuteCounts } from './minute-counts.js';

/** Ships remembered; past this the least recently seen eighth is forgotten. A site has tens to hundreds. */
export const MAX_SHIPS = 1000;
/** Cargo ids whose last value is kept per ship. */
export const MAX_CARGOS = 16;
/** A ship is stale once silent for three of its usual gaps, and never sooner than this. */
const STALE_AFTER_MIN_MS = 5 * 60_000;
/** Requests closer together than this are one burst (a GPS pair sent as two readings), not a gap. */
const BURST_MS = 1000;
/** Accepted requests wait at most this long before they are folded into the table, when nothing reads it sooner. */
export const FOLD_AFTER_MS = 1000;
/**
 * Readings waiting past this are folded at once: the wait keeps their records alive, and a young
 * record kept past the next minor garbage collection is copied, so the wait stays far below what one fills.
 */
export const FOLD_AFTER_READINGS = 4096;
/** Requests waiting past this are folded at once (single pushes: a few dozen milliseconds' worth at full speed). */
export const FOLD_AFTER_REQUESTS = 1024;

interface ShipEntry {
  key: string;
  lastSeenMs: number;
  /** Smoothed gap between the ship's bursts of readings; undefined until it has sent twice. */
  gapMs: number | undefined;
  readonly minutes: MinuteCounts;
  readonly values: Map<string, number>;
}

export interface ShipView {
  shipId: string;
  /** The key its latest readings came with. */
  key: string;
  lastSeenMs: number;
  stale: boolean;
  readingsLastHour: number;
  /** The latest value of each cargo id, up to MAX_CARGOS. */
  lastValues: { cargoId: string; value: number }[];
}

/**
 * Every ship the gateway accepted readings from since it started: which key it used, when it was
 * last seen, how many readings it sent in the last hour and its latest values. Bounded in ships and
 * in cargo ids per ship, and fed with the queue records ingest committed.
 *
 * An accepted request only notes its record (three appends); records are folded into the table in
 * the order they came, with the time each request came at, before anything reads the table, after
 * FOLD_AFTER_MS, or once FOLD_AFTER_READINGS wait. So the table reads as if each request had been
 * recorded at once, and the request path pays for no map look-up. A record is one flat string: a
 * request's parsed readings can be let go before its commit, and what waits here costs a minor
 * garbage collection one copy, not thousands of small objects.
 */
export class ShipTable {
  readonly #ships = new Map<string, ShipEntry>();
  // The requests waiting to be folded, in fixed arrays reused from fold to fold.
  readonly #keys = new Array<string>(FOLD_AFTER_REQUESTS).fill('');
  readonly #records = new Array<string>(FOLD_AFTER_REQUESTS).fill('');
  readonly #values = new Array<Float64Array | undefined>(FOLD_AFTER_REQUESTS).fill(undefined);
  readonly #times = new Float64Array(FOLD_AFTER_REQUESTS);
  #requests = 0;
  #readings = 0;
  #timer: NodeJS.Timeout | undefined;

  /**
   * `record` is a queue record (record-codec.ts) of `readings` readings, committed for `key`;
   * `values`, when given, are its lines' values in order, so the fold need not parse them back.
   */
  record(key: string, record: string, readings: number, now: number, values?: Float64Array): void {
    const i = this.#requests++;
    this.#keys[i] = key;
    this.#records[i] = record;
    this.#values[i] = values;
    this.#times[i] = now;
    this.#readings += readings;
    if (this.#requests === FOLD_AFTER_REQUESTS || this.#readings >= FOLD_AFTER_READINGS) this.#fold();
    else this.#timer ??= setTimeout(() => this.#fold(), FOLD_AFTER_MS).unref();
  }

  get size(): number {
    this.#fold();
    return this.#ships.size;
  }

  /** The ships, most recently seen first. */
  list(now: number): ShipView[] {
    this.#fold();
    return [...this.#ships]
      .map(([shipId, e]) => ({
        shipId,
        key: e.key,
        lastSeenMs: e.lastSeenMs,
        stale: now - e.lastSeenMs > Math.max(STALE_AFTER_MIN_MS, 3 * (e.gapMs ?? 0)),
        readingsLastHour: e.minutes.total(now),
        lastValues: [...e.values].map(([cargoId, value]) => ({ cargoId, value })),
      }))
      .sort((a, b) => b.lastSeenMs - a.lastSeenMs || (a.shipId < b.shipId ? -1 : 1));
  }

  /** Folds the waiting requests into the table, oldest first. */
  #fold(): void {
    if (this.#timer !== undefined) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
    const records = this.#records;
    const values = this.#values;
    for (let i = 0; i < this.#requests; i++) {
      this.#add(this.#keys[i]!, records[i]!, values[i], this.#times[i]!);
      records[i] = '';
      values[i] = undefined;
    }
    this.#requests = 0;
    this.#readings = 0;
  }

  /** One request's record: one look-up per run of lines of one ship, one per line for its value. */
  #add(key: string, record: string, lineValues: Float64Array | undefined, now: number): void {
    let entry: ShipEntry | undefined;
    let ship = '';
    let run = 0;
    let line = 0;
    scanEncodedRecord(record, (text, tab1, tab2, tab3, end) => {
      // The ship id is compared in place: a batch is mostly runs of one ship, so most lines slice nothing.
      if (entry === undefined || tab2 - tab1 - 1 !== ship.length || !text.startsWith(ship, tab1 + 1)) {
        if (entry !== undefined) touch(entry, key, run, now);
        ship = text.slice(tab1 + 1, tab2);
        entry = this.#entry(ship, key, now);
        run = 0;
      }
      run += 1;
      const cargoId = text.slice(tab2 + 1, tab3);
      const value = lineValues === undefined ? Number(text.slice(tab3 + 1, end)) : lineValues[line]!;
      line += 1;
      const values = entry.values;
      // A key already there stays as it was first set, so only a new one needs to be a copy.
      if (values.has(cargoId)) values.set(cargoId, value);
      else {
        if (values.size >= MAX_CARGOS) values.delete(values.keys().next().value!);
        values.set(detached(cargoId), value);
      }
    });
    if (entry !== undefined) touch(entry, key, run, now);
  }

  #entry(shipId: string, key: string, now: number): ShipEntry {
    const known = this.#ships.get(shipId);
    if (known !== undefined) return known;
    if (this.#ships.size >= MAX_SHIPS) this.#forgetOldest();
    const entry: ShipEntry = { key, lastSeenMs: now, gapMs: undefined, minutes: new MinuteCounts(), values: new Map() };
    this.#ships.set(detached(shipId), entry);
    return entry;
  }

  /** Forgets the least recently seen eighth at once, so a flood of new ship ids costs a sort per 125 ships, not a scan per ship. */
  #forgetOldest(): void {
    const oldest = [...this.#ships].sort((a, b) => a[1].lastSeenMs - b[1].lastSeenMs).slice(0, Math.ceil(MAX_SHIPS / 8));
    for (const [shipId] of oldest) this.#ships.delete(shipId);
  }
}

function touch(entry: ShipEntry, key: string, readings: number, now: number): void {
  const gap = now - entry.lastSeenMs;
  if (gap >= BURST_MS) entry.gapMs = entry.gapMs === undefined ? gap : entry.gapMs * 0.8 + gap * 0.2;
  entry.lastSeenMs = now;
  entry.key = key;
  entry.minutes.add(readings, now);
}
