import { hostOf } from '../../address-host.js';
import { isLoopback } from '../request-facts.js';

/** Spacing of a fresh host's attempts, and of the attempt after its first failure... */
const FIRST_SPACING_MS = 250;
/** ...doubling with each failure up to this. */
const MAX_SPACING_MS = 8_000;
/** A host that failed no login for this long starts afresh. */
const FORGET_AFTER_MS = 15 * 60_000;
/** Hosts remembered; past this the least recently active one is forgotten (the bound on everyone still holds). */
const MAX_HOSTS = 1000;
const MINUTE_MS = 60_000;

interface Attempts {
  failures: number;
  lastMs: number;
  /** When the host's next attempt may be checked. */
  nextMs: number;
}

/** Whether a login attempt may have its password checked now, and if not, for how long it must wait and why. */
export type LoginTurn = { allowed: true } | { allowed: false; retryAfterMs: number; reason: 'host' | 'everyone' };

/**
 * Bounds password guessing without holding any request open: an attempt that comes before its turn
 * is refused at once with the time to wait. Two bounds, checked in this order:
 *
 * - per host (`hostOf`: an IPv4 address, an IPv6 /64): a fresh host's attempts are 250 ms apart, and
 *   each failure doubles the spacing up to 8 s; a success clears the host;
 * - everyone together: at most `perMinute` attempts are checked in any 60 s, whatever their source,
 *   so many hosts (a /48 of IPv6 is 65,536 of them) guess no faster than one. Loopback does not
 *   count against it, so the machine's own user can log in while the network floods the login.
 *
 * Device traffic never comes here.
 */
export class LoginThrottle {
  readonly #hosts = new Map<string, Attempts>();
  /** Times of the checked attempts in the last minute (loopback's aside), oldest first; a ring of `perMinute`. */
  readonly #recent: number[];
  #oldest = 0;
  #count = 0;

  constructor(
    readonly perMinute: number,
    private readonly now: () => number = Date.now,
  ) {
    this.#recent = new Array<number>(perMinute).fill(0);
  }

  /** Takes a turn for an attempt from `address`, or says why there is none now. */
  take(address: string): LoginTurn {
    const now = this.now();
    const host = hostOf(address);
    let attempts = this.#hosts.get(host);
    if (attempts !== undefined && now - attempts.lastMs > FORGET_AFTER_MS) attempts = undefined;
    if (attempts !== undefined && now < attempts.nextMs) return { allowed: false, retryAfterMs: attempts.nextMs - now, reason: 'host' };
    const local = isLoopback(address);
    if (!local) {
      this.#expire(now);
      if (this.#count >= this.perMinute) {
        return { allowed: false, retryAfterMs: this.#recent[this.#oldest]! + MINUTE_MS - now, reason: 'everyone' };
      }
      this.#recent[(this.#oldest + this.#count) % this.perMinute] = now;
      this.#count += 1;
    }
    attempts ??= { failures: 0, lastMs: now, nextMs: now };
    attempts.lastMs = now;
    attempts.nextMs = now + spacing(attempts.failures);
    // Re-inserting keeps the map in order of last activity, so the first entry is the one to forget.
    this.#hosts.delete(host);
    this.#hosts.set(host, attempts);
    if (this.#hosts.size > MAX_HOSTS) this.#hosts.delete(this.#hosts.keys().next().value!);
    return { allowed: true };
  }

  failed(address: string): void {
    const attempts = this.#hosts.get(hostOf(address));
    if (attempts === undefined) return;
    attempts.failures += 1;
    attempts.lastMs = this.now();
    attempts.nextMs = Math.max(attempts.nextMs, attempts.lastMs + spacing(attempts.failures));
  }

  succeeded(address: string): void {
    this.#hosts.delete(hostOf(address));
  }

  #expire(now: number): void {
    while (this.#count > 0 && this.#recent[this.#oldest]! <= now - MINUTE_MS) {
      this.#oldest = (this.#oldest + 1) % this.perMinute;
      this.#count -= 1;
    }
  }
}

const spacing = (failures: number): number => Math.min(MAX_SPACING_MS, FIRST_SPACING_MS * 2 ** Math.min(failures, 20));
