import { connect, createServer, type Server, type Socket } from 'node:net';

/**
 * A TCP proxy in front of a real server that can stop passing what the clients send while still
 * passing what the server answers: an MQTT subscriber's acknowledgements then never reach the
 * broker, as when the connection or the subscriber dies right after its commit. `cut()` closes
 * every connection and passes everything again.
 */
export class MutingProxy {
  muted = false;
  readonly #sockets = new Set<Socket>();

  private constructor(
    private readonly server: Server,
    readonly port: number,
    targetPort: number,
  ) {
    server.on('connection', (client) => {
      const upstream = connect(targetPort, '127.0.0.1');
      for (const socket of [client, upstream]) {
        this.#sockets.add(socket);
        socket.on('error', () => undefined);
        socket.on('close', () => {
          this.#sockets.delete(socket);
          client.destroy();
          upstream.destroy();
        });
      }
      client.on('data', (chunk: Buffer) => {
        if (!this.muted) upstream.write(chunk);
      });
      upstream.pipe(client);
    });
  }

  static async start(targetPort: number): Promise<MutingProxy> {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    return new MutingProxy(server, typeof address === 'object' && address !== null ? address.port : 0, targetPort);
  }

  get url(): string {
    return `mqtt://127.0.0.1:${this.port}`;
  }

  cut(): void {
    this.muted = false;
    for (const socket of this.#sockets) socket.destroy();
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
