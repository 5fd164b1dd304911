// Loopback ports for servers the tests, benchmarks and tools start, so concurrent runs never collide.
import { createServer } from 'node:net';

/** A server on a port the kernel chose. @returns {Promise<import('node:net').Server>} */
function listening() {
  return new Promise((resolveServer, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolveServer(server));
  });
}

/**
 * `count` distinct TCP ports, each free a moment ago. They are held open together until all are
 * chosen: one freed port may be the kernel's next choice, so ports asked for one after another may
 * repeat (a server's two listeners on one port: the second cannot bind).
 * @param {number} count
 */
export async function freePorts(count) {
  /** @type {import('node:net').Server[]} */
  const servers = [];
  try {
    for (let i = 0; i < count; i++) servers.push(await listening());
    return servers.map((server) => {
      const address = server.address();
      return typeof address === 'object' && address ? address.port : 0;
    });
  } finally {
    await Promise.all(servers.map((server) => new Promise((resolveClosed) => server.close(resolveClosed))));
  }
}

/** A TCP port that was free a moment ago. */
export async function freePort() {
  const [port] = await freePorts(1);
  return /** @type {number} */ (port);
}
