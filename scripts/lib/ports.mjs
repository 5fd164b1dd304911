// Loopback ports for servers the tests, benchmarks and tools start, so concurrent runs never collide.
import { createServer } from 'node:net';

/** A TCP port that was free a moment ago. */
export function freePort() {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolvePort(port));
    });
  });
}
