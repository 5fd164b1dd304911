import { detached } from '../../queue/record-codec.js';

/** More distinct texts than a gateway sees (ship ids, cargo ids, sites); past it a cache starts again, so odd texts cannot grow it for ever. */
const MAX_TEXTS = 10_000;

/** Bytes made once per distinct text: a site sends the same few ids over and over. */
export class BytesCache {
  readonly #bytes = new Map<string, Buffer>();

  constructor(private readonly make: (text: string) => Buffer) {}

  /** The bytes of `text`; callers must not write into them, they are shared. */
  of(text: string): Buffer {
    let bytes = this.#bytes.get(text);
    if (bytes === undefined) {
      if (this.#bytes.size >= MAX_TEXTS) this.#bytes.clear();
      bytes = this.make(text);
      // A slice of a queue record would keep the whole record alive as a key.
      this.#bytes.set(detached(text), bytes);
    }
    return bytes;
  }
}
