import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import type { Hono } from 'hono';

export interface HttpServerOptions {
  host: string;
  port: number;
  maxConnections: number;
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  keepAliveTimeoutMs: number;
}

export interface HttpServer {
  readonly server: Server;
  readonly port: number;
  /** Stops accepting, lets in-flight requests finish until `deadline` (epoch ms), then cuts the rest. */
  close(deadline: number): Promise<void>;
}

export function startHttpServer(app: Hono, options: HttpServerOptions): Promise<HttpServer> {
  return new Promise((resolve, reject) => {
    const server = serve({
      fetch: app.fetch,
      hostname: options.host,
      port: options.port,
      serverOptions: {
        headersTimeout: options.headersTimeoutMs,
        requestTimeout: options.requestTimeoutMs,
        keepAliveTimeout: options.keepAliveTimeoutMs,
        // Node checks the header and request timeouts only this often (30 s by default).
        connectionsCheckingInterval: Math.max(100, Math.min(options.headersTimeoutMs, options.requestTimeoutMs) / 4),
        maxHeaderSize: 16 * 1024,
      },
    }) as Server;
    server.maxConnections = options.maxConnections;
    server.once('error', reject);
    server.once('listening', () => {
      server.off('error', reject);
      const port = (server.address() as AddressInfo).port;
      resolve({ server, port, close: (deadline) => closeServer(server, deadline) });
    });
  });
}

function closeServer(server: Server, deadline: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => server.closeAllConnections(), Math.max(0, deadline - Date.now()));
    // Keep-alive connections become idle only after their in-flight request; close them as they do.
    const sweep = setInterval(() => server.closeIdleConnections(), 25);
    server.close(() => {
      clearTimeout(timer);
      clearInterval(sweep);
      resolve();
    });
    server.closeIdleConnections();
  });
}
