import { detached, textHash } from '../../queue/record-codec.js';

/**
 * A ship's latest value of each cargo id, at most `max` ids in the order they came: a new id past
 * the bound pushes the oldest out, and a known id keeps its place (a Map's insertion order). An id
 * is found by its text where it stands in a queue record, with its hash (`textHash`), so a line
 * whose cargo id is known costs no string and no map look-up.
 */
export class LatestValues {
  readonly #ids: string[] = [];
  readonly #hashes: Int32Array;
  readonly #values: Float64Array;

  constructor(readonly max: number) {
    this.#hashes = new Int32Array(max);
    this.#values = new Float64Array(max);
  }

  /** The values of `pairs` (each id once), the last `max` of them. */
  static of(max: number, pairs: Iterable<readonly [string, number]>): LatestValues {
    const values = new LatestValues(max);
    for (const [id, value] of pairs) values.setAt(id, 0, id.length, textHash(id, 0, id.length), value);
    return values;
  }

  /** Sets the value of the id written in `text` between `start` and `end`, whose textHash is `hash`. */
  setAt(text: string, start: number, end: number, hash: number, value: number): void {
    const ids = this.#ids;
    const length = end - start;
    for (let i = 0; i < ids.length; i++) {
      if (this.#hashes[i] !== hash) continue;
      const id = ids[i]!;
      if (id.length === length && text.startsWith(id, start)) {
        this.#values[i] = value;
        return;
      }
    }
    if (ids.length === this.max) {
      ids.shift();
      this.#hashes.copyWithin(0, 1);
      this.#values.copyWithin(0, 1);
    }
    // Kept past the record: a string of its own, not a view into the record.
    this.#hashes[ids.length] = hash;
    this.#values[ids.length] = value;
    ids.push(detached(text.slice(start, end)));
  }

  /** Each id with its latest value, the oldest id first. */
  pairs(): [string, number][] {
    return this.#ids.map((id, i) => [id, this.#values[i]!]);
  }
}
