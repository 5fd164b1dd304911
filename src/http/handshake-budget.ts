import type { Socket } from 'node:net';
import { isLoopbackHost } from '../address-host.js';

export interface HandshakeLimits {
  /** TLS handshakes one host that has not shown a device key may start at once, */
  hostBurst: number;
  /** and after that burst, how many a second. */
  hostPerSecond: number;
  /** Every such host together: at once, */
  allBurst: number;
  /** and a second. */
  allPerSecond: number;
  /** Hosts remembered, as having shown a device key or as spending their budget. */
  maxHosts: number;
  /** How long a host that showed a device key goes unpaced after its last proof. */
  knownForMs: number;
}

/**
 * A full TLS handshake costs the gateway's event loop about 0.9 ms of CPU on the 2-core x64
 * development machine, more on a Pi: the dearest thing a client without a key can make it do.
 * 40 a second is under 4 % of one of its cores. A browser opens up to 6 connections at once.
 */
export const HANDSHAKE_LIMITS: HandshakeLimits = {
  hostBurst: 6,
  hostPerSecond: 2,
  allBurst: 40,
  allPerSecond: 40,
  maxHosts: 4096,
  knownForMs: 24 * 3_600_000,
};

interface Held {
  socket: Socket;
  go: () => void;
  /** Takes the connection out of the line when it closes while waiting. */
  closed: () => void;
}

/** A token bucket: `tokens` at `atMs`, filling at a rate up to a burst. */
interface Bucket {
  tokens: number;
  atMs: number;
}

/** A host's bucket, and its connections waiting for a turn. */
interface Host extends Bucket {
  held: Held[];
}

/** Hosts past `maxHosts` share one budget: more addresses buy an attacker no more handshakes. */
const OVERFLOW = '*';

/**
 * Paces the TLS handshakes of hosts that have not shown a device key: each such host may start
 * `hostBurst` at once and `hostPerSecond` after that, and all of them together `allBurst` and
 * `allPerSecond`. A connection over budget is held, its ClientHello unread, until its turn; the
 * hosts waiting take turns one connection each, so a flood from many hosts delays a new host's
 * first handshake by a turn of each, not by the flood's length. While it waits a connection is an
 * unproven connection like any other, which the connection gate closes first when its host holds
 * the most. A host whose connection shows a device key (`known`) goes unpaced for `knownForMs`
 * from then, and what it had waiting starts at once: known devices never wait. The loopback is
 * not paced.
 */
export class HandshakeBudget {
  /** Hosts that showed a device key, least recently first, with when. */
  readonly #known = new Map<string, number>();
  readonly #hosts = new Map<string, Host>();
  /** Hosts with connections waiting, in the order of their turns. */
  readonly #waiting = new Set<Host>();
  readonly #all: Bucket;
  #timer: NodeJS.Timeout | undefined;
  #timerAt = 0;
  #forgotAtMs = Number.NEGATIVE_INFINITY;
  /** Since start: connections that waited for their turn. */
  held = 0;
  /** Connections waiting now. */
  waiting = 0;

  constructor(
    private readonly limits: HandshakeLimits = HANDSHAKE_LIMITS,
    private readonly now: () => number = Date.now,
  ) {
    this.#all = { tokens: limits.allBurst, atMs: now() };
  }

  /** Starts `socket`'s handshake (`go`) now, or at its host's next turn. */
  admit(host: string, socket: Socket, go: () => void): void {
    // A client on the gateway's own machine spends that machine's CPU whatever it does.
    if (isLoopbackHost(host) || this.#isKnown(host)) {
      go();
      return;
    }
    const entry = this.#hostOf(host);
    // A host with a line joins it; else the budgets decide, as a tick of the line would.
    if (entry.held.length === 0 && this.#take(entry)) {
      go();
      return;
    }
    this.held += 1;
    this.waiting += 1;
    const held: Held = { socket, go, closed: () => this.#leave(entry, held) };
    // Out of the line at once: a flood's connections closed by the gate must not pile up in it.
    socket.once('close', held.closed);
    entry.held.push(held);
    this.#waiting.add(entry);
    this.#schedule(entry);
  }

  #leave(entry: Host, held: Held): void {
    const at = entry.held.indexOf(held);
    if (at < 0) return;
    entry.held.splice(at, 1);
    this.waiting -= 1;
    if (entry.held.length === 0) this.#waiting.delete(entry);
  }

  #start(held: Held): void {
    held.socket.off('close', held.closed);
    held.go();
  }

  /** A connection of `host` showed a device key. */
  known(host: string): void {
    this.#known.delete(host);
    this.#known.set(host, this.now());
    if (this.#known.size > this.limits.maxHosts) this.#known.delete(this.#known.keys().next().value as string);
    const entry = this.#hosts.get(host);
    if (entry === undefined) return;
    this.#hosts.delete(host);
    this.#waiting.delete(entry);
    const line = entry.held;
    entry.held = [];
    this.waiting -= line.length;
    for (const held of line) if (!held.socket.destroyed) this.#start(held);
  }

  #isKnown(host: string): boolean {
    const at = this.#known.get(host);
    if (at === undefined) return false;
    if (this.now() - at <= this.limits.knownForMs) return true;
    this.#known.delete(host);
    return false;
  }

  /** Takes a token of the host's and of everyone's, or neither. */
  #take(entry: Host): boolean {
    const now = this.now();
    fill(entry, now, this.limits.hostBurst, this.limits.hostPerSecond);
    fill(this.#all, now, this.limits.allBurst, this.limits.allPerSecond);
    if (entry.tokens < 1 || this.#all.tokens < 1) return false;
    entry.tokens -= 1;
    this.#all.tokens -= 1;
    return true;
  }

  /** Each waiting host in turn starts one connection, while the budgets allow. */
  #serve(): void {
    this.#timer = undefined;
    let served = true;
    while (served && this.#waiting.size > 0) {
      served = false;
      // A copy: a host served goes to the end of the line, for the next round.
      for (const entry of [...this.#waiting]) {
        // A connection destroyed while it waited, its 'close' still to come, takes no turn.
        while (entry.held.length > 0 && entry.held[0]!.socket.destroyed) {
          entry.held.shift();
          this.waiting -= 1;
        }
        if (entry.held.length === 0) {
          this.#waiting.delete(entry);
          continue;
        }
        if (!this.#take(entry)) {
          if (this.#all.tokens < 1) break;
          continue;
        }
        this.#waiting.delete(entry);
        this.waiting -= 1;
        this.#start(entry.held.shift()!);
        served = true;
        if (entry.held.length > 0) this.#waiting.add(entry);
      }
    }
    if (this.#waiting.size > 0) this.#schedule();
  }

  /**
   * Wakes when a waiting host can start a handshake: a token of its own and one of everyone's.
   * A host joining the line (`joined`) can only bring that sooner: the others are counted already.
   */
  #schedule(joined?: Host): void {
    const { hostPerSecond, allPerSecond } = this.limits;
    let soonest = joined === undefined ? Number.POSITIVE_INFINITY : joined.atMs + untilToken(joined, hostPerSecond);
    if (joined === undefined) for (const entry of this.#waiting) soonest = Math.min(soonest, entry.atMs + untilToken(entry, hostPerSecond));
    const at = Math.ceil(Math.max(soonest, this.#all.atMs + untilToken(this.#all, allPerSecond)));
    if (this.#timer !== undefined && this.#timerAt <= at) return;
    clearTimeout(this.#timer);
    this.#timerAt = at;
    this.#timer = setTimeout(() => this.#serve(), Math.max(1, at - this.now()));
    this.#timer.unref();
  }

  #hostOf(host: string): Host {
    const found = this.#hosts.get(host);
    if (found !== undefined) return found;
    if (host !== OVERFLOW && this.#hosts.size >= this.limits.maxHosts) {
      this.#forgetIdle();
      if (this.#hosts.size >= this.limits.maxHosts) return this.#hostOf(OVERFLOW);
    }
    const entry: Host = { tokens: this.limits.hostBurst, atMs: this.now(), held: [] };
    this.#hosts.set(host, entry);
    return entry;
  }

  /**
   * Drops the hosts whose budget is full again, with nothing waiting: a host starting afresh gets
   * a full one. At most once a second, so a flood from ever new addresses does not walk every host
   * each time.
   */
  #forgetIdle(): void {
    const now = this.now();
    if (now - this.#forgotAtMs < 1000) return;
    this.#forgotAtMs = now;
    for (const [host, entry] of this.#hosts) {
      fill(entry, now, this.limits.hostBurst, this.limits.hostPerSecond);
      if (entry.tokens >= this.limits.hostBurst && entry.held.length === 0) this.#hosts.delete(host);
    }
  }
}

function fill(bucket: Bucket, now: number, burst: number, perSecond: number): void {
  bucket.tokens = Math.min(burst, bucket.tokens + ((now - bucket.atMs) * perSecond) / 1000);
  bucket.atMs = now;
}

/** Milliseconds from the bucket's last fill until it holds a whole token. */
function untilToken(bucket: Bucket, perSecond: number): number {
  return bucket.tokens >= 1 ? 0 : ((1 - bucket.tokens) * 1000) / perSecond;
}
