import type { AddressInfo, Server, Socket } from 'node:net';
import { TLS_HANDSHAKE_BYTE } from '../tls/tls-options.js';

export type Dispatch = (socket: Socket) => void;

/**
 * Admits the connections of several listening servers against one shared limit, and keeps track of
 * those still waiting for their first byte so a shutdown can close them at once.
 */
export class ConnectionGate {
  private open = 0;
  private readonly undecided = new Set<Socket>();

  constructor(
    private readonly maxConnections: number,
    private readonly firstByteTimeoutMs: number,
  ) {}

  /**
   * Takes `server`'s connection handling over: each accepted connection is counted, then handed to
   * `route`. Returns the server's own handling, so a route can hand a connection to it.
   */
  takeOver(server: Server, route: (socket: Socket, own: Dispatch) => void): Dispatch {
    const listeners = server.listeners('connection') as Dispatch[];
    server.removeAllListeners('connection');
    const own: Dispatch = (socket) => {
      for (const listener of listeners) listener.call(server, socket);
    };
    server.on('connection', (socket: Socket) => {
      if (this.open >= this.maxConnections) {
        socket.destroy();
        return;
      }
      this.open += 1;
      socket.once('close', () => (this.open -= 1));
      route(socket, own);
    });
    return own;
  }

  /**
   * Waits for the connection's first byte and hands it on to `tls` when it starts a TLS handshake,
   * else to `plain`. The byte is put back, so the chosen server reads the whole stream. A client
   * that sends nothing is closed after the same time it would have to send its headers.
   */
  sniff(socket: Socket, tls: Dispatch, plain: Dispatch, isTls: (firstByte: number) => boolean): void {
    this.undecided.add(socket);
    const onError = (): void => void socket.destroy();
    const onClose = (): void => void this.undecided.delete(socket);
    const onTimeout = (): void => void socket.destroy();
    socket.on('error', onError);
    socket.once('close', onClose);
    socket.setTimeout(this.firstByteTimeoutMs, onTimeout);
    // 'readable' and read(), not 'data': the stream must stay paused, as the TLS socket that
    // wraps it reads what was put back itself and a flowing stream would hand those bytes elsewhere.
    socket.once('readable', () => {
      const chunk = socket.read() as Buffer | null;
      socket.setTimeout(0, onTimeout);
      socket.off('error', onError);
      socket.off('close', onClose);
      this.undecided.delete(socket);
      if (chunk === null) {
        socket.destroy();
        return;
      }
      socket.unshift(chunk);
      (isTls(chunk[0] ?? 0) ? tls : plain)(socket);
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
    const toTls = this.takeOver(secure, (socket, own) => own(socket));
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
