// A TCP proxy that counts the bytes it carries each way, for the tests and the benchmarks: what a
// metered link between a gateway and its destination is billed for (TCP payload: HTTP headers and
// bodies, Kafka's framing, TLS records when the link is encrypted). Connections are counted apart
// by what their client sends first, so a site's reports and its batches can be told apart.
import { connect, createServer } from 'node:net';

/**
 * @typedef {object} ByteCounts
 * @property {number} sent      client to destination
 * @property {number} received  destination to client
 * @property {number} connections
 */

export class CountingProxy {
  /** @type {Map<string, ByteCounts>} */
  #counts = new Map();
  /** @type {Set<import('node:net').Socket>} */
  #sockets = new Set();
  /** @type {import('node:net').Server} */
  #server;
  #targetPort;
  /** @type {(firstBytes: string) => string} */
  #classify;

  /**
   * @param {import('node:net').Server} server
   * @param {number} port
   * @param {number} targetPort
   * @param {(firstBytes: string) => string} classify
   */
  constructor(server, port, targetPort, classify) {
    this.#server = server;
    this.port = port;
    this.#targetPort = targetPort;
    this.#classify = classify;
    server.on('connection', (client) => this.#accept(client));
  }

  /**
   * A proxy on a free port of 127.0.0.1 (or `port`) in front of `targetPort` on 127.0.0.1.
   * `classify` names a connection's traffic from the first bytes its client sends (latin1).
   * @param {number} targetPort
   * @param {{ port?: number, classify?: (firstBytes: string) => string }} [options]
   */
  static async start(targetPort, options = {}) {
    const server = createServer();
    await new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port ?? 0, '127.0.0.1', () => resolve(undefined));
    });
    const address = server.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    return new CountingProxy(server, port, targetPort, options.classify ?? (() => 'all'));
  }

  get url() {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Sends new connections to `targetPort` from now on and cuts the open ones, as a server replaced behind an address. @param {number} targetPort */
  retarget(targetPort) {
    this.#targetPort = targetPort;
    for (const socket of this.#sockets) socket.destroy();
  }

  /** The bytes counted so far, by kind of traffic. @returns {Record<string, ByteCounts>} */
  counts() {
    return Object.fromEntries([...this.#counts].map(([kind, c]) => [kind, { ...c }]));
  }

  /** Bytes both ways of `kind` (every kind when omitted). @param {string} [kind] */
  total(kind) {
    let bytes = 0;
    for (const [k, c] of this.#counts) if (kind === undefined || k === kind) bytes += c.sent + c.received;
    return bytes;
  }

  /** Counts from zero again, open connections' bytes included (they keep counting where they count). */
  reset() {
    for (const c of this.#counts.values()) Object.assign(c, { sent: 0, received: 0, connections: 0 });
  }

  async close() {
    for (const socket of this.#sockets) socket.destroy();
    await new Promise((resolve) => this.#server.close(() => resolve(undefined)));
  }

  /** @param {string} kind */
  #of(kind) {
    let c = this.#counts.get(kind);
    if (c === undefined) {
      c = { sent: 0, received: 0, connections: 0 };
      this.#counts.set(kind, c);
    }
    return c;
  }

  /** @param {import('node:net').Socket} client */
  #accept(client) {
    const upstream = connect(this.#targetPort, '127.0.0.1');
    for (const socket of [client, upstream]) {
      this.#sockets.add(socket);
      socket.on('error', () => undefined);
      socket.on('close', () => {
        this.#sockets.delete(socket);
        client.destroy();
        upstream.destroy();
      });
    }
    /** @type {ByteCounts | undefined} */
    let counts;
    /** Bytes the destination sent before the client said anything (a greeting), counted once the kind is known. */
    let early = 0;
    client.on('data', (/** @type {Buffer} */ chunk) => {
      if (counts === undefined) {
        counts = this.#of(this.#classify(chunk.subarray(0, 256).toString('latin1')));
        counts.connections += 1;
        counts.received += early;
      }
      counts.sent += chunk.length;
      upstream.write(chunk);
    });
    upstream.on('data', (/** @type {Buffer} */ chunk) => {
      if (counts === undefined) early += chunk.length;
      else counts.received += chunk.length;
      client.write(chunk);
    });
    client.on('end', () => upstream.end());
    upstream.on('end', () => client.end());
  }
}
