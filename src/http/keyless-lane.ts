import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { refuseLaneFull } from './early-refusals.js';

export interface KeylessLaneLimits {
  /** Requests waiting at once; past it a request is answered 503 at once. */
  waiting: number;
  /** Requests one connection has waiting (pipelined); past it the connection is closed. */
  perConnection: number;
}

const WAITING = Symbol('harbor.keylessWaiting');
type Counted = Socket & { [WAITING]?: number };

/**
 * A device's request: to the API, with a key (right or wrong: a wrong one costs a lookup and a 401,
 * no page). Everything else goes through the lane, the console and `/metrics` whatever they carry.
 */
export const isDeviceRequest = (req: IncomingMessage): boolean =>
  req.headers['x-api-key'] !== undefined && req.url?.startsWith('/api/') === true;

/**
 * Where HTTP requests other than the devices' (console pages and logins, scrapes, health checks)
 * wait for their turn: one starts each turn of the event loop, so whatever arrives at once, the
 * devices' requests ready meanwhile are read, committed and answered between two of them. A request
 * whose body has arrived runs to its answer in its turn (its awaits resolve before the loop turns);
 * one that waits for more of its body gives its turn up until then.
 *
 * Bounded: Node hands on every request a read brings, pipelined ones too, before any is answered;
 * a connection with `perConnection` waiting is closed at its next, and past `waiting` in all a
 * request is answered 503 with `Retry-After` without waiting.
 */
export class KeylessLane {
  /** Waiting starts, the first at `#head`; the array is compacted when it is half spent. */
  #waiting: (() => void)[] = [];
  #head = 0;
  #scheduled = false;

  constructor(
    private readonly limits: KeylessLaneLimits = { waiting: 256, perConnection: 2 },
    private readonly schedule: (turn: () => void) => void = setImmediate,
  ) {}

  /** Requests waiting for their turn now. */
  get waiting(): number {
    return this.#waiting.length - this.#head;
  }

  /** Runs `start` for the request at its turn, unless its connection is gone by then. */
  admit(req: IncomingMessage, res: ServerResponse, start: () => void): void {
    const socket = req.socket as Counted;
    const held = socket[WAITING] ?? 0;
    if (held >= this.limits.perConnection) {
      socket.destroy();
      return;
    }
    if (this.waiting >= this.limits.waiting) {
      refuseLaneFull(res);
      return;
    }
    socket[WAITING] = held + 1;
    this.enqueue(() => {
      socket[WAITING] = (socket[WAITING] ?? 1) - 1;
      if (!socket.destroyed) start();
    });
  }

  /** Runs `start` at a later turn of the event loop, after those enqueued before it. */
  enqueue(start: () => void): void {
    this.#waiting.push(start);
    this.#next();
  }

  #next(): void {
    if (this.#scheduled || this.waiting === 0) return;
    this.#scheduled = true;
    // A callback of setImmediate that schedules another runs it at the next turn, after that turn's
    // I/O: so one start a turn, however many wait.
    this.schedule(this.#turn);
  }

  readonly #turn = (): void => {
    this.#scheduled = false;
    const start = this.#waiting[this.#head]!;
    this.#head += 1;
    if (this.#head * 2 >= this.#waiting.length) {
      this.#waiting = this.#waiting.slice(this.#head);
      this.#head = 0;
    }
    this.#next();
    start();
  };
}
