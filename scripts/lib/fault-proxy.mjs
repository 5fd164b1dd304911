// A TCP proxy in front of a real server (QuestDB) that injects faults, for the tests and the fault
// runs: refuse connections, stall them (accept, never answer) or delay every answer.
import { connect, createServer } from 'node:net';

/** @typedef {'pass' | 'refuse' | 'stall'} ProxyMode */

export class FaultProxy {
  /** @type {ProxyMode} */
  mode = 'pass';
  delayMs = 0;
  /** Connections clients opened through the proxy since it started. */
  accepted = 0;
  /** QuestDB SQL requests (`GET /exec`) clients sent since it started, each seen at the start of a chunk. */
  sqlRequests = 0;
  /** @type {Set<import('node:net').Socket>} */
  #sockets = new Set();
  /** @type {import('node:net').Server} */
  #server;
  /** @type {number} */
  #targetPort;

  /** @param {import('node:net').Server} server @param {number} port @param {number} targetPort */
  constructor(server, port, targetPort) {
    this.#server = server;
    this.port = port;
    this.#targetPort = targetPort;
    server.on('connection', (client) => this.#accept(client));
  }

  /** A proxy on a free port of 127.0.0.1 in front of `targetUrl`'s port. @param {string} targetUrl */
  static async start(targetUrl) {
    const target = Number(new URL(targetUrl).port);
    const server = createServer();
    await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)));
    const address = server.address();
    return new FaultProxy(server, typeof address === 'object' && address ? address.port : 0, target);
  }

  get url() {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Sets the mode and cuts every open connection, as a restart of the server would. @param {ProxyMode} mode */
  set(mode, delayMs = 0) {
    this.mode = mode;
    this.delayMs = delayMs;
    for (const socket of this.#sockets) socket.destroy();
  }

  async close() {
    for (const socket of this.#sockets) socket.destroy();
    await new Promise((resolve) => this.#server.close(() => resolve(undefined)));
  }

  /** @param {import('node:net').Socket} client */
  #accept(client) {
    this.accepted += 1;
    if (this.mode === 'refuse') {
      client.destroy();
      return;
    }
    this.#track(client);
    client.on('error', () => undefined);
    if (this.mode === 'stall') {
      client.resume();
      return;
    }
    const upstream = connect(this.#targetPort, '127.0.0.1');
    this.#sockets.add(upstream);
    upstream.on('error', () => client.destroy());
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => {
      this.#sockets.delete(upstream);
      client.destroy();
    });
    client.on('data', (/** @type {Buffer} */ chunk) => {
      if (chunk.subarray(0, 9).toString('latin1') === 'GET /exec') this.sqlRequests += 1;
    });
    client.pipe(upstream);
    upstream.on('data', (/** @type {Buffer} */ chunk) => {
      if (this.delayMs === 0) client.write(chunk);
      else setTimeout(() => client.writable && client.write(chunk), this.delayMs);
    });
  }

  /** @param {import('node:net').Socket} socket */
  #track(socket) {
    this.#sockets.add(socket);
    socket.on('close', () => this.#sockets.delete(socket));
  }
}
