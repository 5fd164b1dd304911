import { request as httpRequest } from 'node:http';
import { createServer, type Server } from 'node:https';
import type { Socket } from 'node:net';
import { createSelfSignedCertificate } from '../../src/tls/self-signed.js';

/**
 * What QuestDB Enterprise does at its HTTP port, in front of the suite's open-source QuestDB (which
 * has neither TLS nor tokens): it terminates TLS with a certificate of its own and lets a request
 * through only with `Authorization: Bearer <token>`, refusing anything else with 401. `busy` answers
 * every request 503 with `Retry-After`, as an overloaded reverse proxy would. `build` answers
 * `SELECT build()` in QuestDB's place, as another release would.
 */
export class TlsTokenProxy {
  busy: { retryAfterSeconds: number } | undefined;
  /** Open connections, cut at close. */
  readonly sockets = new Set<Socket>();
  /** Requests that reached QuestDB, by path without the query (`/write`, `/exec`). */
  readonly forwarded = new Map<string, number>();
  /** The body of each `/write` as it came (its Content-Encoding, or identity, and its bytes). */
  readonly writes: { encoding: string; bytes: number }[] = [];
  build: string | undefined;

  private constructor(
    private readonly server: Server,
    readonly port: number,
    /** The proxy's own certificate, PEM: the CA file a client must trust. */
    readonly caPem: string,
  ) {}

  static async start(targetUrl: string, token: string): Promise<TlsTokenProxy> {
    const target = new URL(targetUrl);
    const { cert, key } = createSelfSignedCertificate({
      commonName: 'questdb-enterprise-test',
      altNames: ['127.0.0.1', 'localhost'],
      validDays: 2,
    });
    let proxy: TlsTokenProxy | undefined;
    const server = createServer({ cert, key }, (req, res) => {
      if (proxy?.busy !== undefined) {
        res.writeHead(503, { 'retry-after': String(proxy.busy.retryAfterSeconds), 'content-type': 'text/plain' }).end('busy');
        req.resume();
        return;
      }
      if (req.headers.authorization !== `Bearer ${token}`) {
        res.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify({ message: 'Unauthorized' }));
        req.resume();
        return;
      }
      const path = (req.url ?? '/').split('?')[0]!;
      proxy?.forwarded.set(path, (proxy.forwarded.get(path) ?? 0) + 1);
      const build = proxy?.build;
      if (build !== undefined && path === '/exec' && new URL(req.url ?? '/', 'http://x').searchParams.get('query') === 'SELECT build()') {
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ dataset: [[build]], count: 1 }));
        req.resume();
        return;
      }
      if (path === '/write') {
        const write = { encoding: req.headers['content-encoding'] ?? 'identity', bytes: 0 };
        proxy?.writes.push(write);
        req.on('data', (chunk: Buffer) => {
          write.bytes += chunk.length;
        });
      }
      const { authorization: _token, ...headers } = req.headers;
      const upstream = httpRequest({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers }, (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      });
      upstream.on('error', () => res.destroy());
      req.pipe(upstream);
    });
    server.on('connection', (socket: Socket) => {
      proxy?.sockets.add(socket);
      socket.on('close', () => proxy?.sockets.delete(socket));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    proxy = new TlsTokenProxy(server, typeof address === 'object' && address ? address.port : 0, cert);
    return proxy;
  }

  get url(): string {
    return `https://127.0.0.1:${this.port}`;
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
