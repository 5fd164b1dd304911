import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import { getRequestListener } from '@hono/node-server';
import type { Hono } from 'hono';
import { HTTP_ALPN_PROTOCOLS, TLS_PROTOCOL } from '../tls/tls-options.js';
import { ConnectionGate } from './connection-gate.js';
import { isDeviceRequest, KeylessLane } from './keyless-lane.js';
import { answerClientError, HOST_OF_HOSTLESS_REQUESTS, refuseHostlessHttp11, requestErrorResponse } from './early-refusals.js';

export interface HttpServerOptions {
  host: string;
  port: number;
  httpsPort: number;
  maxConnections: number;
  /** Of `maxConnections`, those that have not shown a device key yet. */
  maxUnprovenConnections: number;
  /** How long an unproven connection may sit without a request in progress. */
  unprovenTimeoutMs: number;
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  keepAliveTimeoutMs: number;
  certificate: { cert: string; key: string };
  /** The gate connections are admitted through; other listeners (MQTT) may share it and its limit. */
  gate?: ConnectionGate;
}

export interface HttpServer {
  readonly server: Server;
  /** Plain HTTP, and TLS told apart by the first byte. */
  readonly port: number;
  readonly httpsPort: number;
  /** Admits connections against `MAX_CONNECTIONS` and `MAX_UNPROVEN_CONNECTIONS`; MQTT's listeners share it. */
  readonly gate: ConnectionGate;
  /** New handshakes use this certificate; established connections keep theirs. */
  setCertificate(certificate: { cert: string; key: string }): void;
  /** Stops accepting, lets in-flight requests finish until `deadline` (epoch ms), then cuts the rest. */
  close(deadline: number): Promise<void>;
}

export async function startHttpServer(app: Hono, options: HttpServerOptions): Promise<HttpServer> {
  const httpOptions = {
    headersTimeout: options.headersTimeoutMs,
    requestTimeout: options.requestTimeoutMs,
    keepAliveTimeout: options.keepAliveTimeoutMs,
    // Node checks the header and request timeouts only this often (30 s by default).
    connectionsCheckingInterval: Math.max(100, Math.min(options.headersTimeoutMs, options.requestTimeoutMs) / 4),
    maxHeaderSize: 16 * 1024,
    // Checked in `refuseHostlessHttp11`, so that refusal has a problem-details body too.
    requireHostHeader: false,
  };
  const gate =
    options.gate ??
    new ConnectionGate({
      maxConnections: options.maxConnections,
      maxUnproven: options.maxUnprovenConnections,
      unprovenTimeoutMs: options.unprovenTimeoutMs,
    });
  const hono = getRequestListener(app.fetch, { hostname: HOST_OF_HOSTLESS_REQUESTS, errorHandler: requestErrorResponse });
  const lane = new KeylessLane();
  const listener = (req: IncomingMessage, res: ServerResponse): void => {
    gate.requestStarted(req.socket, res);
    const start = (): void => {
      if (!refuseHostlessHttp11(req, res)) void hono(req, res);
    };
    // Devices start at once; the rest take their turn, so a flood of them cannot hold the loop.
    if (isDeviceRequest(req)) start();
    else lane.admit(req, res, start);
  };
  const plain = createHttpServer(httpOptions, listener);
  // A handshake that stalls is bounded like headers that stall.
  const tlsOptions = { ...TLS_PROTOCOL, handshakeTimeout: options.headersTimeoutMs };
  const { cert, key } = options.certificate;
  const secure = createHttpsServer({ ...httpOptions, ...tlsOptions, ALPNProtocols: HTTP_ALPN_PROTOCOLS, cert, key }, listener);
  for (const server of [plain, secure]) server.on('clientError', answerClientError);

  const ports = await gate.listenPair(plain, secure, options.host, { plain: options.port, tls: options.httpsPort });
  return {
    server: plain,
    port: ports.plain,
    httpsPort: ports.tls,
    gate,
    setCertificate: (certificate) => secure.setSecureContext({ ...tlsOptions, cert: certificate.cert, key: certificate.key }),
    close: (deadline) => closeServers([plain, secure], gate, deadline),
  };
}

function closeServers(servers: (Server | HttpsServer)[], gate: ConnectionGate, deadline: number): Promise<void> {
  return new Promise((resolve) => {
    const cutAll = (): void => {
      gate.closeUndecided();
      for (const server of servers) server.closeAllConnections();
    };
    const timer = setTimeout(cutAll, Math.max(0, deadline - Date.now()));
    // Keep-alive connections become idle only after their in-flight request; close them as they do.
    // A TLS connection accepted on the plain port is tracked by the TLS server, so sweep both.
    const sweep = setInterval(() => {
      for (const server of servers) server.closeIdleConnections();
    }, 25);
    let open = servers.length;
    for (const server of servers) {
      server.close(() => {
        if (--open > 0) return;
        clearTimeout(timer);
        clearInterval(sweep);
        resolve();
      });
    }
    gate.closeUndecided();
  });
}
