import { detached, idEndAt, textHash } from '../../queue/record-codec.js';
import { LatestValues } from './latest-values.js';
import { MinuteCounts } from './minute-counts.js';

/** Ships remembered. A site has tens to hundreds; past this, only ships nobody misses make room (see ShipTable). */
export const MAX_SHIPS = 1000;
/** A ship with readings this recent is live for the table: no new ship pushes it out. */
export const RECENT_MS = 60 * 60_000;
/** Ships set aside at once to make room, so a run of new ship ids costs one sort per this many, not a scan each. */
const ROOM_BATCH = Math.ceil(MAX_SHIPS / 8);
/** While no ship may make room, new ones are left out without a look until this long has passed (the catalogue may change). */
const NO_ROOM_RECHECK_MS = 60_000;
/** Ship ids left out that the page names, the latest first. */
const LEFT_OUT_NAMED = 5;
/** Cargo ids whose last value is kept per ship. */
export const MAX_CARGOS = 16;
/** A ship is stale once silent for three of its usual gaps, and never sooner than this. */
const STALE_AFTER_MIN_MS = 5 * 60_000;
/** Requests closer together than this are one burst (a GPS pair sent as two readings), not a gap. */
export const BURST_MS = 1000;
/** Accepted requests wait at most this long before they are folded into the table, when nothing reads it sooner. */
export const FOLD_AFTER_MS = 1000;
/**
 * Readings waiting past this are folded at once: the wait keeps their records alive, and a young
 * record kept past the next minor garbage collection is copied, so the wait stays far below what one fills.
 */
export const FOLD_AFTER_READINGS = 4096;
/** Requests waiting past this are folded at once (single pushes: a few dozen milliseconds' worth at full speed). */
export const FOLD_AFTER_REQUESTS = 1024;
/** Slots of the look-up of ships by the hash of their id's text: a power of two, MAX_SHIPS or more. */
const LOOK_UP_SLOTS = 1024;
const slotOf = (hash: number): number => hash & (LOOK_UP_SLOTS - 1);

interface ShipEntry {
  /** The ship id, as the table's map keeps it, and its textHash. */
  readonly id: string;
  readonly hash: number;
  key: string;
  lastSeenMs: number;
  /** Smoothed gap between the ship's bursts of readings; undefined until it has sent twice. */
  gapMs: number | undefined;
  readonly minutes: MinuteCounts;
  readonly values: LatestValues;
  /**
   * The ship whose line came after this one's the last time another followed it in a request. It
   * may keep a ship let go from the garbage collector until this one is followed again: at most
   * one such ship per listed ship.
   */
  after: ShipEntry | undefined;
  /** False once let go: an `after` may still point to it. */
  listed: boolean;
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

/** What the table holds and what it left out to stay bounded. */
export interface ShipTableFacts {
  /** Ships listed now. */
  ships: number;
  /** Since when the table has been keeping ships (across restarts, as far as its file goes back). */
  sinceMs: number;
  /** When this process started counting readings per ship: "readings in the last hour" covers no more. */
  countingSinceMs: number;
  /** Ships the table let go to make room: silent for over RECENT_MS and not in the catalogue. */
  forgotten: number;
  /** Readings of ships not listed because every listed ship was live or in the catalogue. */
  leftOutReadings: number;
  /** The latest ship ids left out, the latest first (at most LEFT_OUT_NAMED). */
  leftOutShips: string[];
}

/** A ship as the table's file keeps it (ship-file.ts): all but its readings per minute. */
export interface SavedShip {
  id: string;
  key: string;
  lastSeenMs: number;
  gapMs?: number | undefined;
  values: [cargoId: string, value: number][];
}

export interface SavedShips {
  sinceMs: number;
  forgotten: number;
  leftOutReadings: number;
  leftOutShips: string[];
  ships: SavedShip[];
}

export interface ShipTableOptions {
  /** Whether the site's catalogue names this ship: such a ship is never let go for a ship it does not name. */
  known?: (shipId: string) => boolean;
  /** What the table's file kept from before a restart. */
  saved?: SavedShips | undefined;
  now?: number;
}

/**
 * Every ship the gateway accepted readings from: which key it used, when it was last seen, how
 * many readings it sent in the last hour and its latest values. Bounded in ships and in cargo ids
 * per ship, and fed with the queue records ingest committed.
 *
 * Once full, a new ship takes the place of one silent for over RECENT_MS that the catalogue does not
 * name (the least recently seen first); a ship the catalogue names may also take the place of a live
 * one it does not. Otherwise the new ship is left out, and counted: no one with a device key can push
 * live or catalogued ships off the table with made-up ids, and the page says what it did not list.
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
  readonly #known: (shipId: string) => boolean;
  readonly #sinceMs: number;
  readonly #countingSinceMs: number;
  #forgotten = 0;
  #leftOutReadings = 0;
  readonly #leftOutShips: string[] = [];
  /** Ships set aside to make room, least recently seen last; each is checked again when its turn comes. */
  #room: string[] = [];
  /** No listed ship may make room for an unknown one before this time. */
  #noRoomUntil = 0;
  /** Whether anything changed since the table was last saved. */
  #changed = false;
  // The requests waiting to be folded, in fixed arrays reused from fold to fold.
  readonly #keys = new Array<string>(FOLD_AFTER_REQUESTS).fill('');
  readonly #records = new Array<string>(FOLD_AFTER_REQUESTS).fill('');
  readonly #values = new Array<Float64Array | undefined>(FOLD_AFTER_REQUESTS).fill(undefined);
  readonly #times = new Float64Array(FOLD_AFTER_REQUESTS);
  #requests = 0;
  #readings = 0;
  #timer: NodeJS.Timeout | undefined;
  /**
   * The ship last found in each slot, by its id's textHash: a record's line finds its ship here by
   * comparing the id in place, with no string made and no map look-up; a miss goes to the map. A
   * ship let go leaves its slot, so a slot holds only listed ships.
   */
  readonly #lookUp = new Array<ShipEntry | undefined>(LOOK_UP_SLOTS).fill(undefined);

  constructor(options: ShipTableOptions = {}) {
    const now = options.now ?? Date.now();
    this.#known = options.known ?? (() => false);
    this.#countingSinceMs = now;
    const saved = options.saved;
    this.#sinceMs = saved === undefined ? now : Math.min(saved.sinceMs, now);
    if (saved === undefined) return;
    this.#forgotten = saved.forgotten;
    this.#leftOutReadings = saved.leftOutReadings;
    this.#leftOutShips.push(...saved.leftOutShips.slice(0, LEFT_OUT_NAMED));
    // The most recently seen first, so a file from a larger table keeps the ships that matter.
    const ships = [...saved.ships].sort((a, b) => b.lastSeenMs - a.lastSeenMs);
    for (const ship of ships.slice(0, MAX_SHIPS)) {
      if (this.#ships.has(ship.id)) continue;
      this.#ships.set(ship.id, {
        id: ship.id,
        hash: textHash(ship.id, 0, ship.id.length),
        key: ship.key,
        lastSeenMs: ship.lastSeenMs,
        gapMs: ship.gapMs,
        minutes: new MinuteCounts(),
        values: LatestValues.of(MAX_CARGOS, new Map(ship.values.slice(-MAX_CARGOS))),
        after: undefined,
        listed: true,
      });
    }
    this.#forgotten += Math.max(0, ships.length - MAX_SHIPS);
  }

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

  facts(): ShipTableFacts {
    this.#fold();
    return {
      ships: this.#ships.size,
      sinceMs: this.#sinceMs,
      countingSinceMs: this.#countingSinceMs,
      forgotten: this.#forgotten,
      leftOutReadings: this.#leftOutReadings,
      leftOutShips: [...this.#leftOutShips],
    };
  }

  /** The ships, most recently seen first. */
  list(now: number): ShipView[] {
    this.#fold();
    return [...this.#ships]
      .map(([shipId, e]) => view(shipId, e, now))
      .sort((a, b) => b.lastSeenMs - a.lastSeenMs || (a.shipId < b.shipId ? -1 : 1));
  }

  /** One ship, or undefined when the table does not list it. */
  get(shipId: string, now: number): ShipView | undefined {
    this.#fold();
    const entry = this.#ships.get(shipId);
    return entry === undefined ? undefined : view(shipId, entry, now);
  }

  /** What the table's file keeps, when anything changed since the last call; undefined otherwise. */
  takeChanges(): SavedShips | undefined {
    this.#fold();
    if (!this.#changed) return undefined;
    this.#changed = false;
    return {
      sinceMs: this.#sinceMs,
      forgotten: this.#forgotten,
      leftOutReadings: this.#leftOutReadings,
      leftOutShips: [...this.#leftOutShips],
      ships: [...this.#ships].map(([id, e]) => ({
        id,
        key: e.key,
        lastSeenMs: e.lastSeenMs,
        ...(e.gapMs === undefined ? {} : { gapMs: e.gapMs }),
        values: e.values.pairs(),
      })),
    };
  }

  /** Folds the waiting requests into the table, oldest first. */
  #fold(): void {
    if (this.#timer !== undefined) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
    if (this.#requests > 0) this.#changed = true;
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

  /**
   * One request's record: a look-up per run of lines of one ship, by the id's text in place (the
   * map only when the ship is not in its slot), and one per line for its cargo id, in place too.
   * The lines are walked here, not through a visitor: each id is compared with the one expected
   * as its field is read, which finds the field's end too.
   */
  #add(key: string, record: string, lineValues: Float64Array | undefined, now: number): void {
    // undefined: no run yet; null: the run's ship is left out.
    let entry: ShipEntry | null | undefined;
    let ship = '';
    let run = 0;
    let line = 0;
    const length = record.length;
    let start = 0;
    while (start < length) {
      const shipStart = record.indexOf('\t', start) + 1;
      // A batch is mostly runs of one ship, or its ships in the same order each time: a line's
      // id is compared with the run's, then with the ship that came after the run's last time.
      let tab2 = entry === undefined ? -1 : idEndAt(ship, record, shipStart);
      if (tab2 === -1 || entry === undefined) {
        const previous = entry;
        if (previous !== undefined) this.#endRun(previous, ship, key, run, now);
        const after = previous?.after;
        tab2 = after?.listed === true ? idEndAt(after.id, record, shipStart) : -1;
        if (after !== undefined && tab2 !== -1) entry = after;
        else {
          tab2 = record.indexOf('\t', shipStart);
          entry = this.#lookedUp(record, shipStart, tab2, key, now);
          if (previous !== undefined && previous !== null) previous.after = entry ?? undefined;
        }
        if (entry !== null) ship = entry.id;
        else ship = record.slice(shipStart, tab2);
        run = 0;
      }
      run += 1;
      // Values handed beside the record are taken as they are; otherwise each is read from it.
      let tab3: number;
      if (entry !== null && lineValues !== undefined) tab3 = entry.values.setAt(record, tab2 + 1, lineValues[line]!);
      else tab3 = record.indexOf('\t', tab2 + 1);
      const end = lineEnd(record, tab3);
      if (entry !== null && lineValues === undefined) entry.values.setAt(record, tab2 + 1, Number(record.slice(tab3 + 1, end)));
      line += 1;
      start = end + 1;
    }
    if (entry !== undefined) this.#endRun(entry, ship, key, run, now);
  }

  /** The ship whose id is written in `text` between `start` and `end`, listed now if there is room; null when it is left out. */
  #lookedUp(text: string, start: number, end: number, key: string, now: number): ShipEntry | null {
    const hash = textHash(text, start, end);
    const found = this.#found(text, start, end, hash);
    if (found !== undefined) return found;
    const entry = this.#entry(text.slice(start, end), hash, key, now);
    if (entry !== null) this.#lookUp[slotOf(hash)] = entry;
    return entry;
  }

  /** The listed ship whose id is written in `text` between `start` and `end`, when it is in its slot of the look-up. */
  #found(text: string, start: number, end: number, hash: number): ShipEntry | undefined {
    const entry = this.#lookUp[slotOf(hash)];
    return entry !== undefined && entry.hash === hash && idEndAt(entry.id, text, start) === end ? entry : undefined;
  }

  #endRun(entry: ShipEntry | null, ship: string, key: string, readings: number, now: number): void {
    if (entry !== null) touch(entry, key, readings, now);
    else this.#leftOut(ship, readings);
  }

  /** The ship's entry (`hash`: its id's textHash), made when there is room; null when the ship is left out. */
  #entry(shipId: string, hash: number, key: string, now: number): ShipEntry | null {
    const known = this.#ships.get(shipId);
    if (known !== undefined) return known;
    if (this.#ships.size >= MAX_SHIPS && !this.#makeRoom(shipId, now)) return null;
    const id = detached(shipId);
    const entry: ShipEntry = {
      id,
      hash,
      key,
      lastSeenMs: now,
      gapMs: undefined,
      minutes: new MinuteCounts(),
      values: new LatestValues(MAX_CARGOS),
      after: undefined,
      listed: true,
    };
    this.#ships.set(id, entry);
    return entry;
  }

  /** Lets one ship go for `shipId`; false when none may go for it. */
  #makeRoom(shipId: string, now: number): boolean {
    for (;;) {
      const candidate = this.#room.pop();
      if (candidate === undefined) break;
      const entry = this.#ships.get(candidate);
      // Seen again, or named by the catalogue since it was set aside: it stays.
      if (entry === undefined || now - entry.lastSeenMs <= RECENT_MS || this.#known(candidate)) continue;
      this.#forget(candidate);
      return true;
    }
    if (now >= this.#noRoomUntil && this.#setAsideSilent(now)) return this.#makeRoom(shipId, now);
    // A ship the catalogue names outranks a live one it does not, and any silent one.
    if (!this.#known(shipId)) return false;
    return this.#forgetLeastRecent((id, entry) => !this.#known(id) || now - entry.lastSeenMs > RECENT_MS);
  }

  /**
   * Sets aside the least recently seen ships that are silent and not in the catalogue, up to
   * ROOM_BATCH; when there are none, no look is taken again until one of the others falls silent.
   */
  #setAsideSilent(now: number): boolean {
    const silent: [string, number][] = [];
    let nextSilentMs = now + NO_ROOM_RECHECK_MS;
    for (const [id, entry] of this.#ships) {
      if (this.#known(id)) continue;
      if (now - entry.lastSeenMs > RECENT_MS) silent.push([id, entry.lastSeenMs]);
      else nextSilentMs = Math.min(nextSilentMs, entry.lastSeenMs + RECENT_MS + 1);
    }
    if (silent.length === 0) {
      this.#noRoomUntil = nextSilentMs;
      return false;
    }
    // Most recently seen first: the list is taken from its end.
    this.#room = silent
      .sort((a, b) => b[1] - a[1])
      .slice(-ROOM_BATCH)
      .map(([id]) => id);
    return true;
  }

  /** Forgets the least recently seen ship that `may` allows; false when there is none. */
  #forgetLeastRecent(may: (shipId: string, entry: ShipEntry) => boolean): boolean {
    let oldest: string | undefined;
    let oldestMs = Number.POSITIVE_INFINITY;
    for (const [id, entry] of this.#ships) {
      if (entry.lastSeenMs < oldestMs && may(id, entry)) {
        oldest = id;
        oldestMs = entry.lastSeenMs;
      }
    }
    if (oldest === undefined) return false;
    this.#forget(oldest);
    return true;
  }

  #forget(shipId: string): void {
    const entry = this.#ships.get(shipId);
    if (entry === undefined) return;
    if (this.#lookUp[slotOf(entry.hash)] === entry) this.#lookUp[slotOf(entry.hash)] = undefined;
    entry.listed = false;
    entry.after = undefined;
    this.#ships.delete(shipId);
    this.#forgotten += 1;
  }

  #leftOut(shipId: string, readings: number): void {
    this.#leftOutReadings += readings;
    const named = this.#leftOutShips;
    if (named[0] === shipId) return;
    const at = named.indexOf(shipId);
    if (at !== -1) named.splice(at, 1);
    named.unshift(detached(shipId));
    if (named.length > LEFT_OUT_NAMED) named.pop();
  }
}

function view(shipId: string, e: ShipEntry, now: number): ShipView {
  return {
    shipId,
    key: e.key,
    lastSeenMs: e.lastSeenMs,
    stale: now - e.lastSeenMs > Math.max(STALE_AFTER_MIN_MS, 3 * (e.gapMs ?? 0)),
    readingsLastHour: e.minutes.total(now),
    lastValues: e.values.pairs().map(([cargoId, value]) => ({ cargoId, value })),
  };
}

function touch(entry: ShipEntry, key: string, readings: number, now: number): void {
  const gap = now - entry.lastSeenMs;
  if (gap >= BURST_MS) entry.gapMs = entry.gapMs === undefined ? gap : entry.gapMs * 0.8 + gap * 0.2;
  entry.lastSeenMs = now;
  entry.key = key;
  entry.minutes.add(readings, now);
}

/** Where the line whose value starts after `tab3` ends: its newline, or the record's end. */
function lineEnd(record: string, tab3: number): number {
  const end = record.indexOf('\n', tab3 + 1);
  return end === -1 ? record.length : end;
}
