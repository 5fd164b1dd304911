import { BytesCache } from './bytes-cache.js';

/**
 * Each ship's message key and partition hash, made once: a site sends the same few ships over and
 * over, and the client's murmur2 works in BigInt, so hashing every message costs its allocations
 * as well as its arithmetic. `hashOf` is the hash the client's default partitioner takes modulo
 * the topic's partitions (murmur2 of the key, unsigned), so a ship's partition is the same.
 */
export class ShipKeys {
  readonly #hashes = new WeakMap<Buffer, number>();
  readonly #keys: BytesCache;

  constructor(private readonly murmur2: (data: Buffer) => number) {
    this.#keys = new BytesCache((shipId) => {
      const key = Buffer.from(shipId);
      this.#hashes.set(key, murmur2(key) >>> 0);
      return key;
    });
  }

  /** The key of `shipId`'s messages; callers must not write into it, it is shared. */
  keyOf(shipId: string): Buffer {
    return this.#keys.of(shipId);
  }

  /** The partition hash of `key`, kept with the keys made here. */
  hashOf(key: Buffer): number {
    return this.#hashes.get(key) ?? this.murmur2(key) >>> 0;
  }
}
