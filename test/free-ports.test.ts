import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { freePorts } from '../scripts/lib/ports.mjs';

describe('freePorts', () => {
  it('gives distinct ports a server can listen on at once, all of them together', async () => {
    const ports = await freePorts(50);
    expect(new Set(ports).size).toBe(50);
    const servers = await Promise.all(
      ports.map(
        (port) =>
          new Promise<ReturnType<typeof createServer>>((resolve, reject) => {
            const server = createServer();
            server.once('error', reject);
            server.listen(port, '127.0.0.1', () => resolve(server));
          }),
      ),
    );
    await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
  });
});
