import type { AddressInfo, Server, Socket } from 'node:net';
import type { Logger } from 'pino';
import { hostOf } from '../address-host.js';
import { TLS_HANDSHAKE_BYTE } from '../tls/tls-options.js';
import { HANDSHAKE_LIMITS, HandshakeBudget, type HandshakeLimits } from './handshake-budget.js';

export type Dispatch = (socket: Socket) => void;

export interface ConnectionBudgets {
  /** Connections of every kind at once, HTTP, HTTPS and MQTT together (`MAX_CONNECTIONS`). */
  maxConnections: number;
  /** Of those, connections that have not shown a device key yet (`MAX_UNPROVEN_CONNECTIONS`). */
  maxUnproven: number;
  /** How long an unproven connection may sit without a request in progress (`UNPROVEN_TIMEOUT_MS`). */
  unprovenTimeoutMs: number;
  /** How fast hosts that have not shown a device key may make it do TLS handshakes. */
  handshakes?: HandshakeLimits;
}

/** What the gate keeps on each connection it admitted: the one allocation a connection costs it. */
interface Admission {
  proven: boolean;
  /** Closed by the gate, and already counted out. */
  shed: boolean;
  /** It sent a byte: a device's new connection does at once, an idle socket never. */
  spoke: boolean;
  /** An unproven connection's request is being answered; only then is it not idle. */
  busy: boolean;
  /** Accepted, or its last request answered. */
  sinceMs: number;
  /** Accepted. */
  acceptedMs: number;
  /** The client's host (an IPv4 address, an IPv6 /64): one host's unproven connections go first. */
  host: string;
  /** Ends the busy spell: made once per connection, so a request adds no allocation. */
  ended?: () => void;
}

const ADMISSION = Symbol('harbor.admission');
type Admitted = Socket & { [ADMISSION]?: Admission };

/** A TLS socket wraps the accepted one (`_parent`), which is what the gate admitted. */
const admittedOf = (socket: Socket): Admitted => (socket as { _parent?: Socket })._parent ?? socket;

/**
 * A connection younger than this is closed only when no older one can be: a device's new connection
 * proves itself within it (handshake and headers), whereas a flood's connections live longer.
 */
const YOUNG_MS = 1000;

/** How often the gate says, at most, that it had to close connections. */
const REPORT_EVERY_MS = 10_000;

/**
 * Admits the connections of several listening servers against one shared limit, in two budgets.
 * A connection is unproven from its accept until it presents a device credential (an HTTP request
 * with a valid `X-API-Key`, an accepted MQTT CONNECT: `prove`); then it is the devices'. Unproven
 * connections (logins, console pages, scrapes, wrong keys, idle sockets, and every device's new
 * connection before its first request) are at most `maxUnproven`, so the rest of `maxConnections`
 * is the devices' whatever else connects. When a new connection finds no room, an unproven one
 * without a request in progress is closed for it (`#evictOne`): one over YOUNG_MS old before a
 * younger one; of the old, one that never sent a byte first, then one from the host holding the
 * most unproven connections; of the young, one from the host holding the most, silent before not.
 * Else the oldest. A device opens a connection and sends at once (a TLS ClientHello, a request, a
 * CONNECT) and proves itself within milliseconds, so its connection outlasts a flood's older ones;
 * and it holds one unproven connection at a time, so a host holding several loses one of them
 * first, however often it reconnects. Unproven connections idle for `unprovenTimeoutMs` (no first byte, no handshake, no
 * headers, an idle keep-alive) are closed. Only when every connection is a device's is a new one
 * refused. A TLS handshake, the dearest thing an unproven connection asks for, starts when the
 * host's handshake budget allows (`HandshakeBudget`); until then the connection waits unread.
 */
export class ConnectionGate {
  private open = 0;
  /** Unproven connections in order of last activity, the longest idle first. */
  readonly #unproven = new Set<Admitted>();
  /** How many of the unproven connections each host holds. */
  readonly #unprovenOfHost = new Map<string, number>();
  private readonly undecided = new Set<Socket>();
  #sweep: NodeJS.Timeout | undefined;
  #reportedMs = 0;
  /** Since start: unproven connections closed to make room, closed when idle too long, and connections refused. */
  readonly counts = { evicted: 0, expired: 0, refused: 0 };
  #reported = { evicted: 0, expired: 0, refused: 0, held: 0 };
  readonly #handshakes: HandshakeBudget;

  constructor(
    private readonly budgets: ConnectionBudgets,
    private readonly logger?: Logger,
    private readonly now: () => number = Date.now,
  ) {
    this.#handshakes = new HandshakeBudget(budgets.handshakes ?? HANDSHAKE_LIMITS, now);
  }

  /** TLS connections waiting for their turn to start a handshake: since start, and now. */
  get handshakes(): { held: number; waiting: number } {
    return { held: this.#handshakes.held, waiting: this.#handshakes.waiting };
  }

  /** Connections open now, and how many of them are unproven. */
  get sizes(): { open: number; unproven: number } {
    return { open: this.open, unproven: this.#unproven.size };
  }

  /**
   * Takes `server`'s connection handling over: each accepted connection is admitted, then handed to
   * `route`. Returns the server's own handling, so a route can hand a connection to it.
   */
  takeOver(server: Server, route: (socket: Socket, own: Dispatch) => void): Dispatch {
    const listeners = server.listeners('connection') as Dispatch[];
    server.removeAllListeners('connection');
    const own: Dispatch = (socket) => {
      for (const listener of listeners) listener.call(server, socket);
    };
    server.on('connection', (socket: Socket) => {
      if (this.admit(socket)) route(socket, own);
    });
    return own;
  }

  /** Counts a new connection in, making room among the unproven; false when it was refused (and destroyed). */
  admit(socket: Socket): boolean {
    const { maxConnections, maxUnproven } = this.budgets;
    const host = hostOf(socket.remoteAddress ?? '');
    if (this.open >= maxConnections || this.#unproven.size >= maxUnproven) {
      if (!this.#evictOne(host)) {
        this.counts.refused += 1;
        this.#report();
        socket.destroy();
        return false;
      }
    }
    const admitted = socket as Admitted;
    const now = this.now();
    const admission: Admission = { proven: false, shed: false, spoke: false, busy: false, sinceMs: now, acceptedMs: now, host };
    admitted[ADMISSION] = admission;
    this.open += 1;
    this.#unproven.add(admitted);
    this.#unprovenOfHost.set(host, (this.#unprovenOfHost.get(host) ?? 0) + 1);
    this.#sweep ??= setInterval(() => this.#expire(), Math.max(25, this.budgets.unprovenTimeoutMs / 4)).unref();
    socket.once('close', () => {
      if (admission.shed) return;
      this.open -= 1;
      this.#leaveUnproven(admitted);
    });
    return true;
  }

  /** The connection presented a device credential: from now on it counts against the devices' budget. */
  prove(socket: Socket): void {
    const admitted = admittedOf(socket);
    const admission = admitted[ADMISSION];
    if (admission === undefined || admission.proven) return;
    admission.proven = true;
    this.#leaveUnproven(admitted);
    this.#handshakes.known(admission.host);
  }

  #leaveUnproven(socket: Admitted): void {
    if (!this.#unproven.delete(socket)) return;
    const host = socket[ADMISSION]!.host;
    const held = (this.#unprovenOfHost.get(host) ?? 1) - 1;
    if (held === 0) this.#unprovenOfHost.delete(host);
    else this.#unprovenOfHost.set(host, held);
  }

  /** An unproven connection's request is being answered until `ended` fires: it is not idle meanwhile. */
  requestStarted(socket: Socket, ended: { once(event: 'close', listener: () => void): unknown }): void {
    const admitted = admittedOf(socket);
    const admission = admitted[ADMISSION];
    if (admission === undefined || admission.proven) return;
    admission.busy = true;
    admission.ended ??= () => {
      admission.busy = false;
      admission.sinceMs = this.now();
      // Still unproven: to the end of the line, as the most recently active.
      if (!admission.proven && this.#unproven.delete(admitted)) this.#unproven.add(admitted);
    };
    ended.once('close', admission.ended);
  }

  /**
   * Closes an unproven connection without a request in progress: one over YOUNG_MS old that never
   * sent a byte (the longest idle); else one over YOUNG_MS old from the host holding the most;
   * else a younger one from the host holding the most, one that never sent a byte before one that
   * did; else, all busy, the oldest. The new connection counts for its host (`newHost`). False
   * when there is none.
   */
  #evictOne(newHost: string): boolean {
    let oldSilent: Admitted | undefined;
    let oldSpoke: Admitted | undefined;
    let oldSpokeHolds = 0;
    let young: Admitted | undefined;
    let youngRank = 0;
    let oldest: Admitted | undefined;
    const youngSince = this.now() - YOUNG_MS;
    for (const socket of this.#unproven) {
      const admission = socket[ADMISSION]!;
      oldest ??= socket;
      if (admission.busy) continue;
      const holds = (this.#unprovenOfHost.get(admission.host) ?? 0) + (admission.host === newHost ? 1 : 0);
      if (admission.acceptedMs <= youngSince) {
        if (!admission.spoke) {
          oldSilent = socket;
          break;
        }
        if (holds > oldSpokeHolds) {
          oldSpoke = socket;
          oldSpokeHolds = holds;
        }
        continue;
      }
      // Young and silent may be a device's connection accepted in the same burst as a flood's,
      // its first bytes not read yet: the host decides first.
      const rank = 2 * holds + (admission.spoke ? 0 : 1);
      if (rank > youngRank) {
        young = socket;
        youngRank = rank;
      }
    }
    const victim = oldSilent ?? oldSpoke ?? young ?? oldest;
    if (victim === undefined) return false;
    this.counts.evicted += 1;
    this.#shed(victim);
    this.#report();
    return true;
  }

  /** Closes an unproven connection and counts it out now: its 'close' comes later, and room is needed at once. */
  #shed(socket: Admitted): void {
    socket[ADMISSION]!.shed = true;
    this.#leaveUnproven(socket);
    this.open -= 1;
    socket.destroy();
  }

  #expire(): void {
    const deadline = this.now() - this.budgets.unprovenTimeoutMs;
    for (const socket of this.#unproven) {
      const admission = socket[ADMISSION]!;
      if (admission.busy) continue;
      if (admission.sinceMs > deadline) break;
      this.counts.expired += 1;
      this.#shed(socket);
    }
    if (this.#unproven.size === 0) {
      clearInterval(this.#sweep);
      this.#sweep = undefined;
    }
    this.#report();
  }

  /** At most every 10 s: how many connections the gate closed or refused since it last said. */
  #report(): void {
    const now = this.now();
    if (this.logger === undefined || now - this.#reportedMs < REPORT_EVERY_MS) return;
    const { evicted, refused } = this.counts;
    const held = this.#handshakes.held;
    if (evicted === this.#reported.evicted && refused === this.#reported.refused && held === this.#reported.held) return;
    this.#reportedMs = now;
    this.logger.warn(
      {
        event: 'connections_shed',
        evicted: evicted - this.#reported.evicted,
        refused: refused - this.#reported.refused,
        handshakesHeld: held - this.#reported.held,
        handshakesWaiting: this.#handshakes.waiting,
        open: this.open,
        unproven: this.#unproven.size,
      },
      'connections without a device key were closed or held back to keep room and time for devices',
    );
    this.#reported = { ...this.counts, held };
  }

  /**
   * Waits for the connection's first byte and hands it on to `tls` when it starts a TLS handshake,
   * once its host's handshake budget allows, else to `plain`. The byte is put back, so the chosen
   * server reads the whole stream. A client that sends nothing is closed as an idle unproven connection.
   */
  sniff(socket: Socket, tls: Dispatch, plain: Dispatch, isTls: (firstByte: number) => boolean): void {
    this.undecided.add(socket);
    const onError = (): void => void socket.destroy();
    const onClose = (): void => void this.undecided.delete(socket);
    socket.on('error', onError);
    socket.once('close', onClose);
    const dispatch = (to: Dispatch): void => {
      socket.off('error', onError);
      socket.off('close', onClose);
      this.undecided.delete(socket);
      to(socket);
    };
    // 'readable' and read(), not 'data': the stream must stay paused, as the TLS socket that
    // wraps it reads what was put back itself and a flowing stream would hand those bytes elsewhere.
    socket.once('readable', () => {
      const chunk = socket.read() as Buffer | null;
      const admission = (socket as Admitted)[ADMISSION];
      if (admission !== undefined) admission.spoke = true;
      if (chunk === null) {
        socket.destroy();
        return;
      }
      socket.unshift(chunk);
      if (!isTls(chunk[0] ?? 0)) dispatch(plain);
      // Until its handshake may start, the connection stays undecided: a stop closes it.
      else {
        this.#handshakes.admit(admission?.host ?? hostOf(socket.remoteAddress ?? ''), socket, () => dispatch(tls));
        this.#report();
      }
    });
  }

  /**
   * Listens on a pair of ports through this gate: `secure` speaks TLS only; `plain` serves clear
   * text and hands on a connection that opens with a TLS handshake, as devices with a TLS client
   * speak TLS whatever the URL's scheme. When `secure` cannot listen, `plain` is closed again.
   */
  async listenPair(
    plain: Server,
    secure: Server,
    host: string,
    ports: { plain: number; tls: number },
  ): Promise<{ plain: number; tls: number }> {
    // The TLS port's connections are sniffed too, only to see that they sent something.
    const toTls = this.takeOver(secure, (socket, own) => this.sniff(socket, own, own, () => true));
    this.takeOver(plain, (socket, own) => this.sniff(socket, toTls, own, (byte) => byte === TLS_HANDSHAKE_BYTE));
    const plainPort = await listen(plain, host, ports.plain);
    try {
      return { plain: plainPort, tls: await listen(secure, host, ports.tls) };
    } catch (error) {
      plain.close();
      throw error;
    }
  }

  /** Closes the connections that never sent a byte: they carry no request to finish. */
  closeUndecided(): void {
    for (const socket of this.undecided) socket.destroy();
  }
}

function listen(server: Server, host: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}
