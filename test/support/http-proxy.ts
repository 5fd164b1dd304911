import { request as httpRequest, createServer, type Server } from 'node:http';
import { connect, type Socket } from 'node:net';

/**
 * A forward HTTP proxy as site networks have them: CONNECT tunnels (for https:// destinations)
 * and absolute-form requests (for http:// ones). It counts both, so a test can see the traffic
 * went through it.
 */
export class HttpProxy {
  tunnels = 0;
  forwarded = 0;
  readonly #sockets = new Set<Socket>();

  private constructor(
    private readonly server: Server,
    readonly port: number,
  ) {}

  static async start(): Promise<HttpProxy> {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    const proxy = new HttpProxy(server, typeof address === 'object' && address ? address.port : 0);
    server.on('connection', (socket) => proxy.#track(socket));
    server.on('connect', (req, client: Socket, head: Buffer) => proxy.#tunnel(req.url ?? '', client, head));
    server.on('request', (req, res) => {
      proxy.forwarded += 1;
      const target = new URL(req.url ?? '');
      const upstream = httpRequest(target, { method: req.method, headers: req.headers }, (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      });
      upstream.on('error', () => res.destroy());
      req.pipe(upstream);
    });
    return proxy;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  async close(): Promise<void> {
    for (const socket of this.#sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  #tunnel(authority: string, client: Socket, head: Buffer): void {
    this.tunnels += 1;
    const colon = authority.lastIndexOf(':');
    const server = connect(Number(authority.slice(colon + 1)), authority.slice(0, colon), () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      server.write(head);
      server.pipe(client);
      client.pipe(server);
    });
    this.#track(server);
    server.on('error', () => client.destroy());
    client.on('error', () => server.destroy());
  }

  #track(socket: Socket): void {
    this.#sockets.add(socket);
    socket.on('close', () => this.#sockets.delete(socket));
  }
}
