/** Spacing of a fresh address's attempts, and of the attempt after its first failure... */
const FIRST_SPACING_MS = 250;
/** ...doubling with each failure up to this. */
const MAX_SPACING_MS = 8_000;
/** An address that failed no login for this long starts afresh. */
const FORGET_AFTER_MS = 15 * 60_000;
/** Addresses remembered; past this the least recently active one is forgotten. */
const MAX_ADDRESSES = 1000;

interface Attempts {
  failures: number;
  lastMs: number;
  /** When the address's next attempt may be checked. */
  nextMs: number;
}

/**
 * Slows down password guessing per client address without ever refusing the right password: each
 * attempt waits for its turn, the turns of an address are spaced further apart with every failure,
 * and concurrent attempts queue behind each other instead of being checked side by side. The right
 * password is still accepted when its turn comes, and a success clears the address.
 */
export class LoginThrottle {
  readonly #addresses = new Map<string, Attempts>();

  constructor(private readonly now: () => number = Date.now) {}

  /** Takes the address's next turn; returns how long to wait for it before checking the password. */
  reserve(address: string): number {
    const now = this.now();
    let attempts = this.#addresses.get(address);
    if (attempts !== undefined) this.#addresses.delete(address);
    if (attempts === undefined || now - attempts.lastMs > FORGET_AFTER_MS) attempts = { failures: 0, lastMs: now, nextMs: now };
    const turn = Math.max(now, attempts.nextMs);
    attempts.nextMs = turn + spacing(attempts.failures);
    attempts.lastMs = now;
    this.#addresses.set(address, attempts);
    if (this.#addresses.size > MAX_ADDRESSES) this.#addresses.delete(this.#addresses.keys().next().value!);
    return turn - now;
  }

  failed(address: string): void {
    const attempts = this.#addresses.get(address);
    if (attempts === undefined) return;
    attempts.failures += 1;
    attempts.lastMs = this.now();
    attempts.nextMs = Math.max(attempts.nextMs, attempts.lastMs + spacing(attempts.failures));
  }

  succeeded(address: string): void {
    this.#addresses.delete(address);
  }
}

const spacing = (failures: number): number => Math.min(MAX_SPACING_MS, FIRST_SPACING_MS * 2 ** Math.min(failures, 20));
