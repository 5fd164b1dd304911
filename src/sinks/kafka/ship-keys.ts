import { detached } from '../../queue/record-codec.js';

/** More ship ids than a site has; past it the cache starts again, so odd ids cannot grow it for ever. */
const MAX_SHIPS = 10_000;

/**
 * Each ship's message key and partition hash, made once: a site sends the same few ships over and
 * over, and the client's murmur2 works in BigInt, so hashing every message costs its allocations
 * as well as its arithmetic. `hashOf` is the hash the client's default partitioner takes modulo
 * the topic's partitions (murmur2 of the key, unsigned), so a ship's partition is the same.
 */
export class ShipKeys {
  readonly #keys = new Map<string, Buffer>();
  readonly #hashes = new WeakMap<Buffer, number>();

  constructor(private readonly murmur2: (data: Buffer) => number) {}

  /** The key of `shipId`'s messages; callers must not write into it, it is shared. */
  keyOf(shipId: string): Buffer {
    let key = this.#keys.get(shipId);
    if (key === undefined) {
      if (this.#keys.size >= MAX_SHIPS) this.#keys.clear();
      key = Buffer.from(shipId);
      this.#keys.set(detached(shipId), key);
      this.#hashes.set(key, this.murmur2(key) >>> 0);
    }
    return key;
  }

  /** The partition hash of `key`, kept with the keys made here. */
  hashOf(key: Buffer): number {
    return this.#hashes.get(key) ?? this.murmur2(key) >>> 0;
  }
}
