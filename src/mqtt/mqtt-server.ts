import { createServer, type Socket } from 'node:net';
import { createServer as createTlsServer, type TLSSocket } from 'node:tls';
import type { ConnectionGate } from '../http/connection-gate.js';
import { TLS_PROTOCOL } from '../tls/tls-options.js';

export interface MqttListenOptions {
  host: string;
  port: number;
  tlsPort: number;
  certificate: { cert: string; key: string };
  /** The gate HTTP admits its connections through: one `MAX_CONNECTIONS` for both protocols. */
  gate: ConnectionGate;
  /** A TLS handshake that stalls is bounded like a CONNECT that does not come. */
  handshakeTimeoutMs: number;
  /** A connection ready for MQTT, in clear or decrypted. */
  onConnection: (socket: Socket) => void;
}

export interface MqttListeners {
  readonly port: number;
  readonly tlsPort: number;
  setCertificate(certificate: { cert: string; key: string }): void;
  /** Stops accepting; resolves once every connection has closed. */
  close(): Promise<void>;
}

/**
 * MQTT's two ports: `port` in clear, which also takes TLS told apart by the first byte as the HTTP
 * port does (a CONNECT starts with 0x10, a TLS handshake with 0x16), and `tlsPort`, TLS only, with
 * the gateway's certificate. Both admit their connections through HTTP's gate.
 */
export async function listenMqtt(options: MqttListenOptions): Promise<MqttListeners> {
  const tlsOptions = { ...TLS_PROTOCOL, handshakeTimeout: options.handshakeTimeoutMs };
  const plain = createServer(options.onConnection);
  const secure = createTlsServer({ ...tlsOptions, ...options.certificate }, (socket: TLSSocket) => options.onConnection(socket));
  // A handshake that fails is the client's problem; it must not reach the process's error handler.
  secure.on('tlsClientError', (_error, socket) => socket.destroy());
  const { gate } = options;
  const ports = await gate.listenPair(plain, secure, options.host, { plain: options.port, tls: options.tlsPort });
  return {
    port: ports.plain,
    tlsPort: ports.tls,
    setCertificate: (certificate) => secure.setSecureContext({ ...tlsOptions, ...certificate }),
    close: () =>
      Promise.all([plain, secure].map((server) => new Promise<void>((resolve) => server.close(() => resolve())))).then(() => undefined),
  };
}
