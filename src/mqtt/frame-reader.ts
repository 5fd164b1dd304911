/** Why a byte stream is not MQTT a server can go on reading. */
export type FrameProblem = 'malformed_length' | 'too_large';

export type FrameEvents = {
  /** The fixed header of a packet is complete: its whole size is known before a byte of it is kept. */
  header(size: number): boolean;
  frame(frame: Buffer): void;
  problem(problem: FrameProblem, size: number): void;
};

/**
 * Cuts an MQTT byte stream into whole packets (fixed header, remaining length, rest) before any of
 * it is parsed, so a packet's size is judged from its first five bytes: one announcing more than
 * `maxBytes`, or a remaining length of more than four bytes, is refused without being buffered.
 * `header` may also refuse a packet (return false), e.g. when the bytes it would hold are not free.
 */
export class FrameReader {
  #pending: Buffer[] = [];
  #pendingBytes = 0;
  /** Size of the packet being read, once its fixed header is complete. */
  #size = -1;
  #stopped = false;

  constructor(
    private readonly maxBytes: number,
    private readonly events: FrameEvents,
  ) {}

  /** Bytes held for the packet being read. */
  get buffered(): number {
    return this.#pendingBytes;
  }

  /** True while a packet has begun but is not complete. */
  get midPacket(): boolean {
    return this.#pendingBytes > 0;
  }

  push(chunk: Buffer): void {
    if (this.#stopped) return;
    let data = chunk;
    if (this.#pendingBytes > 0) {
      this.#pending.push(chunk);
      this.#pendingBytes += chunk.length;
      // The middle of a large packet: kept until it is whole, then joined once.
      if (this.#size >= 0 && this.#pendingBytes < this.#size) return;
      data = Buffer.concat(this.#pending, this.#pendingBytes);
      this.#pending = [];
      this.#pendingBytes = 0;
    }
    // The packets whole in `data` are cut from it in place; what follows the last is kept.
    let at = 0;
    while (!this.#stopped) {
      if (this.#size < 0 && !this.#readHeader(data, at)) break;
      if (data.length - at < this.#size) break;
      const end = at + this.#size;
      this.#size = -1;
      this.events.frame(data.subarray(at, end));
      at = end;
      if (at === data.length) return;
    }
    if (this.#stopped) return;
    const rest = at === 0 ? data : data.subarray(at);
    this.#pending = [rest];
    this.#pendingBytes = rest.length;
  }

  /** Nothing more is read: after a problem, or when the connection is closing. */
  stop(): void {
    this.#stopped = true;
    this.#pending = [];
    this.#pendingBytes = 0;
  }

  /** Reads the fixed header of the packet at `at`; false while it is incomplete or when refused. */
  #readHeader(data: Buffer, at: number): boolean {
    let multiplier = 1;
    let remaining = 0;
    // Byte 0 is the packet type and flags; bytes 1..4 the remaining length, 7 bits each.
    for (let i = 1; i <= 4; i++) {
      if (at + i >= data.length) return false;
      const byte = data[at + i]!;
      remaining += (byte & 0x7f) * multiplier;
      multiplier *= 128;
      if ((byte & 0x80) === 0) {
        const size = 1 + i + remaining;
        if (size > this.maxBytes) return this.#refuse('too_large', size);
        if (!this.events.header(size)) {
          this.stop();
          return false;
        }
        this.#size = size;
        return true;
      }
    }
    return this.#refuse('malformed_length', 0);
  }

  #refuse(problem: FrameProblem, size: number): false {
    this.stop();
    this.events.problem(problem, size);
    return false;
  }
}
