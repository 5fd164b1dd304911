import { connect, createServer, type Server, type Socket } from 'node:net';

/**
 * A TCP link with latency in front of a local port: every chunk, each way, and each end of a
 * stream arrive `oneWayMs` after they were sent, in order, as over a slow radio or cellular link.
 */
export class LatencyLink {
  readonly #sockets = new Set<Socket>();

  private constructor(
    private readonly server: Server,
    readonly port: number,
  ) {}

  static async start(targetPort: number, oneWayMs: number): Promise<LatencyLink> {
    // Half-open both ways, so an end is passed on late like the data before it.
    const server = createServer({ allowHalfOpen: true });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    const link = new LatencyLink(server, typeof address === 'object' && address ? address.port : 0);
    server.on('connection', (device) => {
      const gateway = connect({ port: targetPort, host: '127.0.0.1', allowHalfOpen: true });
      for (const socket of [device, gateway]) {
        link.#sockets.add(socket);
        socket.on('close', () => link.#sockets.delete(socket));
        socket.on('error', () => {
          device.destroy();
          gateway.destroy();
        });
      }
      delayed(device, gateway, oneWayMs);
      delayed(gateway, device, oneWayMs);
    });
    return link;
  }

  async close(): Promise<void> {
    for (const socket of this.#sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** Forwards `from` to `to` late by `ms`; timers of one duration fire in the order they were set. */
function delayed(from: Socket, to: Socket, ms: number): void {
  from.on('data', (chunk: Buffer) => setTimeout(() => to.writable && to.write(chunk), ms));
  from.on('end', () => setTimeout(() => to.writable && to.end(), ms));
}
