// A metered link as a TCP proxy: each direction a line of `bitsPerS`, `delayMs` one way, and a share
// of TCP segments lost and sent again a retransmission timeout later (each occupies the line twice,
// and what follows waits behind it, as TCP delivers in order). Bytes on the line are counted as IP
// packets: each segment of at most MSS bytes with its 52 bytes of IPv4 and TCP headers (timestamps
// on), and an ACK of 52 bytes for every second segment the other way. `cut()` ends every connection
// and refuses new ones until `restore()`: an uplink that is gone.
import { connect, createServer } from 'node:net';

const MSS = 1448;
const HEADERS = 52;

export class LinkProxy {
  /** Bytes on the line both ways, headers and retransmissions included. */
  bytes = 0;
  cutOff = false;
  /** @type {Set<import('node:net').Socket>} */
  #sockets = new Set();

  /**
   * @param {import('node:net').Server} server
   * @param {{ targetPort: number, bitsPerS: number, delayMs: number, loss: number, rtoMs: number }} link
   */
  constructor(server, link) {
    this.server = server;
    this.link = link;
    server.on('connection', (client) => this.#accept(client));
  }

  /**
   * A link on `host` (a free port) to 127.0.0.1:`targetPort`.
   * @param {string} host
   * @param {{ targetPort: number, bitsPerS: number, delayMs: number, loss: number, rtoMs?: number }} link
   */
  static async start(host, link) {
    const server = createServer();
    await new Promise((resolve) => server.listen(0, host, () => resolve(undefined)));
    // Linux's least retransmission timeout is 200 ms beyond the round trip.
    return new LinkProxy(server, { rtoMs: 2 * link.delayMs + 200, ...link });
  }

  get port() {
    const address = this.server.address();
    return typeof address === 'object' && address !== null ? address.port : 0;
  }

  cut() {
    this.cutOff = true;
    for (const socket of this.#sockets) socket.destroy();
  }

  restore() {
    this.cutOff = false;
  }

  close() {
    this.cut();
    return new Promise((resolve) => this.server.close(() => resolve(undefined)));
  }

  /** @param {import('node:net').Socket} client */
  #accept(client) {
    if (this.cutOff) {
      client.destroy();
      return;
    }
    const server = connect(this.link.targetPort, '127.0.0.1');
    for (const s of [client, server]) {
      this.#sockets.add(s);
      s.on('error', () => undefined);
      s.on('close', () => {
        this.#sockets.delete(s);
        client.destroy();
        server.destroy();
      });
    }
    this.#direction(client, server);
    this.#direction(server, client);
  }

  /** @param {import('node:net').Socket} from @param {import('node:net').Socket} to */
  #direction(from, to) {
    const { bitsPerS, delayMs, loss, rtoMs } = this.link;
    let lineFree = 0;
    let lastArrival = 0;
    let segments = 0;
    from.on('data', (/** @type {Buffer} */ chunk) => {
      for (let at = 0; at < chunk.length; at += MSS) {
        const segment = chunk.subarray(at, Math.min(chunk.length, at + MSS));
        const wire = segment.length + HEADERS;
        const sendMs = (wire * 8 * 1000) / bitsPerS;
        const now = performance.now();
        lineFree = Math.max(now, lineFree) + sendMs;
        this.bytes += wire;
        if (Math.random() < loss) {
          // Lost: sent again a timeout later, on the line again.
          lineFree += rtoMs + sendMs;
          this.bytes += wire;
        }
        segments += 1;
        if (segments % 2 === 0) this.bytes += HEADERS;
        const arrival = Math.max(lastArrival, lineFree + delayMs);
        lastArrival = arrival;
        setTimeout(() => {
          if (!to.destroyed) to.write(segment);
        }, arrival - now);
      }
    });
    from.on('end', () => setTimeout(() => to.end(), Math.max(0, lastArrival - performance.now())));
  }
}
