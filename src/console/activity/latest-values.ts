import { detached, idEndAt, textHash } from '../../queue/record-codec.js';

/**
 * A ship's latest value of each cargo id, at most `max` ids in the order they came: a new id past
 * the bound pushes the oldest out, and a known id keeps its place (a Map's insertion order). An id
 * is found by its text where it stands in a queue record (the expected one compared in place, any
 * other by its `textHash`), so a line whose cargo id is known costs no string and no map look-up.
 */
export class LatestValues {
  readonly #ids: string[] = [];
  readonly #hashes: Int32Array;
  readonly #values: Float64Array;
  /** Where the last value was set. */
  #last = 0;

  constructor(readonly max: number) {
    this.#hashes = new Int32Array(max);
    this.#values = new Float64Array(max);
  }

  /** The values of `pairs` (each id once), the last `max` of them. */
  static of(max: number, pairs: Iterable<readonly [string, number]>): LatestValues {
    const values = new LatestValues(max);
    // Each id as a record writes it, followed by a tab.
    for (const [id, value] of pairs) values.setAt(`${id}\t`, 0, value);
    return values;
  }

  /**
   * Sets the value of the id written in `text` from `start` up to the next tab, and returns the
   * tab's position.
   */
  setAt(text: string, start: number, value: number): number {
    const ids = this.#ids;
    // A device sends its cargo ids in the same order each time: the id after the last one set,
    // or that one again, is the likely one, and is compared in place without hashing.
    const last = this.#last;
    const next = last + 1 === ids.length ? 0 : last + 1;
    let slot = next;
    let end = idEndAt(ids[next], text, start);
    if (end === -1) {
      slot = last;
      end = idEndAt(ids[last], text, start);
    }
    if (end === -1) {
      end = text.indexOf('\t', start);
      slot = this.#slot(text, start, end);
    }
    this.#values[slot] = value;
    this.#last = slot;
    return end;
  }

  /** The slot of the id written in `text` between `start` and `end`, found by its hash or made. */
  #slot(text: string, start: number, end: number): number {
    const ids = this.#ids;
    const hash = textHash(text, start, end);
    for (let i = 0; i < ids.length; i++) {
      if (this.#hashes[i] === hash && idEndAt(ids[i], text, start) === end) return i;
    }
    if (ids.length === this.max) {
      ids.shift();
      this.#hashes.copyWithin(0, 1);
      this.#values.copyWithin(0, 1);
    }
    // Kept past the record: a string of its own, not a view into the record.
    this.#hashes[ids.length] = hash;
    ids.push(detached(text.slice(start, end)));
    return ids.length - 1;
  }

  /** Each id with its latest value, the oldest id first. */
  pairs(): [string, number][] {
    return this.#ids.map((id, i) => [id, this.#values[i]!]);
  }
}
