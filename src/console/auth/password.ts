import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * The console password, held as an HMAC under a key made at start, and compared in constant time.
 * A slow hash would guard a stored hash against cracking; there is none here (the password comes
 * from the operator's file), and a cheap check keeps login attempts from loading the board.
 */
export class ConsolePassword {
  readonly #key = randomBytes(32);
  readonly #digest: Buffer | undefined;

  constructor(password: string | undefined) {
    this.#digest = password === undefined ? undefined : this.#mac(password);
  }

  /** False while no password is set: then nobody can log in. */
  get configured(): boolean {
    return this.#digest !== undefined;
  }

  matches(given: string): boolean {
    return this.#digest !== undefined && timingSafeEqual(this.#digest, this.#mac(given));
  }

  #mac(text: string): Buffer {
    return createHmac('sha256', this.#key).update(text, 'utf8').digest();
  }
}
