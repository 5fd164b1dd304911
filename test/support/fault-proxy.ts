import { createServer, connect, type Server, type Socket } from 'node:net';

export type ProxyMode = 'pass' | 'refuse' | 'stall';

/**
 * A TCP proxy in front of the real QuestDB that injects faults: refuse connections, stall them
 * (accept, never answer) or delay every answer.
 */
export class FaultProxy {
  mode: ProxyMode = 'pass';
  delayMs = 0;
  /** Connections clients opened through the proxy since it started. */
  accepted = 0;
  readonly #sockets = new Set<Socket>();

  private constructor(
    private readonly server: Server,
    readonly port: number,
    private readonly targetPort: number,
  ) {
    server.on('connection', (client) => this.#accept(client));
  }

  static async start(targetUrl: string): Promise<FaultProxy> {
    const target = Number(new URL(targetUrl).port);
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    return new FaultProxy(server, typeof address === 'object' && address ? address.port : 0, target);
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Sets the mode and cuts every open connection, as a restart of the server would. */
  set(mode: ProxyMode, delayMs = 0): void {
    this.mode = mode;
    this.delayMs = delayMs;
    for (const socket of this.#sockets) socket.destroy();
  }

  async close(): Promise<void> {
    for (const socket of this.#sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  #accept(client: Socket): void {
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
    const upstream = connect(this.targetPort, '127.0.0.1');
    this.#sockets.add(upstream);
    upstream.on('error', () => client.destroy());
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => {
      this.#sockets.delete(upstream);
      client.destroy();
    });
    client.pipe(upstream);
    upstream.on('data', (chunk: Buffer) => {
      if (this.delayMs === 0) client.write(chunk);
      else setTimeout(() => client.writable && client.write(chunk), this.delayMs);
    });
  }

  #track(socket: Socket): void {
    this.#sockets.add(socket);
    socket.on('close', () => this.#sockets.delete(socket));
  }
}
